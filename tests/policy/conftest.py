"""One real pack process per test session; the dev stack previewed once under Pulumi's mocks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from policy.check import preview_resources
from policy.harness import PackClient, Resource

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pack():
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
