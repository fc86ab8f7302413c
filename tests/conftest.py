"""Shared fixtures: the reference artifacts (public figures) as the canonical test input."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "artifacts" / "reference"
QMAX_REF = REFERENCE / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL_REF = REFERENCE / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


@pytest.fixture
def qmax_ref():
    from speech.schema.artifacts import QmaxArtifact
    from speech.files import load_artifact

    return load_artifact(QMAX_REF, QmaxArtifact)


@pytest.fixture
def ttotal_ref():
    from speech.schema.artifacts import TtotalArtifact
    from speech.files import load_artifact

    return load_artifact(TTOTAL_REF, TtotalArtifact)
