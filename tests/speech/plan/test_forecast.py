"""Forecast floors (speech.plan.forecast): the backtest judges each model against seasonal-naive on
the history's last seasons, the upper quantile sizes the floors, capacity is asked a lead ahead,
the entries fit Application Auto Scaling's quota, and a forecast past its horizon is stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from speech.errors import PlanInputError
from speech.plan.forecast import (
    forecast_entries,
    forecast_rate,
    forecast_rates,
    forecast_schedule,
    minute_needs,
    pinball,
    slot_entries,
    stale_forecast,
)
from speech.plan.history import invocations_per_second
from speech.schema.config import ForecastProvenance


def _days(n: int, noise: float, seed: int = 3) -> np.ndarray:
    """``n`` days of per-minute rates: a tide from 50 to 1000 rps, each minute multiplied by
    independent noise of sd ``noise`` (so one day is a noisy copy of the shape)."""
    t = np.arange(1440)
    shape = 50 + 950 * (1 - np.cos(2 * np.pi * t / 1440)) / 2
    rng = np.random.default_rng(seed)
    return np.concatenate([shape * (1 + noise * rng.standard_normal(1440)) for _ in range(n)]).clip(0)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_a_smoothing_model_beats_seasonal_naive_on_noisy_days():
    # Yesterday's minutes carry yesterday's noise; a model that smooths across days does not, so
    # the backtest must keep the model and say seasonal-naive lost.
    fc = forecast_rate(_days(5, 0.15), step_s=60, quantile=0.9)
    assert fc.model in ("mstl", "ets")
    assert fc.backtest.beats_naive
    assert fc.backtest.losses[fc.model] < fc.backtest.losses["seasonal-naive"]
    assert fc.point_rps.size == 1440 and fc.start_minute == 0


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_the_upper_quantile_covers_about_that_share_of_a_new_day():
    hist = _days(6, 0.1)
    fc = forecast_rate(hist[:-1440], step_s=60, quantile=0.9)
    above = float(np.mean(hist[-1440:] > fc.upper_rps))
    # a 0.9 quantile: about a tenth of the new day's minutes lie above it (not none, not half)
    assert 0.02 < above < 0.25
    assert fc.ratio > 1.0


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_the_forecast_starts_where_the_history_ends():
    fc = forecast_rate(_days(4, 0.05)[:-600], step_s=60, start_minute=0)
    assert fc.start_minute == 840  # 4 days less 600 minutes end at 14:00


def test_a_history_shorter_than_three_seasons_is_refused_with_what_is_needed():
    with pytest.raises(PlanInputError, match="needs at least 72 h"):
        forecast_rate(_days(2, 0.1), step_s=60)
    with pytest.raises(PlanInputError, match="quantile"):
        forecast_rate(_days(3, 0.1), step_s=60, quantile=1.0)


def test_all_quantiles_from_one_set_of_fits_equal_one_forecast_each():
    # the tuner asks for five quantiles: one fit of each model, not five, with the same numbers
    hist = _days(3, 0.1)
    each = {q: forecast_rate(hist, step_s=60, quantile=q, model="mstl") for q in (0.1, 0.5, 0.9)}
    together = forecast_rates(hist, step_s=60, quantiles=(0.1, 0.5, 0.9), model="mstl")
    for q, fc in each.items():
        assert together[q].model == fc.model and together[q].ratio == fc.ratio
        np.testing.assert_array_equal(together[q].upper_rps, fc.upper_rps)
        assert together[q].backtest == fc.backtest
    # a quantile below the median sizes floors below the forecast (the tuner's floors under the Average surge)
    assert together[0.1].ratio < together[0.5].ratio < together[0.9].ratio
    with pytest.raises(PlanInputError, match="quantile 0 must be in"):
        forecast_rates(hist, step_s=60, quantiles=(0.5, 0.0))


def test_needs_are_asked_one_lead_ahead_within_floor_and_max():
    upper = np.array([10.0] * 100 + [95.0] * 20 + [10.0] * 20)
    need = minute_needs(upper, per_instance_rps=10.0, lead_s=150.0, floor=2, max_instances=9)
    # ceil(150 s) = 3 minutes ahead: minutes 97..99 already need the ramp's 9 (10 capped at max 9)
    assert need[96] == 2 and list(need[97:100]) == [9, 9, 9]
    assert need[119] == 9 and need[120] == 2


def test_entries_are_written_where_a_slot_changes_and_widen_to_fit_the_quota():
    need = np.array([1] * 600 + [5] * 300 + [1] * 540)
    assert slot_entries(need, 0, 60) == [(0, 1), (600, 5), (900, 1)]
    rng = np.random.default_rng(1)
    noisy = rng.integers(1, 50, size=1440)
    slot, entries = forecast_entries(noisy, 0, limit=30)
    assert len(entries) <= 30 and slot >= 30


def test_a_forecast_below_the_floor_schedules_nothing():
    fc = forecast_rate(np.full(1440 * 3, 5.0), step_s=60)
    assert forecast_schedule(fc, per_instance_rps=10.0, lead_s=60, floor=1, max_instances=10) is None


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_the_schedule_carries_the_forecast_provenance():
    fc = forecast_rate(_days(4, 0.05), step_s=60)
    prov = ForecastProvenance(model=fc.model, quantile=0.9, history_sha256="x", history_end="2026-12-03T00:00:00Z",
                              horizon_s=86400, valid_until="2026-12-04T00:00:00Z", refresh="python -m bench forecast ...")
    s = forecast_schedule(fc, per_instance_rps=17.0, lead_s=320, floor=3, max_instances=80, provenance=prov)
    assert s is not None and s.forecast == prov
    assert 2 <= len(s.floors) <= 200
    peak = max(f.min_instances for f in s.floors)
    assert peak == pytest.approx(1000 * fc.ratio / 17.0, abs=4)


def test_a_forecast_past_its_horizon_is_stale_and_names_the_refresh():
    prov = ForecastProvenance(model="ets", quantile=0.9, history_sha256="x", history_end="2026-12-03T00:00:00Z",
                              horizon_s=86400, valid_until="2026-12-04T00:00:00Z", refresh="python -m bench forecast --plan P")
    until = datetime(2026, 12, 4, tzinfo=UTC)
    assert stale_forecast(prov, until - timedelta(minutes=1)) is None
    msg = stale_forecast(prov, until + timedelta(hours=3))
    assert msg is not None and "3.0 h ago" in msg and "python -m bench forecast --plan P" in msg


def test_pinball_penalizes_the_side_the_quantile_protects():
    actual = np.array([10.0, 10.0])
    assert pinball(actual, np.array([8.0, 8.0]), 0.9) > pinball(actual, np.array([12.0, 12.0]), 0.9)


# --- the CloudWatch export ---------------------------------------------------------------------


def test_a_csv_export_with_a_missing_minute_counts_it_as_no_requests():
    text = "Timestamp,Value\n2026-12-01T00:00:00Z,600\n2026-12-01T00:01:00Z,120\n2026-12-01T00:03:00Z,60\n"
    start, arrivals = invocations_per_second(text)
    assert start == datetime(2026, 12, 1, tzinfo=UTC)
    assert arrivals.size == 240
    assert list(arrivals[::60]) == [10.0, 2.0, 0.0, 1.0]


def test_get_metric_data_json_is_read_and_bad_rows_are_named():
    doc = '{"MetricDataResults": [{"Timestamps": ["2026-12-01T00:01:00Z", "2026-12-01T00:00:00Z"], "Values": [60, 0]}]}'
    start, arrivals = invocations_per_second(doc)
    assert start.minute == 0 and arrivals[60] == 1.0
    with pytest.raises(PlanInputError, match="line 3"):
        invocations_per_second("Timestamp,Value\n2026-12-01T00:00:00Z,1\n2026-12-01T00:01:00Z,-4\n")
    with pytest.raises(PlanInputError, match="whole minute"):
        invocations_per_second("Timestamp,Value\n2026-12-01T00:00:00Z,1\n2026-12-01T00:01:30Z,4\n")
    with pytest.raises(PlanInputError, match="names no time column"):
        invocations_per_second("when,count\n1,2\n")


# --- headroom for crowds -----------------------------------------------------------------------


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_headroom_applies_only_in_the_busy_hours_and_the_crowd_ratio_reads_the_largest_crowd():
    from speech.plan.forecast import busy_headroom, crowd_ratio

    fc = forecast_rate(_days(4, 0.02), step_s=60)
    up = busy_headroom(fc, 1.5)
    busy = fc.point_rps >= 0.25 * fc.point_rps.max()
    assert np.allclose(up[busy], 1.5 * fc.upper_rps[busy]) and np.allclose(up[~busy], fc.upper_rps[~busy])
    # a day with a x1.8 crowd for 10 minutes at noon (busy) and x3 at 00:30 (quiet: not a busy-hour crowd)
    day = np.repeat(_days(1, 0.0, seed=9), 60)
    day[720 * 60 : 730 * 60] *= 1.8
    day[30 * 60 : 40 * 60] *= 3.0
    assert crowd_ratio(fc, [day]) == pytest.approx(1.8, rel=0.05)
    s1 = forecast_schedule(fc, per_instance_rps=17.0, lead_s=320, floor=1, max_instances=500)
    s2 = forecast_schedule(fc, per_instance_rps=17.0, lead_s=320, floor=1, max_instances=500, headroom=1.5)
    assert s1 is not None and s2 is not None
    assert max(f.min_instances for f in s2.floors) > 1.4 * max(f.min_instances for f in s1.floors)
