"""One AnalyzeStack call recomputes each endpoint's plan once, however many stack policies ask.

In-process, as pulumi_policy's AnalyzeStack does it: every stack policy gets its own
StackValidationArgs built from the same request (its own copies of the resources)."""

from __future__ import annotations

import pytest
from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from policy import policies, recompute
from tests.policy.policy_edits import named, set_path


def _args(resources) -> StackValidationArgs:
    # Fresh objects per policy, as the analyzer builds them from the request.
    return StackValidationArgs([
        PolicyResource(r.type, dict(r.props), r.urn_in("dev", "speech-endpoints"), r.name, None, None, None, [], {})
        for r in resources
    ])


def _analyze_stack(resources) -> list[str]:
    found = []
    for policy in policies.POLICIES:
        if isinstance(policy, StackValidationPolicy):
            policy.validate(_args(resources), lambda message, urn=None: found.append(message))
    return found


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = recompute.build_plan

    def counting(*args, **kwargs):
        calls.append(args[0].model)
        return real(*args, **kwargs)

    monkeypatch.setattr(recompute, "build_plan", counting)
    monkeypatch.setattr(policies, "_analysis", None)
    return calls


def test_build_plan_runs_once_per_endpoint_per_analyze_stack(dev, counted):
    stack_policies = [p for p in policies.POLICIES if isinstance(p, StackValidationPolicy)]
    assert len(stack_policies) >= 4  # several of them ask for the provenance
    assert _analyze_stack(dev) == []
    assert counted == ["kokoro-82m"]
    # The next preview (another AnalyzeStack, with an edit) recomputes again, once.
    set_path(named(dev, "kokoro-82m-target"), "maxCapacity", 400.0)
    found = _analyze_stack(dev)
    assert any("maxCapacity is 400, expected 293" in m for m in found), found
    assert counted == ["kokoro-82m", "kokoro-82m"]
