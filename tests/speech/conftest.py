"""Shared fixtures of the program/preview tests: the dev stack's model entry and stack-file writers."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[2]
DEV_STACK = ROOT / "Pulumi.dev.yaml"
MODELS = "speech-endpoints:models"


def dev_config() -> dict[str, Any]:
    return embedded_config(DEV_STACK)


@pytest.fixture
def kokoro_entry() -> dict[str, Any]:
    """A fresh, mutable copy of the dev stack's kokoro-82m entry."""
    return copy.deepcopy(dev_config()[MODELS]["kokoro-82m"])


@pytest.fixture
def write_stack(tmp_path: Path) -> Callable[..., Path]:
    """write_stack(models, stack="t", **extra_config) -> path of Pulumi.<stack>.yaml in tmp_path."""

    def _write(models: dict[str, Any], stack: str = "t", **extra: Any) -> Path:
        config: dict[str, Any] = {"aws:region": "eu-west-1", MODELS: models}
        config.update({k if ":" in k else f"speech-endpoints:{k}": v for k, v in extra.items()})
        path = tmp_path / f"Pulumi.{stack}.yaml"
        buf = json.dumps({"config": config})  # JSON is YAML; keeps the writer trivial
        path.write_text(buf)
        return path

    return _write


def pytest_configure(config: pytest.Config) -> None:
    # pulumi_aws warns about its own deprecated modules at import; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pulumi_aws.*")
