"""`python -m speech rehearse`: the weight-cache script, the real model and the Model's exact
environment, run here the way SageMaker will run them; and the same with each broken on purpose.

Every rehearsal here shares one ``--cache-dir`` (``cache``): the first full rehearsal of each stack makes
the build's virtualenv and the torch stand-in checkpoint there, as a user's first rehearsal would, and
the rehearsals of broken variants reuse them, as a user's next rehearsal would, so each pays only for
the step it breaks. A test that needs a warm cache asks for the fixture that filled it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from speech.deploy import weights
from speech.infra.preview import run_preview
from speech.infra.rehearse import image_environment, rehearse
from speech.infra.rehearse_build import isolation_problem

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
CPU_STACK = EXAMPLES / "Pulumi.cpu.yaml"
GPU_STACK = EXAMPLES / "Pulumi.gpu.yaml"
STEPS = ["preview", "build", "read-only", "serve", "ping", "synthesize", "stop", "unchanged"]
TORCH_STEPS = ["preview", "checkpoint", *STEPS[1:]]


def _rehearse_cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "speech", "rehearse", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The --cache-dir every rehearsal of this module shares (empty at first)."""
    return tmp_path_factory.mktemp("rehearse-cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache) -> tuple[dict, Path]:
    """The whole rehearsal of the CPU example stack, once: wheels from the index into a new virtualenv (kept
    in ``cache``), real model, real server."""
    weights = tmp_path_factory.mktemp("rehearse") / "weights"
    proc = _rehearse_cli("--stack-dir", str(EXAMPLES), "--stack", "cpu", "--weights-out", str(weights), "--json",
                         "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout), weights


@pytest.fixture(scope="module")
def gpu_built(tmp_path_factory, cache) -> tuple[dict, Path]:
    """The GPU example stack's torch path, once: a random checkpoint in the upstream layout (kept in ``cache``)
    through the same weight-cache build (huggingface_hub installed from the index into a new virtualenv, kept
    too), served by the torch backend (CPU here)."""
    weights = tmp_path_factory.mktemp("rehearse-gpu") / "weights"
    proc = _rehearse_cli("--stack-dir", str(EXAMPLES), "--stack", "gpu", "--weights-out", str(weights), "--json",
                         "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout), weights


def test_cpu_stack_rehearses_clean(built):
    report, weights = built
    assert report["ok"] is True and report["failed_step"] is None
    assert [c["step"] for c in report["checks"]] == STEPS
    by = {c["step"]: c["detail"] for c in report["checks"]}
    assert "BACKEND=onnx" in by["preview"] and "start-up timeout 600 s" in by["preview"]
    assert "image ENV of container/Dockerfile.cpu" in by["serve"]
    # The build ran the archive the preview uploads (same sha256), alone.
    source = run_preview(CPU_STACK, "cpu").named("kokoro-82m-cache-source").inputs
    assert f"source archive sha256 {source['metadata']['sha256']} " in by["build"]
    assert "nothing from the repository on sys.path" in by["build"]
    # The first build with these wheels made its virtualenv (in the cache, for the next rehearsal).
    assert "the virtualenv --cache-dir keeps for these packages (venv-" in by["build"] and ", new)" in by["build"]
    # The build wrote exactly the onnx backend's layout, and its manifest.
    assert sorted(os.listdir(weights)) == ["MANIFEST.sha256", "kokoro-v1.0.int8.onnx", "kokoro-v1.0.int8.sha256",
                                           "vocab.json", "voices.npz"]
    manifest = (weights / "MANIFEST.sha256").read_text().splitlines()
    assert [line.split("  ")[1] for line in manifest] == ["kokoro-v1.0.int8.onnx", "kokoro-v1.0.int8.sha256",
                                                         "vocab.json", "voices.npz"]
    assert '"backend": "onnx"' in by["ping"]
    assert "s of 24 kHz speech" in by["synthesize"] and "exit 0" in by["stop"]


def test_gpu_stack_rehearses_the_torch_path(gpu_built):
    from speech.deploy.weights import REQUIRED_VOICES

    report, weights = gpu_built
    assert report["ok"] is True and [c["step"] for c in report["checks"]] == TORCH_STEPS
    by = {c["step"]: c["detail"] for c in report["checks"]}
    assert "BACKEND=torch" in by["preview"] and "hf:hexgrad/Kokoro-82M@" in by["checkpoint"]
    assert "weight_cache.sh (hf)" in by["build"] and "image ENV of container/Dockerfile;" in by["serve"]
    assert "kept in --cache-dir (checkpoint-" in by["checkpoint"] and ", new)" in by["build"]
    files = sorted(p.relative_to(weights).as_posix() for p in weights.rglob("*") if p.is_file())
    assert files == sorted(["MANIFEST.sha256", "config.json", "kokoro-v1_0.pth", *(f"voices/{v}.pt" for v in REQUIRED_VOICES)])
    assert '"backend": "torch"' in by["ping"] and '"status": "ok"' in by["ping"]
    assert "s of 24 kHz speech" in by["synthesize"]


def test_the_checkpoint_has_upstreams_formats(gpu_built):
    """What KModel and the torch backend read: a dict of the five sub-module state dicts with DataParallel's
    'module.' prefix; voices of shape [510, 1, 256]; upstream's config keys and vocabulary."""
    import torch

    from speech.infra.checkpoint import KMODEL_PARTS, UPSTREAM_HYPERPARAMETERS, upstream_vocab

    _, weights = gpu_built
    sd = torch.load(weights / "kokoro-v1_0.pth", map_location="cpu", weights_only=True)
    assert list(sd) == list(KMODEL_PARTS) and all(k.startswith("module.") for part in sd.values() for k in part)
    assert tuple(torch.load(weights / "voices" / "af_heart.pt", weights_only=True).shape) == (510, 1, 256)
    config = json.loads((weights / "config.json").read_text())
    upstream = json.loads((Path(__import__("kokoro_onnx").__file__).parent / "config.json").read_text())
    assert config == upstream == {**UPSTREAM_HYPERPARAMETERS, "vocab": upstream_vocab()}


def test_a_missing_voice_stops_the_build(gpu_built, cache):
    result = rehearse(GPU_STACK, "gpu", cache_dir=cache, edit_checkpoint=lambda d: (d / "voices" / "af_heart.pt").unlink())
    assert not result.ok and result.failed.step == "build"
    assert "voices lacks af_heart" in result.failed.detail
    # The stand-in gpu_built kept was reused, and the voice was taken from a copy of it: the cache still has it.
    assert "reused from --cache-dir (checkpoint-" in result.checks[1].detail
    kept = [d for d in cache.glob("checkpoint-*") if d.is_dir()]
    assert len(kept) == 1 and (kept[0] / "voices" / "af_heart.pt").is_file()


def test_a_foreign_checkpoint_fails_at_ping(gpu_built, tmp_path):
    import torch

    _, weights = gpu_built
    broken = tmp_path / "broken"
    shutil.copytree(weights, broken, ignore=shutil.ignore_patterns("*.pth"))  # replaced below: not copied first
    # Same file name and format, another architecture's keys: KModel would load it as random weights.
    torch.save({"encoder": {"module.weight": torch.zeros(2)}}, broken / "kokoro-v1_0.pth")
    proc = _rehearse_cli("--stack-dir", str(EXAMPLES), "--stack", "gpu", "--weights-dir", str(broken), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED at step 'ping'" in proc.stdout and "model not loaded" in proc.stdout
    assert "kokoro-v1_0.pth" in proc.stdout.split("FAILED at step")[1]  # the reason names the file


def _digests(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


def test_an_s3_archive_source_rehearses_through_the_tar_path(gpu_built, cache, tmp_path):
    import torch
    from ruamel.yaml import YAML

    from speech.infra.checkpoint import KMODEL_PARTS

    config = YAML(typ="safe").load(GPU_STACK.read_text())["config"]
    config["speech-endpoints:models"]["kokoro-82m"]["weights_source"] = "s3://team-weights/kokoro/v3/model.tar.gz"
    stack = tmp_path / "Pulumi.own.yaml"
    stack.write_text(json.dumps({"config": config}))
    packed: dict[str, str] = {}

    def small(d: Path) -> None:
        # Packing, unpacking, staging, checking and the manifest do the same whatever the weights weigh; upstream's
        # format in miniature (a dict of the five parts' state dicts) keeps 330 MB of random floats out of gzip.
        torch.save({part: {"module.weight": torch.randn(4)} for part in KMODEL_PARTS}, d / "kokoro-v1_0.pth")
        packed.update(_digests(d))

    # The tar path differs from the hf path in the checkpoint and the build only: it is rehearsed up to
    # the built cache, which must be the layout the hf path's rehearsal served (gpu_built: the torch
    # server started on it and spoke), file for file, holding the bytes that went into the archive.
    result = rehearse(stack, "own", weights_out=tmp_path / "weights", until="build", cache_dir=cache, edit_checkpoint=small)
    by = {c.step: c.detail for c in result.checks}
    assert result.ok and list(by) == ["preview", "checkpoint", "build"], by
    assert "as a tar.gz" in by["checkpoint"] and "weight_cache.sh (s3)" in by["build"]
    _, served = gpu_built
    built = _digests(tmp_path / "weights")
    assert sorted(built) == sorted(_digests(served))
    assert {k: v for k, v in built.items() if k != "MANIFEST.sha256"} == packed
    manifest = dict(reversed(line.split("  ")) for line in (tmp_path / "weights" / "MANIFEST.sha256").read_text().splitlines())
    assert manifest == packed


def test_image_env_is_the_dockerfiles():
    gpu = image_environment(ROOT / "container" / "Dockerfile")
    cpu = image_environment(ROOT / "container" / "Dockerfile.cpu")
    assert gpu["BACKEND"] == "torch" and gpu["TORCH_DEVICE"] == "cuda" and gpu["MODEL_DIR"] == "/opt/ml/model"
    assert cpu["BACKEND"] == "onnx" and "TORCH_DEVICE" not in cpu and cpu["PORT"] == "8080"


def test_broken_cache_layout_fails_at_ping(built, tmp_path):
    _, weights = built
    broken = tmp_path / "broken"
    shutil.copytree(weights, broken)
    (broken / "kokoro-v1.0.int8.onnx").unlink()
    proc = _rehearse_cli("--stack-dir", str(EXAMPLES), "--stack", "cpu", "--weights-dir", str(broken), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # The container refuses the directory before serving (exit 3) and says what it lacks.
    assert "FAILED at step 'ping'" in proc.stdout
    assert "the container exited 3" in proc.stdout and "*.onnx" in proc.stdout


def test_model_env_with_the_other_backend_fails_at_ping(built):
    _, weights = built
    result = rehearse(CPU_STACK, "cpu", weights_dir=weights, edit_env=lambda env: env.update(BACKEND="torch"))
    assert not result.ok and result.failed.step == "ping"
    # torch looks for the upstream layout in the onnx directory, and the container refuses it at start.
    assert "exited 3" in result.failed.detail and "config.json, kokoro-v1_0.pth and voices/*.pt" in result.failed.detail


def test_unknown_stack_is_bad_input(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "speech", "rehearse", "--stack", "nope", "--stack-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.startswith("ConfigError: ") and "Traceback" not in proc.stderr


def test_a_second_build_reuses_the_virtualenv_and_builds_the_same_bytes(built, cache, tmp_path):
    """--cache-dir: the build after the first runs in the virtualenv the first one made, still apart from the
    repository, and writes the same files, byte for byte."""
    result = rehearse(CPU_STACK, "cpu", cache_dir=cache, weights_out=tmp_path / "weights", until="build")
    by = {c.step: c.detail for c in result.checks}
    assert result.ok and list(by) == ["preview", "build"], by
    assert ", reused) (nothing from the repository on sys.path)" in by["build"]
    _, first = built
    assert _digests(tmp_path / "weights") == _digests(first)


def test_a_module_left_out_of_the_archive_fails_the_build_and_is_named(built, cache, monkeypatch):
    """The archive's list without container/voices.py (the bug this replaced): the shipped archive
    alone cannot export, and the rehearsal says which module is missing. (In the virtualenv ``built``
    kept: the wheels are not what is broken.)"""
    full = weights.export_sources
    monkeypatch.setattr(weights, "export_sources", lambda *a, **k: tuple(f for f in full(*a, **k) if f != "container/voices.py"))
    result = rehearse(CPU_STACK, "cpu", cache_dir=cache)
    assert not result.ok and result.failed.step == "build"
    assert "cannot import container.voices: the archive lacks it" in result.failed.detail


def test_isolation_reads_the_build_log(tmp_path):
    src = tmp_path / "source"
    src.mkdir()
    ok = f"weight-cache: exporter {src}/container/__init__.py\nweight-cache: sys.path {[str(src), '/usr/lib/python3.11']!r}\n"
    assert isolation_problem(ok, src) is None
    leaked = f"weight-cache: exporter {ROOT}/container/__init__.py\nweight-cache: sys.path {[str(ROOT)]!r}\n"
    assert "not from the unpacked archive" in isolation_problem(leaked, src)
    on_path = f"weight-cache: exporter {src}/container/__init__.py\nweight-cache: sys.path {[str(src), str(ROOT)]!r}\n"
    assert "holds the repository" in isolation_problem(on_path, src)
    assert "does not say" in isolation_problem("", src)
    # --cache-dir's virtualenv may lie inside the repository: its site-packages are the build's own.
    venv = ROOT / ".rehearse-cache" / "venv-0123456789abcdef"
    cached = f"weight-cache: exporter {src}/container/__init__.py\nweight-cache: sys.path {[str(src), str(venv / 'lib')]!r}\n"
    assert isolation_problem(cached, src, venv) is None and "holds the repository" in isolation_problem(cached, src)
