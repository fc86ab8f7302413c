"""The surge alarm on the Average of ConcurrentRequestsPerModel (PlanInputs.surge_average_share,
docs/plan-cost.md "The reactive layer on the Average"): at a fleet sized at the SLO rate some
instance refuses in almost every period, which holds the Maximum at Q_max and makes the plan's
target tracking and surge add capacity that the traffic does not need; the Average stays low
there and rises when the traffic outgrows the fleet."""

from __future__ import annotations

import numpy as np
import pytest

from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy
from speech.sim.scaler import scaling_numbers
from tests.conftest import QMAX_REF, TTOTAL_REF

FLEET = 40
"""Instances held by the plan's floor (min_instances) in these runs."""


@pytest.fixture(scope="module")
def artifacts():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    return q, t, build_instance(q, t)


def _run(artifacts, share: float | None, arrivals: np.ndarray):
    q, t, model = artifacts
    inputs = PlanInputs(slo_ms=3000, surge_ratio=1.1, target_share=0.9, peak_rps=5000, trough_rps=100,
                        min_instances=FLEET, surge_average_share=share)
    plan = build_plan(q, t, inputs)
    numbers = scaling_numbers(plan)
    pol = AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max)
    return run_policy(model, arrivals, pol), plan


def _at_slo_rate(artifacts, factor: float, seconds: int = 1800) -> np.ndarray:
    """Poisson arrivals rising over ten minutes to ``factor`` x the fleet's rate at the SLO share
    (what a floor is sized at), then level (a ramp, not a step from an empty fleet, whose filling
    queues are no traffic a floor meets)."""
    _, plan = _run(artifacts, None, np.zeros(20))
    rate = FLEET * plan.capacity.slo_rate_rps * factor * np.minimum(1.0, np.arange(seconds) / 600)
    return np.random.default_rng(3).poisson(rate).astype(float)


def test_refusals_at_the_floor_buy_capacity_only_on_the_maximum(artifacts):
    arrivals = _at_slo_rate(artifacts, 1.0)
    on_max, _ = _run(artifacts, None, arrivals)
    on_avg, _ = _run(artifacts, 0.45, arrivals)
    # the fleet at its SLO rate refuses now and then (why the Maximum reads Q_max) ...
    assert on_avg.rejected.sum() > 0
    # ... the plan on the Maximum scales out for it, the plan on the Average keeps the floor
    assert on_max.serving.max() > FLEET
    assert on_avg.serving.max() == FLEET
    assert on_avg.billed.sum() < on_max.billed.sum()


def test_the_average_answers_traffic_above_the_floor(artifacts):
    arrivals = _at_slo_rate(artifacts, 1.6)
    run, plan = _run(artifacts, 0.45, arrivals)
    outs = [a for a in run.actions if a.after > a.before]
    assert outs and outs[0].reason == "surge"
    assert run.serving[-1] > FLEET * 1.3  # enough instances for the rate, not one step
    # and it sheds its refusals once they serve: the last ten minutes refuse less than the first
    assert run.rejected[-600:].sum() < run.rejected[:600].sum()
