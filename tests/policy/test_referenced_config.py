"""The pack's verdicts do not depend on how stack config holds the artifacts: the committed stacks
(artifacts by reference) and the same stacks with the artifacts embedded get the same diagnostics
from the pack (its policies in process, which test_end_to_end holds equal to the real pack process),
under the default and the production policy config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.check import load_config, preview_resources
from tests.stack_files import embedded_stack

ROOT = Path(__file__).resolve().parents[2]
STACKS = [ROOT / "Pulumi.dev.yaml", ROOT / "examples/Pulumi.multi.yaml", ROOT / "examples/Pulumi.components.yaml"]
PRODUCTION = ROOT / "policy/config.production.json"


def _verdicts(report) -> list[tuple]:
    return sorted((d.policy, d.level, d.resource or "", d.message) for d in report.diagnostics)


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.name)
@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_pack_verdicts_equal_for_referenced_and_embedded_artifacts(pack, tmp_path, path):
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    embedded = tmp_path / path.name
    embedded.write_text(json.dumps(embedded_stack(path)))
    by_ref, _ = preview_resources(path, stack)
    by_value, _ = preview_resources(embedded, stack)
    for config in (None, load_config(PRODUCTION)):
        a, b = pack.check(by_ref, config), pack.check(by_value, config)
        assert _verdicts(a) == _verdicts(b)
    # Not vacuous: the production config blocks the reference figures in both forms.
    assert pack.check(by_ref, load_config(PRODUCTION)).mandatory
