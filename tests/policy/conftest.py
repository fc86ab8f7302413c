"""The pack's policies in process (``pack``), one real pack process per session for the
end-to-end tests (``real_pack``); the dev stack previewed once under Pulumi's mocks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from policy.check import preview_resources
from policy.harness import PackClient, Resource
from policy.inprocess import InProcessPack
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pack() -> InProcessPack:
    """Every policy of the pack called in process with a collecting report (each rule is a pure
    function of the stack): what the rule tests use."""
    return InProcessPack(stack="dev")


@pytest.fixture(scope="session")
def real_pack():
    """The real pack process over the analyzer protocol (tests/policy/test_end_to_end.py)."""
    with PackClient(stack="dev") as client:
        yield client


@pytest.fixture(scope="session")
def _dev_resources() -> list[Resource]:
    resources, _ = preview_resources(ROOT / "Pulumi.dev.yaml", "dev")
    return resources


@pytest.fixture
def dev(_dev_resources) -> list[Resource]:
    """A fresh, editable copy of the dev stack's registered resources."""
    return copy.deepcopy(_dev_resources)


def write_built_stack(directory: Path, *, measurements: bool = False, stack: str = "built") -> Path:
    """The dev stack's model as a new user starts it: no image (the program builds it)."""
    import json


    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    entry = config["speech-endpoints:models"]["kokoro-82m"]
    del entry["image"]
    if not measurements:
        del entry["measurements"]
    path = directory / f"Pulumi.{stack}.yaml"
    path.write_text(json.dumps({"config": config}))
    return path


@pytest.fixture(scope="session")
def _built_resources(tmp_path_factory) -> list[Resource]:
    resources, _ = preview_resources(write_built_stack(tmp_path_factory.mktemp("built")), "built")
    return resources


@pytest.fixture
def built(_built_resources) -> list[Resource]:
    """A fresh, editable copy of a stack that builds its image (no measurements)."""
    return copy.deepcopy(_built_resources)
