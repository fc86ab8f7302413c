"""The real-time scaling rules (policy/rules/realtime.py): scaling-matches-plan, scaling-plan-feasible,
one-scaling-path-per-variant. The dev stack passes each; one realistic edit violates it (through the
pack)."""
from __future__ import annotations

import json

import pytest

from policy.harness import Resource
from tests.policy.policy_edits import messages, named, set_path

# --- scaling-matches-plan ------------------------------------------------------------------------


@pytest.mark.parametrize("name,path,value,expect", [
    ("kokoro-82m-target", "maxCapacity", 400.0, "maxCapacity is 400, expected 293"),
    ("kokoro-82m-target", "minCapacity", 2.0, "minCapacity is 2, expected 1"),
    ("kokoro-82m-scale-out", "targetTrackingScalingPolicyConfiguration.scaleOutCooldown", 60.0, "scaleOutCooldown is 60, expected 30"),
    ("kokoro-82m-scale-in", "stepScalingPolicyConfiguration.cooldown", 1200.0, "cooldown is 1200, expected 960"),
    ("kokoro-82m-scale-in-alarm", "threshold", 30.0, "threshold is 30, expected 10.6602"),
    # A 60 s metric would add minutes the plan's reaction bound (10 s x 3) does not contain.
    ("kokoro-82m-scale-out", "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
     "SageMakerVariantInvocationsPerInstance",
     "is 'SageMakerVariantInvocationsPerInstance', expected 'SageMakerVariantConcurrentRequestsPerModelHighResolution'"),
])
def test_matches_plan_each_number(pack, dev, name, path, value, expect):
    set_path(named(dev, name), path, value)
    [msg] = messages(pack.check(dev), "scaling-matches-plan", "mandatory")
    assert f"'{name}'" in msg and expect in msg and "fix:" in msg


# The dev plan: Q_max 50, CloudWatch ratio 1, metric period 10 s, datapoints to alarm 3; target 15.99
# (the 99.5 % SLO share's occupancy); surge 1.25 x 50 / 15.99 = 3.909 -> +291 %, at least
# ceil(3 x 2.909) = 9 instances (smallest safe fleet 3).
@pytest.mark.parametrize("name,path,value,expect,why", [
    ("kokoro-82m-scale-in-alarm", "period", 60.0, "is 60, expected 10", "plan metric period"),
    ("kokoro-82m-scale-in-alarm", "evaluationPeriods", 3.0, "is 3, expected 30", "scale-in window"),
    ("kokoro-82m-scale-in-alarm", "datapointsToAlarm", 10.0, "is 10, expected 30", "must breach"),
    ("kokoro-82m-scale-in-alarm", "statistic", "Average", "is 'Average', expected 'Maximum'", "peak concurrency"),
    ("kokoro-82m-surge-alarm", "threshold", 60.0, "is 60, expected 50", "deployed Q_max = 50"),
    ("kokoro-82m-surge-alarm", "comparisonOperator", "GreaterThanThreshold",
     "is 'GreaterThanThreshold', expected 'GreaterThanOrEqualToThreshold'", "already rejects"),
    ("kokoro-82m-surge-alarm", "evaluationPeriods", 12.0, "is 12, expected 3", "reaction bound"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.stepAdjustments.0.scalingAdjustment", 10.0,
     "is 10, expected 291", "surge_adjustment"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.minAdjustmentMagnitude", 1.0,
     "is 1, expected 9", "smallest safe fleet (3)"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.adjustmentType", "ChangeInCapacity",
     "is 'ChangeInCapacity', expected 'PercentChangeInCapacity'", "fraction of its size"),
])
def test_matches_plan_alarms_and_surge_step(pack, dev, name, path, value, expect, why):
    set_path(named(dev, name), path, value)
    report = pack.check(dev)
    [msg] = messages(report, "scaling-matches-plan", "mandatory")
    assert f"'{name}' {path} {expect}" in msg and why in msg and "fix: remove the hand edit" in msg
    # The edit stays one scaling path: only the plan comparison may object.
    assert messages(report, "one-scaling-path-per-variant") == []


def test_surge_policy_with_an_extra_unplanned_step(pack, dev):
    steps = named(dev, "kokoro-82m-surge").props["stepScalingPolicyConfiguration"]["stepAdjustments"]
    steps[0]["metricIntervalUpperBound"] = "20"
    steps.append({"metricIntervalLowerBound": "20", "scalingAdjustment": 500.0})
    [msg] = messages(pack.check(dev), "scaling-matches-plan", "mandatory")
    assert "scaling policy 'kokoro-82m-surge' has 2 step adjustments, expected 1 (+291%" in msg and "fix:" in msg


# --- scaling-plan-feasible -----------------------------------------------------------------------


def test_scale_in_cooldown_below_planning_t_total(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-in"), "stepScalingPolicyConfiguration.cooldown", 120.0)
    [msg] = messages(pack.check(dev), "scaling-plan-feasible", "mandatory")
    assert "scaling policy 'kokoro-82m-scale-in' scale-in cooldown is 120 s, below the planning T_total 320.248 s" in msg
    assert "use the plan's 960 s" in msg


# --- one-scaling-path-per-variant ----------------------------------------------------------------


def test_competing_scale_out_policy(pack, dev):
    extra = json.loads(json.dumps(named(dev, "kokoro-82m-scale-out").props))
    dev.append(Resource(type="aws:appautoscaling/policy:Policy", name="hand-scale-out", props=extra))
    report = pack.check(dev)
    [msg] = messages(report, "one-scaling-path-per-variant", "mandatory")
    assert "has 2 target-tracking scale-out policies" in msg and "'hand-scale-out'" in msg and "expected exactly 1" in msg


def test_target_tracking_that_also_scales_in(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.disableScaleIn", False)
    [msg] = messages(pack.check(dev), "one-scaling-path-per-variant", "mandatory")
    assert "disableScaleIn is False, expected true" in msg


def test_missing_scale_in_path_and_orphan_policy(pack, dev):
    dev[:] = [r for r in dev if r.name not in ("kokoro-82m-scale-in", "kokoro-82m-scale-in-alarm")]
    orphan = json.loads(json.dumps(named(dev, "kokoro-82m-surge").props))
    orphan["resourceId"] = "endpoint/other/variant/AllTraffic"
    dev.append(Resource(type="aws:appautoscaling/policy:Policy", name="stray", props=orphan))
    msgs = messages(pack.check(dev), "one-scaling-path-per-variant", "mandatory")
    assert any("has 0 step scale-in policies (none), expected exactly 1" in m for m in msgs)
    assert any("scaling policy 'stray' scales 'endpoint/other/variant/AllTraffic', which has no scalable target" in m for m in msgs)
