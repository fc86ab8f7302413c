"""Forecast floors: the next day's (or week's) scheduled floors from the user's own request-rate
history, by a seasonal model checked against seasonal-naive (docs/design.md §10.11).

Pure: a rate series in (requests/s every ``step_s`` seconds, its first sample at ``start_minute``
of the day), a :class:`Forecast` and a :class:`speech.schema.config.FloorSchedule` out; no files, no
clock (the caller passes the times the provenance records).

* The series is averaged into bins of ``bin_s`` (5 minutes) and the model forecasts the bins of the
  horizon: ``mstl`` (statsmodels' STL, the one-season case of its MSTL: robust LOESS, the trend held at its last season's level),
  ``ets`` (statsmodels' additive Holt-Winters, ``ExponentialSmoothing``), or ``seasonal-naive`` (the
  value one season earlier: the baseline a model must beat).
* Backtest: each model is fitted on the history less its last season and forecasts that season;
  its error is the pinball loss of its upper quantile on the season's minutes. ``auto`` takes the
  model with the lowest loss and falls back to seasonal-naive when no model beats it.
* The upper quantile: the forecast bin times the ``quantile`` of (each backtest minute's rate over
  its bin's forecast): it carries both the model's error and how far a minute rises above its bin.
* Floors: each minute needs ``ceil(upper / per_instance_rps)`` instances (the plan's per-instance
  rate at the SLO); capacity is asked one planning T_total ahead (the floor at a minute is the
  largest need of the lead that follows); slots of ``slot_minutes`` keep their largest floor, and
  an entry is written where a slot's floor differs from the previous one, at most
  :data:`MAX_SCHEDULED_ACTIONS` (Application Auto Scaling's scheduled actions per scalable target;
  the slot widens until they fit).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from speech.errors import PlanInputError
from speech.plan.forecast_names import DEFAULT_QUANTILE, MODELS
from speech.plan.schedule import _hhmm, minute_means
from speech.schema.config import MAX_SCHEDULED_FLOORS, WEEK_MIN, WEEKDAYS, FloorSchedule, ForecastProvenance, ScheduledFloor
from speech.schema.units import EPS

DAY_MIN = 1440
BIN_S = 300
"""Forecast bin: the models see 5-minute means (288 a day)."""
MAX_SCHEDULED_ACTIONS = MAX_SCHEDULED_FLOORS
"""Scheduled actions per scalable target, Application Auto Scaling's quota (not adjustable)."""
SLOTS_MIN = (5, 10, 15, 20, 30, 60)
"""Slot lengths tried, shortest first, until the entries fit the quota."""


@dataclass(frozen=True)
class Backtest:
    """Pinball loss (requests/s) of each model's upper quantile on the history's last season."""

    losses: dict[str, float]
    chosen: str

    @property
    def beats_naive(self) -> bool:
        return self.chosen != "seasonal-naive" and self.losses[self.chosen] < self.losses["seasonal-naive"] - EPS


@dataclass(frozen=True)
class Forecast:
    """Per-minute rates over the horizon (requests/s), starting at ``start_minute`` of the season (of
    the day; of the week from Monday 00:00 when the season is a week)."""

    model: str
    quantile: float
    point_rps: np.ndarray
    upper_rps: np.ndarray
    start_minute: int
    season_min: int
    backtest: Backtest
    ratio: float
    """The quantile of actual / forecast the upper curve is scaled by."""

    @property
    def weekly(self) -> bool:
        """A weekly season forecast a whole week ahead: its floors are per weekday."""
        return self.season_min == WEEK_MIN and self.point_rps.size >= WEEK_MIN

    @property
    def period_min(self) -> int:
        """Minutes of the forecast its floors cover: the week, or its first day."""
        return WEEK_MIN if self.weekly else DAY_MIN


def _bins(minutes: np.ndarray, bin_min: int) -> np.ndarray:
    whole = minutes.size // bin_min
    return minutes[: whole * bin_min].reshape(whole, bin_min).mean(axis=1)


def _fit(model: str, y: np.ndarray, season: int, horizon: int) -> np.ndarray:
    """``horizon`` bins after ``y`` (bin means, requests/s) by ``model``, clipped at 0. Both models
    work on the log of the rate (log1p): a tide's swing scales with its level, so its seasons are
    multiplicative."""
    if model == "seasonal-naive":
        out = np.tile(y[-season:], math.ceil(horizon / season))[:horizon]
    elif model == "mstl":
        from statsmodels.tsa.seasonal import STL

        # one season: MSTL's single-period case is STL (MSTL drops a period that is half the series or more)
        fit = STL(np.log1p(y), period=season, robust=True).fit()
        seasonal = np.asarray(fit.seasonal)[-season:]
        level = float(np.asarray(fit.trend)[-season:].mean())  # the trend held at its last season's level
        out = np.expm1(level + np.tile(seasonal, math.ceil(horizon / season))[:horizon])
    elif model == "ets":
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        with warnings.catch_warnings():  # convergence chatter on short histories: the backtest judges the result
            warnings.simplefilter("ignore")
            fit = ExponentialSmoothing(np.log1p(y), seasonal="add", seasonal_periods=season,
                                       initialization_method="heuristic").fit()
            out = np.expm1(np.asarray(fit.forecast(horizon)))
    else:
        raise PlanInputError(f"unknown forecast model {model!r}; choose from {', '.join(MODELS)}")
    return np.maximum(np.asarray(out, dtype=float), 0.0)


def pinball(actual: np.ndarray, predicted: np.ndarray, q: float) -> float:
    """Mean pinball (quantile) loss of ``predicted`` as the ``q`` quantile of ``actual``."""
    d = actual - predicted
    return float(np.mean(np.maximum(q * d, (q - 1.0) * d)))


def _upper_ratio(actual_min: np.ndarray, bins_fc: np.ndarray, bin_min: int, q: float) -> float:
    """The ``q`` quantile of each minute's rate over its bin's forecast (1 where the forecast is
    nowhere positive)."""
    per_min = np.repeat(bins_fc, bin_min)[: actual_min.size]
    ok = per_min > EPS
    if not ok.any():
        return 1.0
    return float(np.quantile(actual_min[ok] / per_min[ok], q))


MAX_FOLDS = 3
"""Seasons at the history's end each model forecasts in the backtest, each from the seasons before it."""


def forecast_rate(rate_rps: Sequence[float] | np.ndarray, *, step_s: int = 1, start_minute: int = 0, season_days: int = 1,
                  horizon_min: int = DAY_MIN, model: str = "auto", quantile: float = DEFAULT_QUANTILE,
                  bin_s: int = BIN_S) -> Forecast:
    """The next ``horizon_min`` minutes after the history ``rate_rps`` (see the module docstring);
    ``start_minute``: the history's first minute in the season (of the day; with ``season_days`` 7,
    of the week from Monday 00:00).

    The history must cover at least three seasons (``season_days`` days each): a model fits on two
    and is checked on the next. Up to :data:`MAX_FOLDS` of the last seasons are each forecast from
    the seasons before them (rolling origin); seasonal-naive is judged on the same seasons."""
    return forecast_rates(rate_rps, step_s=step_s, start_minute=start_minute, season_days=season_days,
                          horizon_min=horizon_min, model=model, quantiles=(quantile,), bin_s=bin_s)[quantile]


def forecast_rates(rate_rps: Sequence[float] | np.ndarray, *, step_s: int = 1, start_minute: int = 0, season_days: int = 1,
                   horizon_min: int = DAY_MIN, model: str = "auto", quantiles: Sequence[float] = (DEFAULT_QUANTILE,),
                   bin_s: int = BIN_S) -> dict[float, Forecast]:
    """:func:`forecast_rate` at each of ``quantiles``, every model fitted once: the backtest's fits
    and the horizon's fit do not depend on the quantile (only the upper ratio, the pinball loss and
    so the model ``auto`` chooses do), and a weekly Holt-Winters fit is most of a forecast's CPU
    (about 15 s a fit on three weeks of 5-minute bins)."""
    if model not in MODELS:
        raise PlanInputError(f"unknown forecast model {model!r}; choose from {', '.join(MODELS)}")
    for quantile in quantiles:
        if not 0.0 < quantile < 1.0:
            raise PlanInputError(f"forecast quantile {quantile:g} must be in (0, 1) (e.g. 0.9)")
    if bin_s % 60 or DAY_MIN % (bin_s // 60):
        raise PlanInputError(f"forecast bin {bin_s} s must be whole minutes dividing a day")
    minutes = minute_means(np.asarray(rate_rps, dtype=float).tolist(), step_s)
    season_min = season_days * DAY_MIN
    seasons = minutes.size // season_min
    if seasons < 3:
        raise PlanInputError(
            f"the history covers {minutes.size / 60:.1f} h; a {season_days}-day season needs at least "
            f"{3 * season_min / 60:.0f} h (three seasons: two to fit a model on, one to check its forecast against)")
    total = minutes.size
    # whole seasons counted back from the history's end, so the last one lines up with the forecast
    minutes = minutes[-seasons * season_min:]
    bin_min = bin_s // 60
    season = season_min // bin_min
    y = _bins(minutes, bin_min)
    folds = range(max(2, seasons - MAX_FOLDS), seasons)
    candidates = ("mstl", "ets", "seasonal-naive") if model == "auto" else tuple(dict.fromkeys((model, "seasonal-naive")))
    backtests: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in candidates:
        actual, fitted = [], []
        for k in folds:  # season k forecast from seasons 0..k-1
            fc = _fit(m, y[: k * season], season, season)
            actual.append(minutes[k * season_min : (k + 1) * season_min])
            fitted.append(np.repeat(fc, bin_min)[:season_min])
        backtests[m] = (np.concatenate(actual), np.concatenate(fitted))
    points: dict[str, np.ndarray] = {}
    start = (start_minute + total) % season_min  # the forecast starts where the history ends
    out: dict[float, Forecast] = {}
    for quantile in quantiles:
        losses: dict[str, float] = {}
        ratios: dict[str, float] = {}
        for m, (a, f) in backtests.items():
            ratios[m] = _upper_ratio(a, f, 1, quantile)
            losses[m] = pinball(a, f * ratios[m], quantile)
        chosen = min(losses, key=lambda m: (losses[m], m == "seasonal-naive")) if model == "auto" else model
        if chosen not in points:
            points[chosen] = np.repeat(_fit(chosen, y, season, math.ceil(horizon_min / bin_min)), bin_min)[:horizon_min]
        point = points[chosen]
        out[quantile] = Forecast(model=chosen, quantile=quantile, point_rps=point, upper_rps=point * ratios[chosen],
                                 start_minute=start, season_min=season_min, backtest=Backtest(losses=losses, chosen=chosen),
                                 ratio=ratios[chosen])
    return out


def minute_needs(upper_rps: np.ndarray, per_instance_rps: float, lead_s: float, floor: int, max_instances: int) -> np.ndarray:
    """Instances each minute's floor asks for: ``ceil(upper / per_instance_rps)`` within [floor,
    max], raised one lead (the planning T_total, whole minutes up) ahead: the largest need of the
    minute and the lead that follows it."""
    if per_instance_rps <= 0:
        raise PlanInputError("the plan has no per-instance rate to size floors with (its fleet_capacity finding says why)")
    need = np.clip(np.ceil(np.asarray(upper_rps, dtype=float) / per_instance_rps - EPS), floor, max_instances).astype(int)
    lead = math.ceil(lead_s / 60 - EPS)
    padded = np.concatenate([need, np.full(lead, need[-1] if need.size else floor)])
    return np.array([padded[m : m + lead + 1].max() for m in range(need.size)], dtype=int)


def slot_entries(needs: np.ndarray, start_minute: int, slot_minutes: int, period_min: int = DAY_MIN) -> list[tuple[int, int]]:
    """(minute of the period, floor) where a slot's floor (its largest minute) differs from the
    previous slot's; slots aligned to the period (a day, or a week from Monday 00:00), the first
    entry always written."""
    out: list[tuple[int, int]] = []
    day = np.full(period_min, -1, dtype=int)
    for i, n in enumerate(needs[:period_min]):
        day[(start_minute + i) % period_min] = max(day[(start_minute + i) % period_min], int(n))
    prev = None
    for s in range(0, period_min, slot_minutes):
        v = int(day[s : s + slot_minutes].max())
        if v < 0:
            continue
        if v != prev:
            out.append((s, v))
            prev = v
    return out


def forecast_entries(needs: np.ndarray, start_minute: int, limit: int = MAX_SCHEDULED_ACTIONS,
                     slots: Sequence[int] = SLOTS_MIN, period_min: int = DAY_MIN) -> tuple[int, list[tuple[int, int]]]:
    """(slot minutes, entries) for the shortest slot whose entries fit ``limit`` (Application Auto
    Scaling's scheduled actions per scalable target: a week's entries share it)."""
    for slot in slots:
        entries = slot_entries(needs, start_minute, slot, period_min)
        if len(entries) <= limit:
            return slot, entries
    raise PlanInputError(f"the forecast floors need more than {limit} scheduled actions even in {slots[-1]}-minute slots"
                         + ("; use daily floors (--season-days 1)" if period_min > DAY_MIN else ""))


BUSY_SHARE = 0.25
"""A minute is in the busy hours when the forecast's mean there is at least this share of its
busiest minute: where scheduled headroom (:func:`busy_headroom`) applies."""


def busy_headroom(fc: Forecast, headroom: float, busy_share: float = BUSY_SHARE) -> np.ndarray:
    """The forecast's upper curve over its floors' period (:attr:`Forecast.period_min`) with
    ``headroom`` x more during its busy hours (a scheduled surge ratio): capacity for a crowd no
    forecast can place, bought only while the traffic is high, where a crowd costs the most requests."""
    upper = np.asarray(fc.upper_rps[:fc.period_min], dtype=float)
    if headroom == 1.0:
        return upper
    point = np.asarray(fc.point_rps[:fc.period_min], dtype=float)
    busy = point >= busy_share * float(point.max())
    return np.where(busy, upper * headroom, upper)


def headroom_peak_rps(fc: Forecast, headroom: float, busy_share: float = BUSY_SHARE) -> float:
    """The busiest minute of the forecast's floors' period with ``headroom`` over its busy hours
    (:func:`busy_headroom`), requests/s: the peak a plan's cap must hold for those floors to stand."""
    return float(busy_headroom(fc, headroom, busy_share).max())


def crowd_ratio(fc: Forecast, days: Sequence[np.ndarray]) -> float:
    """The largest crowd the ``days`` (per-second arrivals, each starting at the forecast's start)
    show: the highest ratio of a minute's rate to the forecast's mean at that minute, over the busy
    hours (:data:`BUSY_SHARE`); 1 when none rises above it."""
    point = np.asarray(fc.point_rps[:fc.period_min], dtype=float)
    busy = point >= BUSY_SHARE * float(point.max())
    best = 1.0
    for a in days:
        m = minute_means(np.asarray(a, dtype=float).tolist(), 1)[:fc.period_min]
        k = min(m.size, point.size)
        ok = busy[:k] & (point[:k] > EPS)
        if ok.any():
            best = max(best, float((m[:k][ok] / point[:k][ok]).max()))
    return best


def forecast_schedule(fc: Forecast, *, per_instance_rps: float, lead_s: float, floor: int, max_instances: int,
                      timezone: str = "UTC", provenance: ForecastProvenance | None = None,
                      trace_sha256: str | None = None, headroom: float = 1.0) -> FloorSchedule | None:
    """The forecast's first day as daily scheduled floors, or for a weekly forecast
    (:attr:`Forecast.weekly`) its week as floors per weekday (:func:`minute_needs`,
    :func:`forecast_entries`), ``headroom`` x more in its busy hours (:func:`busy_headroom`), or
    None when no minute needs more than ``floor``."""
    needs = minute_needs(busy_headroom(fc, headroom), per_instance_rps, lead_s, floor, max_instances)
    if not (needs > floor).any():
        return None
    _, entries = forecast_entries(needs, fc.start_minute, period_min=fc.period_min)
    if len(entries) < 2:  # one level all day: a raised constant floor, said as a raise and a release at midnight
        entries = [(0, entries[0][1]), (1, entries[0][1])]
    floors = [ScheduledFloor(at=_hhmm(m), min_instances=v, weekday=WEEKDAYS[m // DAY_MIN] if fc.weekly else None)
              for m, v in entries]
    return FloorSchedule(timezone=timezone, floors=floors, trace_sha256=trace_sha256, forecast=provenance)


def stale_forecast(prov: ForecastProvenance, now: datetime) -> str | None:
    """Why forecast floors may not deploy at ``now`` (an aware datetime): the forecast is past its
    horizon (``valid_until``), with the command that refreshes it; None while it holds."""
    until = datetime.fromisoformat(prov.valid_until.replace("Z", "+00:00"))
    if until.tzinfo is None:
        until = until.replace(tzinfo=UTC)
    if now < until:
        return None
    late = now - until
    week = prov.horizon_s >= 7 * 86400
    return (f"the scheduled floors are a {prov.model} forecast from history ending {prov.history_end}, valid until "
            f"{prov.valid_until} ({late.total_seconds() / 3600:.1f} h ago): {'last week' if week else 'yesterday'}'s "
            f"forecast would size {'this week' if week else 'today'}'s floors; "
            f"fix: {prov.refresh or 'python -m bench forecast'}, then bench plan --stack NAME --floors-from the new artifact")
