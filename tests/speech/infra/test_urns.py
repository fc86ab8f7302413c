"""Resource URNs of the dev and example stacks, pinned: a refactor that renames, re-parents or re-types a
resource would make `pulumi up` replace it on every deployed stack (a SageMaker endpoint replaced is an
outage), so every pinned URN must still be produced.

New resources are free to appear. A resource removed on purpose is taken out of tests/speech/data/urns.json
in the same commit that removes it; a moved one gets a ``pulumi.Alias`` and keeps its pinned URN out of the
file only once the alias is in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speech.infra.preview import run_preview

ROOT = Path(__file__).resolve().parents[3]
PINNED = json.loads((ROOT / "tests/speech/data/urns.json").read_text())


@pytest.mark.parametrize("where", sorted(PINNED))
def test_every_pinned_urn_is_still_produced(where):
    stack_dir, stack = where.split("/")
    result = run_preview(ROOT / stack_dir / f"Pulumi.{stack}.yaml", stack)
    produced = {r.urn for r in result.resources}
    missing = sorted(set(PINNED[where]) - produced)
    assert not missing, f"{len(missing)} resource(s) of the {stack} stack would be replaced or deleted: {missing[:5]}"
