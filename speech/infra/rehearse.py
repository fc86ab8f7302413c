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
   builds stage the checkpoint above instead of downloading (WEIGHTS_LOCAL_SOURCE). With
   ``--cache-dir`` the virtualenv (per interpreter and wheel set) and the checkpoint are kept there
   and reused by the next rehearsal (:mod:`speech.infra.rehearse_cache`).
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

The build's steps are in :mod:`speech.infra.rehearse_build`, the running container's in
:mod:`speech.infra.rehearse_serve`, what they share in :mod:`speech.infra.rehearse_steps`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from speech.deploy.weights import MODEL_DIR, ROOT
from speech.errors import RehearsalError
from speech.infra.components.image import DOCKERFILE as GPU_DOCKERFILE
from speech.infra.components.image import dockerfile_for
from speech.infra.rehearse_build import checkpoint_for, make_read_only, make_writable, run_build, snapshot
from speech.infra.rehearse_cache import cache_root
from speech.infra.rehearse_serve import free_port, stop, synthesize, wait_ready
from speech.infra.rehearse_steps import Check, Plan, Rehearsal

DOCKERFILE = ROOT / GPU_DOCKERFILE


# --- what the preview says -------------------------------------------------------------------------


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


# --- the rehearsal ---------------------------------------------------------------------------------


def _fill(plan: Plan, tmpdir: Path, model_dir: Path, record: Callable[[Check], bool], weights_dir: Path | None,
          edit_checkpoint: Callable[[Path], None] | None, cache_dir: Path | None) -> bool:
    """Step 2 (and the checkpoint before it, for a torch source): ``model_dir`` built, or copied from
    ``weights_dir``; False when the build failed (its check recorded)."""
    if weights_dir is not None:
        if not Path(weights_dir).is_dir():
            raise RehearsalError(f"--weights-dir {weights_dir} is not a directory; build one with --weights-out")
        shutil.copytree(weights_dir, model_dir)
        return record(Check("build", True, f"reused {weights_dir} (--weights-dir): {', '.join(sorted(os.listdir(model_dir)))}"))
    local = None
    if plan.buildspec.get("env", {}).get("variables", {}).get("WEIGHTS_KIND") in ("hf", "s3"):
        made, local = checkpoint_for(plan, tmpdir, edit_checkpoint, cache_dir)
        record(made)
    return record(run_build(plan, model_dir, tmpdir / "build.log", local, cache_dir))


def rehearse(stack_file: Path, stack: str, *, model: str | None = None, weights_dir: Path | None = None,
             weights_out: Path | None = None, edit_env: Callable[[dict[str, str]], None] | None = None,
             edit_checkpoint: Callable[[Path], None] | None = None,
             progress: Callable[[Check], None] = lambda c: None, until: str | None = None,
             cache_dir: Path | None = None) -> Rehearsal:
    """Run every step; stops at the first failure. ``weights_dir`` reuses a directory an earlier
    rehearsal built (copied, so it stays untouched); ``weights_out`` keeps this build there;
    ``edit_env`` lets a caller change the Model's environment before the container starts;
    ``edit_checkpoint`` changes the stand-in upstream checkpoint before the build reads it;
    ``until="build"`` stops once the weight cache is built (and kept in ``weights_out``), without
    serving it: for a source whose build differs and whose layout an earlier rehearsal served;
    ``cache_dir`` keeps the build's virtualenv and the torch stand-in checkpoint for the next rehearsal
    and reuses what an earlier one kept (:mod:`speech.infra.rehearse_cache`)."""
    t0 = time.monotonic()
    if cache_dir is not None:
        cache_root(cache_dir)  # a bad --cache-dir is refused before anything runs
    plan = from_preview(stack_file, stack, model)
    if edit_env is not None:
        env = dict(plan.environment)
        edit_env(env)
        plan = dataclasses.replace(plan, environment=env)
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
            if not _fill(plan, tmpdir, model_dir, record, weights_dir, edit_checkpoint, cache_dir):
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
            port = free_port()
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
