"""speech.stack.entry: the stack entry `bench plan --stack NAME` writes, built from the plan."""

from __future__ import annotations

import pytest

from speech.errors import ConfigError
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint
from speech.schema.config import PlanInputs
from speech.stack.entry import model_entry

DIGEST = "sha256:" + "ab" * 32


def test_a_local_measurement_needs_a_sagemaker_instance_type(qmax_ref, ttotal_ref):
    # Measured on this machine: the entry cannot deploy "local"; the flag, or the entry's own, names one.
    fp = Fingerprint.of("local", DIGEST)
    q, t = (a.model_copy(update={"fingerprint": fp}) for a in (qmax_ref, ttotal_ref))
    inputs = PlanInputs(slo_ms=3000, peak_rps=50, trough_rps=10)
    plan = build_plan(q, t, inputs)
    with pytest.raises(ConfigError, match="pass --instance-type ml.<family>.<size>"):
        model_entry(plan, inputs, q, t)
    assert model_entry(plan, inputs, q, t, instance_type="ml.g5.xlarge").instance_type == "ml.g5.xlarge"
    kept = model_entry(plan, inputs, q, t, old={"instance_type": "ml.g5.2xlarge", "priority": "critical"})
    assert (kept.instance_type, kept.priority, kept.hosting) == ("ml.g5.2xlarge", "critical", "realtime")


def test_a_real_time_plan_makes_a_batch_entry_real_time(qmax_ref, ttotal_ref):
    inputs = PlanInputs(slo_ms=3000, peak_rps=50, trough_rps=10)
    plan = build_plan(qmax_ref, ttotal_ref, inputs)
    entry = model_entry(plan, inputs, qmax_ref, ttotal_ref, old={"priority": "batch", "hosting": "async"})
    assert (entry.priority, entry.hosting) == ("standard", "realtime")
    assert entry.measurements.qmax == qmax_ref and entry.plan == inputs
