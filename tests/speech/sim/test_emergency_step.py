"""The emergency step (speech.sim.scaler.emergency_size, AwsPolicy's ``jump_ratio``): a jump in the
arrivals takes the fleet at once to what the new rate needs, where target tracking and the surge
step, reading an occupancy that stops at Q_max, climb in steps a start-up apart."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy
from speech.sim.scaler import emergency_size, jump_ratio_of, scaling_numbers
from speech.sim.traces import generate
from tests.conftest import QMAX_REF, TTOTAL_REF


@pytest.fixture(scope="module")
def setup():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    return scaling_numbers(plan), build_instance(q, t)


def _run(setup, jump_ratio: float | None, factor: float = 4.0):
    numbers, model = setup
    # a 10 s window: the jump is read at the first metric period after it, before the surge alarm's
    # datapoints (a 60 s window reads it after the surge step, whose start-up then blocks it)
    numbers = replace(numbers, jump_ratio=jump_ratio, jump_window_s=10)
    base = 0.5 * numbers.min_instances * numbers.x_target_rps
    trace = generate(f"step:base={base:.3f},factor={factor:g},at=600,duration=2400")
    return run_policy(model, trace.arrivals, AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max)), numbers, base


def test_jump_ratio_reads_two_windows():
    arrivals = [10.0] * 60 + [30.0] * 60
    assert jump_ratio_of(arrivals, 119, 60) == pytest.approx(3.0)
    assert jump_ratio_of(arrivals, 59, 60) == 0.0  # one window only: no jump to read
    assert jump_ratio_of([0.0] * 60 + [5.0] * 60, 119, 60) == 0.0  # nothing before: no ratio


def test_emergency_size_is_the_new_rate_at_the_target():
    assert emergency_size(60 * 100.0, 60, 20.0) == 5
    assert emergency_size(60 * 101.0, 60, 20.0) == 6  # rounded up: 5.05 instances' worth


def test_a_jump_sizes_the_fleet_in_one_action(setup):
    """A x4 step: with the step the first scale-out asks, within a window of the jump, for the new
    rate's fleet and at least what the surge step adds; without it the first scale-out waits for
    the surge alarm's datapoints."""
    with_step, numbers, base = _run(setup, jump_ratio=3.0)
    without, _, _ = _run(setup, jump_ratio=None)
    need = math.ceil(4.0 * base / numbers.x_target_rps)
    first = next(a for a in with_step.actions if a.after > a.before)
    assert first.reason == "emergency step"
    assert 600 <= first.t_s <= 600 + numbers.jump_window_s + numbers.metric_period_s
    assert first.after >= need
    plain = next(a for a in without.actions if a.after > a.before)
    assert plain.t_s > first.t_s and first.after >= plain.after


def test_a_jump_below_the_ratio_does_not_fire(setup):
    """A x2 step under a x3 rule: the reactive policies alone, the same actions as without the step."""
    with_step, _, _ = _run(setup, jump_ratio=3.0, factor=2.0)
    without, _, _ = _run(setup, jump_ratio=None, factor=2.0)
    assert [(a.t_s, a.after) for a in with_step.actions] == [(a.t_s, a.after) for a in without.actions]
    assert all(a.reason != "emergency step" for a in with_step.actions)
