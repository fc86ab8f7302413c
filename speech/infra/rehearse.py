"""``python -m speech rehearse --stack NAME``: what SageMaker will do with the previewed resources,
done locally before an account pays for it.

1. **preview**: run the program under Pulumi's mocks; take the CodeBuild project's buildspec, the
   Model's container environment and the variant's container start-up health-check timeout.
   (**checkpoint**, torch layouts only: the upstream checkpoint cannot be downloaded here, so a
   kokoro.KModel with upstream's config.json and random weights is saved in upstream's exact
   layout and formats, config.json, kokoro-v1_0.pth as a dict of sub-module state dicts, and
   voices/*.pt of shape [510, 1, 256]; the build stages it instead of downloading, its one
   substitution. An ``s3://...tar.gz`` source gets it as a tar.gz, so the archive path runs too.)
2. **build**: unpack the CodeBuild source archive the preview uploads (the object's exact bytes,
   sha256 printed and checked against the object's metadata) into an empty directory and run the
   buildspec's script from there with the buildspec's variables: a fresh virtualenv, real wheels
   from the package index, nothing from the repository on the exporter's path (its sys.path is
   checked). A module the exporter imports that the archive lacks fails here, named. The hf and s3
   builds stage the checkpoint above instead of downloading (WEIGHTS_LOCAL_SOURCE).
3. **read-only**: the directory becomes the model directory, write permission removed and its
   files fingerprinted (SageMaker mounts /opt/ml/model read-only).
4. **serve**: ``python -m container serve`` with the ENV of the image the program builds for the
   backend (container/Dockerfile for torch, container/Dockerfile.cpu for onnx) overlaid by exactly
   the Model's environment; only MODEL_DIR (/opt/ml/model -> the directory), HOST and PORT are
   local, and TORCH_DEVICE=cuda becomes cpu on a machine without an NVIDIA GPU.
5. **ping**: /ping 200 within the start-up timeout (an error status ends the wait at once).
6. **synthesize**: one real sentence through /invocations; audio of plausible length, not silence.
7. **stop**: SIGTERM, exit 0 within the drain timeout.
8. **unchanged**: the model directory has the same files and bytes as after the build.

Exit 0 when every step holds; 1 naming the first failed step; 2 bad input; 130 interrupted.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speech.deploy.weights import MODEL_DIR, ROOT, SCRIPT_NAME
from speech.errors import RehearsalError
from speech.infra.checkpoint import VOICE_SHAPE, write_upstream_checkpoint
from speech.infra.components.image import DOCKERFILE as GPU_DOCKERFILE
from speech.infra.components.image import dockerfile_for

DOCKERFILE = ROOT / GPU_DOCKERFILE
SENTENCE = "The endpoint is ready to speak, and this sentence proves it."
SAMPLE_RATE = 24000
MIN_AUDIO_S = 1.0
"""A dozen words at any sane speed last longer than a second."""
STOP_GRACE_S = 10.0


@dataclass
class Check:
    step: str
    ok: bool
    detail: str
    seconds: float = 0.0


@dataclass
class Rehearsal:
    stack: str
    model: str
    checks: list[Check] = field(default_factory=list)
    model_dir: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)


# --- what the preview says -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The previewed resources one rehearsal needs."""

    model: str
    buildspec: dict[str, Any]
    environment: dict[str, str]
    startup_timeout_s: int
    archive: bytes = b""
    """The CodeBuild source archive's bytes, as the preview uploads them."""
    archive_sha256: str = ""
    """The sha256 the uploaded object's metadata records."""


def from_preview(stack_file: Path, stack: str, model: str | None = None) -> Plan:
    from speech.infra.preview import run_preview

    result = run_preview(stack_file, stack)
    models = [r for r in result.resources if r.type == "aws:sagemaker/model:Model"]
    names = [r.name.removesuffix("-model") for r in models]
    if not models:
        raise RehearsalError(f"stack {stack!r} has no SageMaker model to rehearse")
    if model is None:
        if len(models) > 1:
            raise RehearsalError(f"stack {stack!r} has {len(models)} models ({', '.join(names)}); pick one with --model")
        model = names[0]
    if model not in names:
        raise RehearsalError(f"--model {model!r} is not in stack {stack!r} (models: {', '.join(names)})")
    m = result.named(f"{model}-model").inputs
    project = result.named(f"{model}-cache-sync").inputs
    source = result.named(f"{model}-cache-source").inputs
    if not source.get("contentBase64"):
        raise RehearsalError(f"the build source object {model}-cache-source carries no archive bytes (contentBase64)")
    config = result.named(f"{model}-config").inputs
    env = {k: str(v) for k, v in (m.get("primaryContainer", {}).get("environment") or {}).items()}
    variant = (config.get("productionVariants") or [{}])[0]
    return Plan(
        model=model,
        buildspec=json.loads(project["source"]["buildspec"]),
        environment=env,
        startup_timeout_s=int(variant.get("containerStartupHealthCheckTimeoutInSeconds") or 0),
        archive=base64.b64decode(source["contentBase64"]),
        archive_sha256=str((source.get("metadata") or {}).get("sha256", "")),
    )


def image_environment(dockerfile: Path = DOCKERFILE) -> dict[str, str]:
    """``ENV`` of the image (``KEY=value`` pairs, continuation lines joined): what the Model's
    environment is laid over on an instance."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text(encoding="utf-8"))
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.upper().startswith("ENV "):
            for key, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|\S+)", line[4:]):
                env[key] = value.strip('"')
    return env


def checkpoint_for(plan: Plan, tmpdir: Path, edit: Callable[[Path], None] | None = None) -> tuple[Check, Path]:
    """The stand-in for the download of a torch source: a random checkpoint in upstream's layout, with the
    voices the build requires (and the OpenAI names resolve to); a tar.gz for an ``s3://...tar.gz`` source."""
    import tarfile

    from speech.deploy.weights import REQUIRED_VOICES

    t0 = time.monotonic()
    variables = plan.buildspec.get("env", {}).get("variables", {})
    wanted = tuple(variables.get("WEIGHTS_VOICES", "").split()) or REQUIRED_VOICES
    src = write_upstream_checkpoint(tmpdir / "upstream", wanted)
    if edit is not None:
        edit(src)
    source = variables.get("WEIGHTS_SOURCE", "")
    if source.endswith(".tar.gz"):
        archive = tmpdir / "model.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for f in sorted(src.rglob("*")):
                tar.add(f, arcname=f.relative_to(src).as_posix(), recursive=False)
        src = archive
    return Check("checkpoint", True, f"kokoro.KModel with upstream's config.json and random weights in the upstream "
                 f"layout ({len(wanted)} voices of shape {list(VOICE_SHAPE)}) stands in for {source or 'the download'}"
                 f"{' as a tar.gz' if src.name.endswith('.tar.gz') else ''}", time.monotonic() - t0), src


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


def isolation_problem(log_text: str, source: Path) -> str | None:
    """What in the build's log shows the repository on the exporter's path (None: nothing does)."""
    exporter = next((line.split(" ", 2)[2] for line in log_text.splitlines() if line.startswith("weight-cache: exporter ")), None)
    paths = next((line.split(" ", 2)[2] for line in log_text.splitlines() if line.startswith("weight-cache: sys.path ")), None)
    if exporter is None or paths is None:
        return "the build log does not say where the exporter came from (weight-cache: exporter / sys.path lines)"
    if not Path(exporter).resolve().is_relative_to(source.resolve()):
        return f"the exporter was imported from {exporter}, not from the unpacked archive {source}"
    import ast as _ast

    inside = [p for p in _ast.literal_eval(paths) if p and Path(p).resolve().is_relative_to(ROOT)
              and not Path(p).resolve().is_relative_to(source.resolve())]
    if inside:
        return f"the exporter's sys.path holds the repository: {', '.join(inside)}"
    return None


def run_build(plan: Plan, out: Path, log: Path, local_source: Path | None = None) -> Check:
    """Unpack the archive the preview ships into an empty directory and run the buildspec's script
    there with its variables into ``out`` (the S3 sync is the only command skipped; ``local_source``
    replaces the download of an hf or s3 source)."""
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
    problem = isolation_problem(text, source)
    if problem:
        return Check("build", False, f"{what}; {problem}", took)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    shown = [f for f in files if not f.startswith("voices/")]
    voices = len(files) - len(shown)
    return Check("build", True, f"{what}, run there in a fresh virtualenv (nothing from the repository on sys.path): "
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


def image_for(plan: Plan) -> Path:
    """The Dockerfile of the image the program builds for the Model's backend."""
    return ROOT / dockerfile_for(plan.environment.get("BACKEND", "torch"))


def container_env(plan: Plan, model_dir: Path, port: int) -> tuple[dict[str, str], list[str]]:
    """The image's ENV, then the Model's environment verbatim; returns (env, local substitutions)."""
    dockerfile = image_for(plan)
    env = image_environment(dockerfile)
    env.update(plan.environment)
    notes = [f"image ENV of {dockerfile.relative_to(ROOT)}"]
    if env.get("MODEL_DIR") == MODEL_DIR:
        env["MODEL_DIR"] = str(model_dir)
        notes.append(f"MODEL_DIR {MODEL_DIR} -> {model_dir}")
    if env.get("TORCH_DEVICE") == "cuda" and shutil.which("nvidia-smi") is None:
        env["TORCH_DEVICE"] = "cpu"
        notes.append("TORCH_DEVICE cuda -> cpu (no NVIDIA GPU here)")
    env.update({"HOST": "127.0.0.1", "PORT": str(port), "PYTHONPATH": str(ROOT)})
    notes.append(f"HOST/PORT -> 127.0.0.1:{port}")
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    env["HOME"] = os.environ.get("HOME", "/root")
    return env, notes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen, base: str, timeout_s: float, log_path: Path | None = None) -> Check:
    """/ping 200 within the start-up timeout. A container that exits first (it refuses a MODEL_DIR
    lacking its backend's files, exit 3) is named with the last line it printed (``log_path``)."""
    import httpx

    t0 = time.monotonic()
    last = "no answer"
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            said = ""
            if log_path is not None and log_path.exists():
                lines = log_path.read_text(errors="replace").strip().splitlines()
                said = f": {lines[-1]}" if lines else ""
            return Check("ping", False, f"the container exited {proc.returncode} before /ping answered 200{said}",
                         time.monotonic() - t0)
        try:
            r = httpx.get(f"{base}/ping", timeout=2.0)
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            if r.status_code == 200:
                return Check("ping", True, f"/ping 200 after {time.monotonic() - t0:.1f} s (timeout {timeout_s:g} s): "
                             f"{json.dumps(body, sort_keys=True)}", time.monotonic() - t0)
            if body.get("status") == "error":
                # A load error never heals: SageMaker would fail the health check at the timeout.
                return Check("ping", False, f"/ping 503, model not loaded: {body.get('detail')}", time.monotonic() - t0)
            last = f"/ping {r.status_code} {body.get('status', '')}".strip()
        except httpx.HTTPError as err:
            last = f"{err.__class__.__name__}"
        time.sleep(0.5)
    return Check("ping", False, f"no /ping 200 within the container start-up timeout {timeout_s:g} s (last: {last})",
                 time.monotonic() - t0)


def synthesize(base: str, text: str = SENTENCE) -> Check:
    import httpx
    import numpy as np

    t0 = time.monotonic()
    try:
        r = httpx.post(f"{base}/invocations", json={"text": text, "response_format": "pcm", "stream": False},
                       timeout=120.0)
    except httpx.HTTPError as err:
        return Check("synthesize", False, f"/invocations failed: {err!r}", time.monotonic() - t0)
    took = time.monotonic() - t0
    if r.status_code != 200:
        return Check("synthesize", False, f"/invocations {r.status_code}: {r.text[:300]}", took)
    pcm = np.frombuffer(r.content[: len(r.content) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    audio_s = len(pcm) / SAMPLE_RATE
    rms = float(np.sqrt(np.mean(pcm ** 2))) if len(pcm) else 0.0
    if audio_s < MIN_AUDIO_S or rms < 1e-3:
        return Check("synthesize", False, f"{audio_s:.2f} s of audio, RMS {rms:.4f}: expected at least {MIN_AUDIO_S:g} s "
                     "of non-silent speech", took)
    return Check("synthesize", True, f"{len(text)} characters -> {audio_s:.2f} s of 24 kHz speech (RMS {rms:.3f}) "
                 f"in {took:.1f} s", took)


def stop(proc: subprocess.Popen, drain_s: float) -> Check:
    t0 = time.monotonic()
    if proc.poll() is not None:
        return Check("stop", False, f"the container had already exited {proc.returncode}")
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=drain_s + STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return Check("stop", False, f"no exit within {drain_s + STOP_GRACE_S:g} s of SIGTERM (killed)", time.monotonic() - t0)
    took = time.monotonic() - t0
    return Check("stop", rc == 0, f"SIGTERM -> exit {rc} in {took:.1f} s", took)


# --- the rehearsal ---------------------------------------------------------------------------------


def rehearse(stack_file: Path, stack: str, *, model: str | None = None, weights_dir: Path | None = None,
             weights_out: Path | None = None, edit_env: Callable[[dict[str, str]], None] | None = None,
             edit_checkpoint: Callable[[Path], None] | None = None,
             progress: Callable[[Check], None] = lambda c: None, until: str | None = None) -> Rehearsal:
    """Run every step; stops at the first failure. ``weights_dir`` reuses a directory an earlier
    rehearsal built (copied, so it stays untouched); ``weights_out`` keeps this build there;
    ``edit_env`` lets a caller change the Model's environment before the container starts;
    ``edit_checkpoint`` changes the stand-in upstream checkpoint before the build reads it;
    ``until="build"`` stops once the weight cache is built (and kept in ``weights_out``), without
    serving it: for a source whose build differs and whose layout an earlier rehearsal served."""
    t0 = time.monotonic()
    plan = from_preview(stack_file, stack, model)
    if edit_env is not None:
        env = dict(plan.environment)
        edit_env(env)
        plan = Plan(plan.model, plan.buildspec, env, plan.startup_timeout_s, plan.archive, plan.archive_sha256)
    result = Rehearsal(stack=stack, model=plan.model)

    def record(c: Check) -> bool:
        result.checks.append(c)
        progress(c)
        return c.ok

    record(Check("preview", True, f"Model {plan.model}-model: BACKEND={plan.environment.get('BACKEND', '(image default)')}"
                 f", MODEL_DIR={plan.environment.get('MODEL_DIR', '(image default)')}; start-up timeout "
                 f"{plan.startup_timeout_s} s", time.monotonic() - t0))
    with tempfile.TemporaryDirectory(prefix="speech-rehearse-") as tmp:
        tmpdir = Path(tmp)
        model_dir = tmpdir / "model"
        try:
            if weights_dir is not None:
                if not Path(weights_dir).is_dir():
                    raise RehearsalError(f"--weights-dir {weights_dir} is not a directory; build one with --weights-out")
                shutil.copytree(weights_dir, model_dir)
                record(Check("build", True, f"reused {weights_dir} (--weights-dir): {', '.join(sorted(os.listdir(model_dir)))}"))
            else:
                local = None
                if plan.buildspec.get("env", {}).get("variables", {}).get("WEIGHTS_KIND") in ("hf", "s3"):
                    made, local = checkpoint_for(plan, tmpdir, edit_checkpoint)
                    record(made)
                if not record(run_build(plan, model_dir, tmpdir / "build.log", local)):
                    return result
            if weights_out is not None and weights_dir is None:
                shutil.copytree(model_dir, weights_out)
            if until == "build":
                return result
            before = snapshot(model_dir)
            make_read_only(model_dir)
            result.model_dir = str(model_dir)
            record(Check("read-only", True, f"{model_dir}: {len(before)} files, write permission removed"))
            if not plan.startup_timeout_s:
                record(Check("ping", False, "the endpoint configuration sets no container start-up health-check timeout"))
                return result
            port = _free_port()
            env, notes = container_env(plan, model_dir, port)
            log = open(tmpdir / "container.log", "w", encoding="utf-8")
            proc = subprocess.Popen([sys.executable, "-m", "container", "serve"], cwd=str(ROOT), env=env,
                                    stdout=log, stderr=subprocess.STDOUT)
            try:
                record(Check("serve", True, f"python -m container serve, pid {proc.pid}, the Model's environment "
                             f"({len(plan.environment)} variables; local: {'; '.join(notes)})"))
                base = f"http://127.0.0.1:{port}"
                ok = record(wait_ready(proc, base, plan.startup_timeout_s, tmpdir / "container.log")) and record(synthesize(base))
                drain = float(env.get("DRAIN_TIMEOUT_S", 25))
                stopped = stop(proc, drain)
                if not ok:
                    return result
                if not record(stopped):
                    return result
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                log.close()
                if not result.ok:
                    tail = (tmpdir / "container.log").read_text(errors="replace").strip().splitlines()[-5:]
                    if tail and result.checks and result.checks[-1].step in ("ping", "synthesize", "stop"):
                        result.checks[-1].detail += " | container log: " + " | ".join(tail)
            after = snapshot(model_dir)
            changed = sorted(set(before.items()) ^ set(after.items()))
            record(Check("unchanged", not changed, "the model directory is byte-identical after serving" if not changed
                         else f"the container changed the model directory: {', '.join(sorted({p for p, _ in changed}))}"))
        finally:
            make_writable(model_dir) if model_dir.exists() else None
    return result


def render(r: Rehearsal) -> str:
    lines = [f"SageMaker rehearsal of stack {r.stack!r}, model {r.model}"]
    for c in r.checks:
        lines.append(f"  [{'ok' if c.ok else 'FAIL':>4}] {c.step:<11} {c.detail}")
    failed = r.failed
    lines.append("")
    lines.append(f"FAILED at step {failed.step!r}" if failed else "OK: SageMaker would start this endpoint")
    return "\n".join(lines)
