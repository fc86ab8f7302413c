"""The pack's policies (policy/policies.py): all of them, each quiet on the dev stack but the notice
that its figures are reference ones."""
from __future__ import annotations


def test_every_rule_passes_on_the_dev_stack(pack, dev):
    report = pack.check(dev)
    quiet = {d.policy for d in report.diagnostics}
    assert quiet == {"scaling-from-unmeasured-figures"}
    assert len(pack.policies) == 25
