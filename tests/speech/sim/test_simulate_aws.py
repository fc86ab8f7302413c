"""The AWS mechanics of the simulated endpoint (docs/design.md §10.3): one capacity change at a
time, refused changes retried, the cooldown's capacity counting toward the next scale-out, the
largest scale-out winning, the step scale-in not blocked by target tracking."""

from __future__ import annotations

import numpy as np
import pytest

from speech.files import load_artifact
from speech.plan.formulas import to_cloudwatch
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.artifact import refused_activities
from speech.sim.fleet import Action, run_policy
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy, AwsReadings, AwsState
from speech.sim.scaler import Ctx, History, scaling_numbers
from speech.sim.traces import generate
from tests.conftest import QMAX_REF, TTOTAL_REF


@pytest.fixture(scope="module")
def setup():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    return plan, build_instance(q, t)


def _step_run(setup, readings: AwsReadings):
    plan, model = setup
    base = 0.5 * plan.fleet.min_instances * plan.capacity.throughput_at_target_rps
    trace = generate(f"step:base={base:.3f},factor=3,at=600,duration=3000")
    pol = AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max, readings=readings)
    return run_policy(model, trace.arrivals, pol, readings), model


def test_consecutive_changes_are_an_endpoint_update_apart(setup):
    readings = AwsReadings()
    run, model = _step_run(setup, readings)
    assert len(run.actions) >= 2 and run.refused  # the alarms kept asking while the endpoint was Updating
    for a, b in zip(run.actions, run.actions[1:], strict=False):
        busy = model.startup_s if a.after > a.before else readings.removal_updating_s
        assert b.t_s - a.t_s >= busy
    # every refused change came while a change was in progress
    for r in run.refused:
        prior = [a for a in run.actions if a.t_s <= r.t_s][-1]
        busy = model.startup_s if prior.after > prior.before else readings.removal_updating_s
        assert r.t_s < prior.t_s + busy


def test_without_the_rule_changes_compound(setup):
    """The same step with the endpoint taking any change at any time: scale-outs land while the
    first instances are still starting (what the rule above prevents)."""
    run, model = _step_run(setup, AwsReadings(one_change_at_a_time=False))
    outs = [a.t_s for a in run.actions if a.after > a.before]
    assert not run.refused
    assert any(b - a < model.startup_s for a, b in zip(outs, outs[1:], strict=False))


def test_a_refused_change_is_retried_as_soon_as_the_endpoint_is_in_service(setup):
    """No cooldown starts on a refused activity: the alarm still in ALARM acts at the first
    period after the update finished."""
    run, model = _step_run(setup, AwsReadings())
    tick = setup[0].alarms.metric_period_s
    retried = 0
    for a, b in zip(run.actions, run.actions[1:], strict=False):
        done = a.t_s + (model.startup_s if a.after > a.before else AwsReadings().removal_updating_s)
        if any(a.t_s < r.t_s < b.t_s for r in run.refused) and b.after > b.before:
            assert b.t_s - done <= tick
            retried += 1
    assert retried >= 1


def test_removal_keeps_the_endpoint_updating(setup):
    plan, model = setup
    readings = AwsReadings(removal_updating_s=600)
    pol = AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max, readings=readings)
    pol.initial = lambda: plan.fleet.min_instances + 2  # above the floor, no traffic: a scale-in first
    x = plan.capacity.throughput_at_target_rps
    # quiet until the scale-in, then far above the fleet: scale-out refused until the removal finished
    first_in = plan.alarms.scale_in_evaluation_periods * plan.alarms.metric_period_s
    arr = np.concatenate([np.full(first_in + 20, 0.5), np.full(1200, 3.0 * x * (plan.fleet.min_instances + 2))])
    run = run_policy(model, arr, pol, readings)
    [scale_in, out, *_] = run.actions
    assert scale_in.after < scale_in.before and out.after > out.before
    assert out.t_s >= scale_in.t_s + 600 and run.refused and run.refused[0].t_s < scale_in.t_s + 600
    quick = run_policy(model, arr, pol, AwsReadings(removal_updating_s=0))
    assert quick.actions[1].t_s < scale_in.t_s + 600


def _ctx(t: int, desired: int, occupancy: float, state=None, rejected: float = 0.0) -> Ctx:
    n = t + 1
    h = History(occupancy=[occupancy] * n, arrivals=[100.0] * n, rejected=[rejected] * n, serving=[desired] * n)
    return Ctx(t=t, desired=desired, history=h, state=state)


def test_capacity_added_during_the_cooldown_counts_toward_the_next_scale_out(setup):
    plan, model = setup
    s = scaling_numbers(plan)
    pol = AwsPolicy(s, model.cloudwatch_ratio, model.q_max)
    occ = 2 * s.target_value * model.cloudwatch_ratio  # twice the target in CloudWatch units
    assert to_cloudwatch(occ, model.cloudwatch_ratio) == pytest.approx(2 * s.target_value)
    warm = AwsState(tt=(True, True))
    new, why, st = pol.decide(_ctx(99, 4, occ, warm))
    assert (new, why) == (8, "target-tracking") and st.tt_base == 4
    # 10 s later, inside the 30 s cooldown, the same metric: the base is still 4, so nothing more
    new, _, st2 = pol.decide(_ctx(109, 8, occ, st))
    assert new == 8
    # after the cooldown the base is the current desired count again
    new, _, _ = pol.decide(_ctx(99 + s.scale_out_cooldown_s + 10, 8, occ, st2))
    assert new == 16


def test_largest_scale_out_wins_and_step_scale_in_is_not_blocked(setup):
    plan, model = setup
    s = scaling_numbers(plan)
    pol = AwsPolicy(s, model.cloudwatch_ratio, model.q_max)
    # saturated (the gate refused): both target tracking and the surge fire; the larger wins
    full = AwsState(tt=(True, True), surge=(True,) * (s.surge_periods - 1))
    new, why, _ = pol.decide(_ctx(99, 10, 0.0, full, rejected=5.0))
    tt_want = int(np.ceil(10 * to_cloudwatch(model.q_max, model.cloudwatch_ratio) / s.target_value - 1e-9))
    assert new == max(tt_want, 10 + max(s.surge_min_added, 10 * s.surge_percent // 100)) and new > 10
    # quiet, target tracking still in its scale-out cooldown: the step scale-in acts anyway
    quiet = AwsState(low=(True,) * (s.scale_in_periods - 1), tt_until=10**6, tt_base=3)
    new, why, _ = pol.decide(_ctx(2000, 10, 0.0, quiet))
    assert why == "scale-in" and new == s.scale_in_to(10) < 10


def test_refused_state_keeps_the_alarms_and_drops_the_cooldown(setup):
    plan, model = setup
    s = scaling_numbers(plan)
    pol = AwsPolicy(s, model.cloudwatch_ratio, model.q_max)
    old = AwsState(tt=(True, True))
    _, _, new = pol.decide(_ctx(99, 4, 2 * s.target_value * model.cloudwatch_ratio, old))
    kept = pol.refused(old, new)
    assert kept.tt == new.tt and kept.tt_until == old.tt_until and kept.tt_base == old.tt_base


def test_refused_activities_coalesce_retries():
    raw = [Action(100, 4, 8, "target-tracking"), Action(110, 4, 8, "target-tracking"), Action(120, 4, 9, "target-tracking"),
           Action(300, 8, 7, "scale-in")]
    a, b = refused_activities(raw)
    assert (a.t_s, a.last_s, a.attempts, a.wanted) == (100, 120, 3, 9) and (b.attempts, b.wanted) == (1, 7)


def test_a_trace_opens_on_a_running_fleet(setup):
    """simulate() starts a scaling fleet sized for the opening minute at X(C_scale_max) (the trace's
    start is not a cold endpoint); run_policy without warm_x_rps starts at the floor."""
    plan, model = setup
    x = plan.capacity.throughput_at_target_rps
    arr = np.full(600, 20.0 * x)
    pol = AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max)
    warm = run_policy(model, arr, pol, warm_x_rps=x)
    cold = run_policy(model, arr, pol)
    assert warm.serving[0] == 20 and cold.serving[0] == plan.fleet.min_instances
    assert warm.rejected.sum() < 0.05 * cold.rejected.sum()


def test_scheduled_floors_raise_and_release_the_minimum(setup):
    """A daily floor of 12 from 01:00 to 02:00 (the trace starts at 00:00): the fleet rises to it at
    01:00 with no traffic asking, holds it through the hour, and scales in after 02:00."""
    from dataclasses import replace as dc_replace

    from speech.sim.scaler import floor_at

    plan, model = setup
    s = dc_replace(scaling_numbers(plan), floors=(("cron(0 1 * * ? *)", "UTC", 12), ("cron(0 2 * * ? *)", "UTC", 1)))
    assert (floor_at(s, 3599), floor_at(s, 3600), floor_at(s, 7200), floor_at(s, 86400 + 3700)) == (
        s.min_instances, 12, s.min_instances, 12)
    run = run_policy(model, np.full(4 * 3600, 1.0), AwsPolicy(s, model.cloudwatch_ratio, model.q_max))
    up = [a for a in run.actions if a.reason == "scheduled floor"]
    assert up and up[0].t_s == 3600 and up[0].after == 12
    assert run.serving[3600 + int(model.startup_s) + 5 : 7200].min() == 12
    assert run.serving[-1] < 12 and all(a.after >= 12 for a in run.actions if 3600 <= a.t_s < 7200)


# --- the readings of what AWS does not document (AwsReadings): each one must reach the run ------------


def test_target_tracking_datapoints_set_when_target_tracking_scales_out(setup):
    """A step to twice the opening load with the surge alarm out of reach (90 periods): the first
    scale-out is target tracking's, ``target_tracking_datapoints`` metric periods after the first
    datapoint above target, so each extra datapoint delays it by exactly one period."""
    from dataclasses import replace as dc_replace

    plan, model = setup
    s = dc_replace(scaling_numbers(plan), surge_periods=90)
    base = 0.5 * s.min_instances * s.x_target_rps
    arr = np.concatenate([np.full(600, base), np.full(600, 2.0 * base)])
    first = {}
    for k in (1, 2, 3, 5):
        readings = AwsReadings(target_tracking_datapoints=k)
        run = run_policy(model, arr, AwsPolicy(s, model.cloudwatch_ratio, model.q_max, readings=readings), readings)
        a = run.actions[0]
        assert a.reason == "target-tracking" and a.after > a.before
        first[k] = (a.t_s, float(run.rejected.sum()))
    for k in (2, 3, 5):
        assert first[k][0] - first[1][0] == (k - 1) * s.metric_period_s
        assert first[k][1] > first[1][1]  # the later scale-out costs rejections


def test_simulate_hands_every_reading_to_the_run(setup):
    """Through ``simulate(..., readings=...)`` (what bench simulate and benchmarks/aws_readings.py
    call), each field alone changes the plan's run the way it should; the floor, whose changes
    are instant, is the same under every reading."""
    from speech.sim.fleet import simulate

    plan, model = setup
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    base = 0.5 * plan.fleet.min_instances * plan.capacity.throughput_at_target_rps
    arr = generate(f"step:base={base:.3f},factor=3,at=600,duration=3000").arrivals

    def sim(readings):
        _, runs, sums = simulate(plan, q, t, arr, policies=("plan", "floor"), model=model, readings=readings)
        return runs[0], sums

    default, d_sums = sim(AwsReadings())
    assert default.refused and default.actions[0].reason == "surge"

    quick_tt, tt_sums = sim(AwsReadings(target_tracking_datapoints=1))
    assert quick_tt.actions[0].reason == "target-tracking" and quick_tt.actions[0].t_s < default.actions[0].t_s

    slow_removal, sr_sums = sim(AwsReadings(removal_updating_s=1500))
    ins = [a.t_s for a in default.actions if a.after < a.before]
    slow_ins = [a.t_s for a in slow_removal.actions if a.after < a.before]
    assert len(ins) >= 2 and ins[1] - ins[0] < 1500 <= slow_ins[1] - slow_ins[0]
    assert len(slow_removal.refused) > len(default.refused)

    no_rule, nr_sums = sim(AwsReadings(one_change_at_a_time=False))
    outs = sum(1 for a in no_rule.actions if a.after > a.before)
    assert not no_rule.refused and outs > sum(1 for a in default.actions if a.after > a.before)
    assert nr_sums[0].instance_hours > d_sums[0].instance_hours

    assert d_sums[1] == tt_sums[1] == sr_sums[1] == nr_sums[1]
