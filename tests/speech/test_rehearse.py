"""`python -m speech rehearse`: the weight-cache script, the real model and the Model's exact
environment, run here the way SageMaker will run them; and the same with each broken on purpose."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from speech.infra.rehearse import image_environment, rehearse

ROOT = Path(__file__).resolve().parents[2]
DEV_STACK = ROOT / "Pulumi.dev.yaml"
STEPS = ["preview", "build", "read-only", "serve", "ping", "synthesize", "stop", "unchanged"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict, Path]:
    """The whole rehearsal of the dev stack, once: wheels from the index, real model, real server."""
    weights = tmp_path_factory.mktemp("rehearse") / "weights"
    proc = subprocess.run([sys.executable, "-m", "speech", "rehearse", "--stack", "dev", "--weights-out", str(weights),
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout), weights


@pytest.mark.slow
def test_dev_stack_rehearses_clean(built):
    report, weights = built
    assert report["ok"] is True and report["failed_step"] is None
    assert [c["step"] for c in report["checks"]] == STEPS
    by = {c["step"]: c["detail"] for c in report["checks"]}
    assert "BACKEND=onnx" in by["preview"] and "start-up timeout 83 s" in by["preview"]
    # The build wrote exactly the onnx backend's layout.
    assert sorted(os.listdir(weights)) == ["kokoro-v1.0.int8.onnx", "kokoro-v1.0.int8.sha256", "vocab.json", "voices.npz"]
    assert '"backend": "onnx"' in by["ping"] and "sha256:8b1b96bc" in by["ping"]
    assert "s of 24 kHz speech" in by["synthesize"] and "exit 0" in by["stop"]


def test_image_env_is_the_dockerfiles():
    env = image_environment()
    # Without BACKEND on the Model the image would run torch: the reason the program sets it.
    assert env["BACKEND"] == "torch" and env["MODEL_DIR"] == "/opt/ml/model" and env["PORT"] == "8080"


@pytest.mark.slow
def test_broken_cache_layout_fails_at_ping(built, tmp_path):
    _, weights = built
    broken = tmp_path / "broken"
    shutil.copytree(weights, broken)
    (broken / "kokoro-v1.0.int8.onnx").unlink()
    proc = subprocess.run([sys.executable, "-m", "speech", "rehearse", "--stack", "dev", "--weights-dir", str(broken)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED at step 'ping'" in proc.stdout
    # The container refuses a MODEL_DIR that lacks its backend's files at start-up (exit 3, one line).
    assert "exited 3 before /ping" in proc.stdout and "lacks *.onnx" in proc.stdout


@pytest.mark.slow
def test_model_env_without_backend_fails_at_ping(built):
    _, weights = built
    result = rehearse(DEV_STACK, "dev", weights_dir=weights, edit_env=lambda env: env.pop("BACKEND"))
    assert not result.ok and result.failed.step == "ping"
    # The image default (torch) looks for the upstream layout in the onnx directory.
    assert "exited 3 before /ping" in result.failed.detail and "config.json" in result.failed.detail


@pytest.mark.slow
def test_unknown_stack_is_bad_input(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "speech", "rehearse", "--stack", "nope", "--stack-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.startswith("ConfigError: ") and "Traceback" not in proc.stderr
