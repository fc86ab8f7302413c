"""The tuner's forecast knob (speech.sim.tune ``forecast_quantile``): floors from a forecast of the
history before the tuned days, sized for the plan of the other knobs; never together with the
floors learned from the training draws; not offered without a history."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.instance import build_instance
from speech.sim.scaler import floor_at
from speech.sim.tune import FORECAST_QUANTILES, Tuner
from tests.conftest import QMAX_REF, TTOTAL_REF


def _history(days: int) -> np.ndarray:
    """Per-second arrivals: 20 rps, 400 rps from 09:00 to 12:00, every day."""
    day = np.full(86400, 20.0)
    day[9 * 3600 : 12 * 3600] = 400.0
    return np.tile(day, days)


@pytest.fixture(scope="module")
def tuners():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    inputs = PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=400, trough_rps=20)
    model = build_instance(q, t)
    return Tuner(q, t, inputs, model, 0.995, forecast_history=_history(3)), Tuner(q, t, inputs, model, 0.995)


def test_forecast_floors_raise_the_floor_a_lead_before_the_forecast_ramp(tuners):
    with_history, _ = tuners
    k = replace(with_history.seed_knobs(), forecast_quantile=0.9)
    plan = with_history.plan_for(k)
    assert plan is not None and plan.schedule is not None
    n = with_history.numbers_for(k)
    per = plan.capacity.per_instance_rps
    # 400 rps needs ceil(400 / per) instances from 09:00, asked the planning T_total (whole minutes) ahead
    lead_min = int(np.ceil(plan.t_total.planning_s / 60))
    assert floor_at(n, (9 * 60 - lead_min) * 60) >= int(np.ceil(400 / per)) - 1
    assert floor_at(n, (9 * 60 - lead_min - 15) * 60) == n.min_instances
    assert floor_at(n, 13 * 3600) == n.min_instances


def test_the_knob_is_offered_only_with_a_history_and_never_with_learned_floors(tuners):
    with_history, without = tuners
    assert with_history.choices(with_history.seed_knobs())["forecast_quantile"] == [None, *FORECAST_QUANTILES]
    assert without.choices(without.seed_knobs())["forecast_quantile"] == [None]
    both = replace(with_history.seed_knobs(), forecast_quantile=0.9, scheduled_floors=True)
    assert with_history.inputs_for(both) is None


@pytest.mark.slow  # the descents over a simulated day: tens of seconds
def test_with_a_history_the_search_keeps_the_better_of_with_and_without_the_forecast(tuners):
    # with a history the search first runs the plain descent with the forecast knobs hidden (the
    # descent a tuner without a history runs: the same _search, nothing offered that needs the
    # history), then descends from its winner with them; the winner is never worse on the training
    # draws than that plain winner (descent is greedy: a first forecast move can lead away from a
    # cheaper plain optimum). One training day shows it as two did: the comparison is of the two
    # winners on whatever days they were judged on, and each more day doubled the cost.
    from speech.sim.traces import generate

    with_history, _ = tuners
    days = [(1, generate("diurnal:peak=400,trough=20,hours=24,spikes=0,seed=1").arrivals)]
    _, best = with_history.search(days, passes=1, pairs=0)
    plain = with_history.plain_winner
    assert plain is not None and with_history.simulated_plain is not None
    # the plain winner was found with the history hidden: no knob that needs one
    assert plain.knobs.forecast_quantile is None and plain.knobs.surge_average_share is None
    assert not with_history.better(plain, best)  # best is at least as good as the plain winner
    assert with_history.forecast_history is not None  # restored after the plain descent


def test_a_forecast_move_from_learned_floors_replaces_them(tuners):
    # the forecast descent starts from the plain winner, which may have learned floors: a forecast
    # move must swap them for forecast floors (a plan has one schedule), or the plan refuses it and
    # the forecast is never judged
    from speech.sim.tune import move

    with_history, _ = tuners
    learned = replace(with_history.seed_knobs(), scheduled_floors=True)
    for name, value in (("forecast_quantile", 0.5), ("busy_headroom", 1.3)):
        assert with_history.plan_for(replace(learned, **{name: value})) is None
        k = move(learned, name, value)
        assert not k.scheduled_floors and getattr(k, name) == value
        assert with_history.plan_for(k) is not None and with_history.plan_for(k).schedule is not None
    back = move(replace(with_history.seed_knobs(), forecast_quantile=0.9, busy_headroom=1.3), "scheduled_floors", True)
    assert back.scheduled_floors and back.forecast_quantile is None and back.busy_headroom is None


def test_busy_headroom_raises_the_cap_to_hold_it_at_the_forecast_peak(tuners):
    """The cap (max_instances, from peak_rps) must hold the headroom at the busiest minute: a cap at
    the seed's peak would clip the floors exactly where a crowd costs the most (two-peak: 374
    instances under a x1.55 headroom over 5,000 requests/s)."""
    from speech.plan.forecast import headroom_peak_rps

    with_history, _ = tuners
    seed = with_history.seed_knobs()
    plain = with_history.plan_for(replace(seed, forecast_quantile=0.9))
    raised = with_history.plan_for(replace(seed, forecast_quantile=0.9, busy_headroom=1.5))
    assert plain is not None and raised is not None
    peak = headroom_peak_rps(with_history.forecast(0.9), 1.5)
    assert peak > 1.4 * 400  # the forecast's 400 requests/s block, x1.5 in its busy hours
    # the plain plan's cap is sized for the seed's 400 requests/s; the raised one for that peak
    assert raised.fleet.max_instances >= 1.4 * plain.fleet.max_instances
    n = with_history.numbers_for(replace(seed, forecast_quantile=0.9, busy_headroom=1.5))
    assert max(c for _, _, c in n.floors) > plain.fleet.max_instances  # the floors are no longer clipped at the old cap
