"""The two starter stacks of issue 25: a GPU stack (upstream weights, ml.g5.xlarge) previews with
BACKEND=torch in the CUDA image on a CUDA 12 host, a CPU stack (PyPI ONNX, ml.c7i.xlarge) with
BACKEND=onnx in the slim image; both pass the pack, on a normal and on a first preview."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from speech.infra.preview import run_preview

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("stack, instance, backend, dockerfile, ami, kind", [
    ("gpu", "ml.g5.xlarge", "torch", "container/Dockerfile", "al2-ami-sagemaker-inference-gpu-3-1", "hf"),
    ("cpu", "ml.c7i.xlarge", "onnx", "container/Dockerfile.cpu", None, "pypi"),
])
def test_example_previews_with_its_backend_and_image(stack, instance, backend, dockerfile, ami, kind):
    r = run_preview(EXAMPLES / f"Pulumi.{stack}.yaml", stack)
    env = r.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]
    [image] = r.of_type("docker-build:index:Image")
    [variant] = r.named("kokoro-82m-config").inputs["productionVariants"]
    spec = json.loads(r.named("kokoro-82m-cache-sync").inputs["source"]["buildspec"])
    assert env["BACKEND"] == backend and image.inputs["dockerfile"] == {"location": dockerfile}
    assert variant["instanceType"] == instance and variant.get("inferenceAmiVersion") == ami
    assert spec["env"]["variables"]["WEIGHTS_KIND"] == kind


@pytest.mark.parametrize("stack", ["gpu", "cpu"])
@pytest.mark.parametrize("first", [False, True])
@pytest.mark.slow
def test_example_passes_the_pack(stack, first):
    proc = subprocess.run([sys.executable, "-m", "policy", "check", "--stack-dir", str(EXAMPLES), "--stack", stack,
                           "--json", *(["--first-preview"] if first else [])],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["blocked"] is False and not [v for v in report["violations"] if v.get("level") == "mandatory"]
