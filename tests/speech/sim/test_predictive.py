"""``predictive`` (speech.sim.predictive): predictive scaling as Application Auto Scaling documents
it, the reactive plan underneath: nothing before 24 h of data, an hourly forecast from the same
hour of earlier days, capacity raised a buffer ahead and never scaled in below the forecast."""

from __future__ import annotations

import numpy as np
import pytest

from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy, make_policy
from speech.sim.predictive import hourly_capacity
from speech.sim.scaler import scaling_numbers
from tests.conftest import QMAX_REF, TTOTAL_REF


@pytest.fixture(scope="module")
def setup():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=400, trough_rps=20))
    return q, plan, build_instance(q, t)


def _day(hour_rps: dict[int, float], base: float) -> np.ndarray:
    a = np.full(86400, base)
    for h, r in hour_rps.items():
        a[h * 3600:(h + 1) * 3600] = r
    return a


def test_the_hourly_forecast_is_the_mean_of_the_same_hour_of_earlier_days():
    data = np.concatenate([_day({8: 100.0}, 10.0), _day({8: 300.0}, 10.0)])
    cap = hourly_capacity(data, 48, 24, per_instance_rps=10.0, floor=1, max_instances=100)
    assert cap[8] == 20 and cap[7] == 1 and cap[9] == 1  # (100 + 300) / 2 / 10; 10 rps needs 1
    # fewer than a day of data forecasts nothing: every hour at the floor
    assert set(hourly_capacity(data[:7200], 2, 24, 10.0, 3, 100)) == {3}


def test_without_a_day_of_history_it_is_the_reactive_plan(setup):
    q, plan, model = setup
    a = _day({}, 60.0)[:3600]
    pred = make_policy("predictive", plan=plan, qmax=q, model=model, arrivals=a, peak_rps=60.0)
    react = AwsPolicy(scaling_numbers(plan), model.cloudwatch_ratio, model.q_max)
    r1, r2 = run_policy(model, a, pred), run_policy(model, a, react)
    assert [(x.t_s, x.after) for x in r1.actions] == [(x.t_s, x.after) for x in r2.actions]


def test_a_forecast_ramp_is_in_service_before_its_hour_and_held_through_it(setup):
    q, plan, model = setup
    s = scaling_numbers(plan)
    history = np.concatenate([_day({3: 300.0}, 20.0)] * 2)
    today = _day({3: 300.0}, 20.0)[: 5 * 3600]
    pol = make_policy("predictive", plan=plan, qmax=q, model=model, arrivals=today, peak_rps=300.0, history=history)
    run = run_policy(model, today, pol)
    want = int(np.ceil(300.0 / s.x_target_rps))
    raised = [x for x in run.actions if x.reason == "predictive"]
    assert raised and raised[0].after >= want
    # asked one buffer (the planning T_total) ahead of 03:00, so in service by then
    assert 3 * 3600 - s.planning_total_s - 10 <= raised[0].t_s < 3 * 3600
    serving = np.asarray(run.serving)
    assert serving[3 * 3600 : 4 * 3600].min() >= want  # no scale-in below the forecast during its hour
