"""The scaling spec (speech/deploy/scaling/): built from the plan, compared by one diff with one tolerance."""

from __future__ import annotations

import dataclasses
import math

import pytest

from speech.deploy import scaling
from speech.plan.realtime import build_plan
from speech.schema.config import PlanInputs


@pytest.fixture
def spec(qmax_ref, ttotal_ref):
    plan = build_plan(qmax_ref, ttotal_ref, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=10))
    return plan, scaling.scaling_spec(plan, "dev-kokoro-82m")


def test_spec_holds_the_plan_and_the_aws_names(spec):
    plan, s = spec
    assert s.target.resource_id == "endpoint/dev-kokoro-82m/variant/AllTraffic"
    assert scaling.parse_resource_id(s.target.resource_id) == ("dev-kokoro-82m", "AllTraffic")
    assert (s.target.min_capacity, s.target.max_capacity) == (plan.fleet.min_instances, plan.fleet.max_instances)
    assert s.scale_out.target_value == plan.thresholds.scaling_target_value and s.scale_out.disable_scale_in is True
    assert s.scale_in_alarm.evaluation_periods == s.scale_in_alarm.datapoints_to_alarm == 30
    assert s.scale_in_alarm.dimensions == (("EndpointName", "dev-kokoro-82m"), ("VariantName", "AllTraffic"))
    # +ceil(100 x (1.25 x Q_max / C_scale_max - 1)) %: the surge brings saturated instances back to the target.
    grow = 1.25 * 50 / plan.thresholds.c_scale_max - 1
    assert s.surge.steps == (scaling.StepSpec(scaling_adjustment=math.ceil(100 * grow - 1e-9), lower_bound=0.0),)
    # Scale-in: the plan's share of the fleet, at least one instance, below C_scale_min.
    assert s.scale_in.adjustment_type == "PercentChangeInCapacity" and s.scale_in.min_adjustment_magnitude == 1
    assert s.scale_in.steps == (scaling.StepSpec(scaling_adjustment=plan.scale_in.step_percent, upper_bound=0.0),)
    assert s.scheduled == ()
    assert s.surge.min_adjustment_magnitude == math.ceil(3 * grow - 1e-9) and s.queue.max_depth == plan.queue_max_depth
    # one surge per start-up: the measured T_total (260.248 s), not the 30 s scale-out cooldown
    assert (s.surge.cooldown_s, s.scale_out.scale_out_cooldown_s) == (261, 30)
    assert [p.name for p in (s.scale_out, s.scale_in, s.surge)] == [
        f"dev-kokoro-82m{suffix}" for suffix in scaling.POLICY_SUFFIXES]
    assert scaling.policy_role("dev-kokoro-82m-surge") == "-surge" and scaling.policy_role("hand-made") is None


def test_diff_is_empty_for_the_spec_itself_and_ignores_names(spec):
    _, s = spec
    for part in ("target", "scale_out", "scale_in", "scale_in_alarm", "surge", "surge_alarm", "queue"):
        want = getattr(s, part)
        assert scaling.diff(part, want, want) == []
    renamed = dataclasses.replace(s.surge_alarm, name="other", description="edited")
    assert scaling.diff("surge_alarm", s.surge_alarm, renamed) == []


def test_diff_tolerance_is_one_part_in_a_million(spec):
    _, s = spec
    t = s.scale_out.target_value
    near = dataclasses.replace(s.scale_out, target_value=t * (1 + 1e-7))
    assert scaling.diff("scale_out", s.scale_out, near) == []
    # What the old 1e-4 relative tolerance in bench let through is a difference now.
    off = dataclasses.replace(s.scale_out, target_value=t * (1 + 5e-5))
    [d] = scaling.diff("scale_out", s.scale_out, off)
    assert (d.part, d.field, d.expected) == ("scale_out", "target_value", t)


def test_diff_reads_numbers_and_booleans_as_readers_see_them(spec):
    _, s = spec
    # Pulumi sends some numbers as strings and AWS some booleans as strings; neither is a difference.
    seen = dataclasses.replace(s.scale_out, scale_out_cooldown_s=f"{s.scale_out.scale_out_cooldown_s}",
                               disable_scale_in="true")
    assert scaling.diff("scale_out", s.scale_out, seen) == []
    wrong = dataclasses.replace(s.scale_out, disable_scale_in="false", metric_type="SageMakerVariantInvocationsPerInstance")
    assert {d.field for d in scaling.diff("scale_out", s.scale_out, wrong)} == {"disable_scale_in", "metric_type"}
    # A step bound that is not set is None, and None is not 0.
    unbounded = dataclasses.replace(s.scale_in, steps=(scaling.StepSpec(scaling_adjustment=s.scale_in.steps[0].scaling_adjustment),))
    [d] = scaling.diff("scale_in", s.scale_in, unbounded)
    assert d.field == "steps.0.upper_bound" and d.observed is None and d.expected == 0.0


def test_diff_counts_steps_before_comparing_them(spec):
    _, s = spec
    extra = dataclasses.replace(s.surge, steps=s.surge.steps + (scaling.StepSpec(scaling_adjustment=500, lower_bound=20.0),))
    [d] = scaling.diff("surge", s.surge, extra)
    assert d.field == "steps" and len(d.observed) == 2
    assert "surge_adjustment" in s.rule_of("surge", "steps.0.scaling_adjustment")


def test_the_simulator_removes_the_share_as_application_auto_scaling_rounds_it(spec):
    """-16 % of N rounded toward zero, at least one (MinAdjustmentMagnitude), never below the floor."""
    from speech.sim.scaler import scaling_numbers

    plan, _ = spec
    n = scaling_numbers(plan)
    assert (n.scale_in_percent, n.scale_in_min_removed) == (-16, 1)
    assert n.scale_in_to(293) == 293 - 46  # 46.88 -> 46
    assert n.scale_in_to(10) == 9  # 1.6 -> 1
    assert n.scale_in_to(5) == 4  # 0.8 -> 0, then the minimum of 1
    assert n.scale_in_to(plan.fleet.min_instances) == plan.fleet.min_instances
    # A plan written before shares existed removes one instance at a time.
    old = scaling_numbers(plan.model_copy(update={"scale_in": None}))
    assert old.scale_in_percent is None and old.scale_in_to(293) == 292
