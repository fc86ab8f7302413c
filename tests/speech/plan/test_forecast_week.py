"""A weekly forecast (``season_days=7``) a week ahead becomes floors per weekday: a weekday's tide
is not the weekend's, the week starts at Monday 00:00 of the series' zone wherever the history
starts, and the week's entries stay within the 200 scheduled actions of one scalable target.
Seasonal-naive only (the models' fits on three weeks take seconds; their backtest is
test_forecast.py's)."""

from __future__ import annotations

import numpy as np

from speech.plan.forecast import busy_headroom, forecast_entries, forecast_rate, forecast_schedule, minute_needs, slot_entries
from speech.schema.config import MAX_SCHEDULED_FLOORS, WEEK_MIN

PER = 17.0  # requests/s an instance (the reference plan's order)


def _week(peaks: dict[int, float], trough: float = 40.0, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """A week per minute from Monday 00:00: each day a tide from ``trough`` to its peak at 13:00
    (``peaks`` by weekday index, Monday 0; 800 where not given)."""
    t = np.arange(1440)
    rng = np.random.default_rng(seed)
    days = []
    for d in range(7):
        tide = trough + (peaks.get(d, 800.0) - trough) * (1 - np.cos(2 * np.pi * t / 1440)) / 2
        days.append(tide * (1 + noise * rng.standard_normal(1440)))
    return np.concatenate(days)


def _schedule(history: np.ndarray, start_minute: int = 0):
    fc = forecast_rate(history, step_s=60, start_minute=start_minute, season_days=7, horizon_min=WEEK_MIN,
                       model="seasonal-naive")
    return fc, forecast_schedule(fc, per_instance_rps=PER, lead_s=320, floor=2, max_instances=200)


def _top_by_day(schedule) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in schedule.floors:
        out[f.weekday] = max(out.get(f.weekday, 0), f.min_instances)
    return out


def test_three_weeks_give_a_weeks_floors_per_weekday_the_weekend_lower():
    weekend = {5: 360.0, 6: 360.0}
    fc, s = _schedule(np.tile(_week(weekend), 3))
    assert fc.weekly and fc.start_minute == 0 and fc.point_rps.size == WEEK_MIN
    assert s is not None and s.weekly and len(s.floors) <= MAX_SCHEDULED_FLOORS
    top = _top_by_day(s)
    assert set(top) == {"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}
    # the weekdays' busiest minute needs ceil(800 / 17) = 48, the weekend's ceil(360 / 17) = 22; the
    # upper curve sits a little above the 5-minute bins' mean (a minute rises above its bin)
    assert len({top[d] for d in ("MON", "TUE", "WED", "THU", "FRI")}) == 1 and 48 <= top["MON"] <= 50
    assert top["SAT"] == top["SUN"] and 22 <= top["SAT"] <= 23


def test_the_week_is_counted_from_monday_wherever_the_history_starts():
    """Only Wednesdays peak high; a history starting on a Wednesday 00:00 (start minute 2 x 1440)
    still puts the high floors on WED entries."""
    week = _week({d: (1200.0 if d == 2 else 300.0) for d in range(7)})
    from_wed = np.roll(week, -2 * 1440)  # the same weeks, the series' first minute a Wednesday's
    fc, s = _schedule(np.tile(from_wed, 3), start_minute=2 * 1440)
    assert fc.start_minute == 2 * 1440
    top = _top_by_day(s)
    assert max(top, key=top.__getitem__) == "WED" and 71 <= top["WED"] <= 73  # ceil(1200 / 17), a bin's rise above
    assert all(v <= 19 for d, v in top.items() if d != "WED")  # ceil(300 / 17) = 18


def test_a_noisy_week_is_coarsened_to_fit_the_quota():
    """Per-minute noise changes the floor in almost every 5-minute slot: seven days of them are
    thousands of entries; the slots widen until the week fits 200 actions."""
    fc, s = _schedule(np.tile(_week({}, noise=0.2, seed=3), 3))
    needs = minute_needs(busy_headroom(fc, 1.0), PER, 320, 2, 200)
    assert len(slot_entries(needs, 0, 5, WEEK_MIN)) > MAX_SCHEDULED_FLOORS
    slot, entries = forecast_entries(needs, 0, period_min=WEEK_MIN)
    assert slot > 5 and len(entries) <= MAX_SCHEDULED_FLOORS
    assert s is not None and [(f.minute_of_week, f.min_instances) for f in s.floors] == entries


def test_a_weeks_forecast_holds_for_the_week_and_is_stale_after_it():
    from datetime import UTC, datetime, timedelta

    from speech.plan.forecast import stale_forecast
    from speech.schema.config import ForecastProvenance

    prov = ForecastProvenance(model="ets", quantile=0.9, history_sha256="x", history_end="2026-12-07T00:00:00Z",
                              horizon_s=7 * 86400, valid_until="2026-12-14T00:00:00Z",
                              refresh="python -m bench forecast --season-days 7 --plan P")
    assert stale_forecast(prov, datetime(2026, 12, 13, 23, 59, tzinfo=UTC)) is None  # day 7 of 7: still the week's
    msg = stale_forecast(prov, datetime(2026, 12, 14, tzinfo=UTC) + timedelta(hours=2))
    assert msg is not None and "last week's forecast would size this week's floors" in msg
    assert "fix: python -m bench forecast --season-days 7 --plan P" in msg
