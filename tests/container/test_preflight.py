"""A MODEL_DIR that lacks what its backend reads stops `serve` before anything starts: one line
on stderr naming the missing file and the fix, a non-zero exit, no port opened."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run([sys.executable, "-m", "container", "serve", "--port", "0"], cwd=ROOT,
                          env=full, capture_output=True, text=True, timeout=60)


def _onnx_dir(d: Path, skip: str) -> Path:
    files = {"model": lambda: (d / "kokoro-v1.0.int8.onnx").write_bytes(b"x"),
             "voices": lambda: np.savez(d / "voices.npz", jf_alpha=np.zeros((2, 256), np.float32)),
             "vocab": lambda: (d / "vocab.json").write_text("{}")}
    for name, make in files.items():
        if name != skip:
            make()
    return d


def _torch_dir(d: Path, skip: str) -> Path:
    if skip != "config":
        (d / "config.json").write_text("{}")
    if skip != "weights":
        (d / "kokoro-v1_0.pth").write_bytes(b"x")
    (d / "voices").mkdir()
    if skip != "voices":
        (d / "voices" / "af_heart.pt").write_bytes(b"x")
    return d


def _refused(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode != 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("container cannot start:")]
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in r.stderr and not r.stdout.count('"stage": "ready"')
    return lines[0]


_ONNX_NAMES = {"model": "*.onnx", "voices": "voices.npz", "vocab": "vocab.json"}


@pytest.mark.parametrize("skip", sorted(_ONNX_NAMES))
@pytest.mark.slow
def test_onnx_model_dir_missing_a_file_refuses_to_start(tmp_path, skip):
    line = _refused(_serve({"BACKEND": "onnx", "MODEL_DIR": str(_onnx_dir(tmp_path, skip))}),
                    f"lacks {_ONNX_NAMES[skip]}", str(tmp_path), "export-model")
    named = line.split("lacks", 1)[1].split(";")[0]
    assert [n for n in _ONNX_NAMES.values() if n in named] == [_ONNX_NAMES[skip]], line


@pytest.mark.slow
def test_onnx_model_dir_that_does_not_exist_refuses_to_start(tmp_path):
    _refused(_serve({"BACKEND": "onnx", "MODEL_DIR": str(tmp_path / "nope")}), "nope", "does not exist")


@pytest.mark.parametrize("skip,needle", [
    ("config", "lacks config.json"), ("weights", "lacks *.pth (kokoro-v1_0.pth"),
    ("voices", "lacks voices/*.pt (at least one voice)")])
@pytest.mark.slow
def test_torch_model_dir_missing_a_file_refuses_to_start(tmp_path, skip, needle):
    # The check reads names only, so it needs neither torch nor real weights.
    _refused(_serve({"BACKEND": "torch", "MODEL_DIR": str(_torch_dir(tmp_path, skip))}),
             needle, str(tmp_path), "upstream Kokoro-82M layout")


@pytest.mark.slow
def test_torch_without_model_dir_refuses_to_start():
    _refused(_serve({"BACKEND": "torch", "MODEL_DIR": ""}), "needs MODEL_DIR", "/opt/ml/model")


def test_complete_layout_passes_the_check(tmp_path):
    from container.preflight import model_dir_problem
    from container.settings import Settings
    (tmp_path / "t").mkdir()
    (tmp_path / "o").mkdir()
    assert model_dir_problem(Settings(backend="torch", model_dir=_torch_dir(tmp_path / "t", skip=""))) is None
    assert model_dir_problem(Settings(backend="onnx", model_dir=_onnx_dir(tmp_path / "o", skip=""))) is None
    assert model_dir_problem(Settings(backend="sine")) is None
