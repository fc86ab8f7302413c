"""The inputs a team chooses for one model's plan: reaction bounds, SLO share, scheduled floors, the
promise a tuned plan carries. Pure pydantic, read from stack config by speech.schema.config."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from speech.schema.aws_enums import nearest
from speech.schema.base import Frozen
from speech.schema.bounds import (
    MAX_DELAY_S,
    MIN_INSTANCES,
    QMAX_DERATE,
    RATE_RPS,
    SCALE_IN_COOLDOWN_S,
    SCALE_IN_STEP_SHARE,
    SCALE_IN_WINDOW_S,
    SCALE_OUT_COOLDOWN_S,
    SLO_MS,
    SLO_SHARE,
    SURGE_AVERAGE_SHARE,
    SURGE_RATIO,
    TARGET_SHARE,
)
from speech.schema.promise import Promise


class ReactionPolicy(Frozen):
    """How fast CloudWatch and Application Auto Scaling can notice load: not measured, bounded."""

    metric_period_s: Annotated[int, Field(ge=10, le=300)] = 10
    """High-resolution metric period of ConcurrentRequestsPerModel, seconds: 10, 20, 30 or a
    multiple of 60 (the only alarm periods CloudWatch accepts)."""
    datapoints_to_alarm: Annotated[int, Field(ge=1, le=20)] = 3
    """Datapoints in breach before the scale-out alarm fires."""

    @field_validator("metric_period_s")
    @classmethod
    def _cloudwatch_period(cls, v: int) -> int:
        if v not in (10, 20, 30) and v % 60:
            raise ValueError(
                f"metric_period_s {v} is not an alarm period CloudWatch accepts; use 10, 20, 30 or a multiple of 60"
            )
        return v


DEFAULT_SLO_SHARE = 0.995
"""Share of requests the fleet is sized to answer within the SLO by default: refused requests and
answered ones over the SLO together at most 0.5 % at the planned per-instance rate."""
HHMM_RE = re.compile(r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")
WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
"""Day-of-week names as Application Auto Scaling's cron writes them, Monday first (ISO 8601's order:
``datetime.weekday()`` is the index)."""
Weekday = Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
WEEK_MIN = 7 * 1440


class ScheduledFloor(Frozen):
    """From ``at`` (local time of the schedule's time zone, every day, or only on ``weekday``) until
    the next entry, the fleet keeps at least ``min_instances`` (never fewer than the plan's floor)."""


    at: str
    """Local time ``HH:MM`` (24 h) the floor takes effect."""
    min_instances: Annotated[int, Field(ge=1)]
    """The floor from then on; an entry at or below the plan's floor releases the raised floor."""
    weekday: Weekday | None = Field(None, exclude_if=lambda v: v is None)
    """The day of the week the entry runs on (a weekly schedule: ``cron(M H ? * MON *)``); None: every
    day (``cron(M H * * ? *)``). Left out of dumps when unset, so daily schedules keep their bytes."""

    @field_validator("at")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not HHMM_RE.match(v):
            raise ValueError(f"at {v!r} is not a local time HH:MM (24 h, e.g. 07:40)")
        return v

    @property
    def minute_of_day(self) -> int:
        hh, mm = self.at.split(":")
        return int(hh) * 60 + int(mm)

    @property
    def minute_of_week(self) -> int:
        """Minutes since Monday 00:00 (a daily entry: its minute of Monday)."""
        return (0 if self.weekday is None else WEEKDAYS.index(self.weekday)) * 1440 + self.minute_of_day

    @property
    def when(self) -> str:
        """``HH:MM``, or ``MON HH:MM`` for a weekly entry: how reports and findings name it."""
        return self.at if self.weekday is None else f"{self.weekday} {self.at}"


MAX_SCHEDULED_FLOORS = 200
"""Scheduled actions per scalable target: Application Auto Scaling's quota, not adjustable
(docs/design.md §10.11)."""


class ForecastProvenance(Frozen):
    """Where forecast floors came from (``bench forecast``): the model, the history it read, and
    until when the forecast holds. The policy pack refuses a stack whose forecast is past
    ``valid_until`` at preview, with ``refresh`` as the fix."""

    model: str
    """The model the backtest chose: mstl, ets or seasonal-naive."""
    quantile: Annotated[float, Field(gt=0.0, lt=1.0)]
    """The quantile of the forecast the floors are sized for (an upper one, or below the median
    under the Average surge, which answers what such floors miss: speech.sim.knobs.LOW_FORECAST_QUANTILES)."""
    history_sha256: str
    """sha256 of the history's per-second arrivals (float64 bytes)."""
    history_end: str
    """ISO 8601 time the history ends (UTC); the forecast starts there."""
    horizon_s: Annotated[int, Field(ge=3600)]
    valid_until: str
    """ISO 8601 time (UTC): ``history_end`` plus the horizon."""
    backtest_loss: dict[str, float] = Field(default_factory=dict)
    """Pinball loss (requests/s) of each model on the history's last seasons; seasonal-naive's among them."""
    refresh: str = ""
    """The command that refreshes the forecast (the pack prints it when the forecast is stale)."""


class FloorSchedule(Frozen):
    """A daily or weekly schedule of minimum capacity (``bench plan --schedule-from TRACE`` derives
    it, or ``bench forecast`` from a forecast): rendered as Application Auto Scaling scheduled
    actions, cron in ``timezone``. Weekly when its entries name a ``weekday`` (all of them: a daily
    entry among weekly ones would run on every day, between the weekly ones, which no reading
    of the schedule intends)."""

    timezone: Annotated[str, Field(min_length=1)] = "UTC"
    """IANA time zone the ``at`` times are in (Application Auto Scaling's Timezone), e.g. Europe/Berlin:
    a canonical name (UTC, or a zone of the tz database, not a link such as US/Eastern; the preview
    names the canonical zone of a link)."""
    floors: Annotated[list[ScheduledFloor], Field(min_length=2)]
    """At least one raise and one release; at most :data:`MAX_SCHEDULED_FLOORS` (the quota; a
    weekly schedule shares it among its seven days)."""
    trace_sha256: str | None = Field(None, exclude_if=lambda v: v is None)
    """sha256 of the trace the schedule was derived from (None: written by hand)."""
    forecast: ForecastProvenance | None = Field(None, exclude_if=lambda v: v is None)
    """Forecast floors (``bench forecast``): the provenance the pack checks; None: learned or hand-written."""

    @field_validator("timezone")
    @classmethod
    def _iana(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from speech.schema.timezones import canonical_zone

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            from zoneinfo import available_timezones

            close = nearest(v, sorted(z for z in available_timezones() if canonical_zone(z) is None))
            hint = f"nearest: {', '.join(close)}" if close else "use e.g. UTC, Europe/Berlin, America/New_York"
            raise ValueError(f"timezone {v!r} is not an IANA time zone; {hint}") from None
        canonical = canonical_zone(v)
        if canonical is not None:
            raise ValueError(f"timezone {v!r} is an alias (a tz database link) of {canonical!r}; Application Auto "
                             f"Scaling's scheduled actions take canonical zone names only: use {canonical!r}")
        return v

    @field_validator("floors")
    @classmethod
    def _distinct_times(cls, v: list[ScheduledFloor]) -> list[ScheduledFloor]:
        if len(v) > MAX_SCHEDULED_FLOORS:
            raise ValueError(
                f"{len(v)} scheduled floors exceed Application Auto Scaling's quota of {MAX_SCHEDULED_FLOORS} scheduled "
                "actions per scalable target (not adjustable): coarsen the schedule (longer slots, e.g. bench forecast "
                "--slot-minutes 60, or daily floors in place of per-weekday ones)")
        weekly = {f.weekday is not None for f in v}
        if len(weekly) > 1:
            daily = ", ".join(f.at for f in v if f.weekday is None)
            raise ValueError(f"floors at {daily} name no weekday while others do: a schedule is daily (no entry names a "
                             "weekday) or weekly (every entry names one, MON..SUN); give these a weekday")
        seen: set[str] = set()
        for f in v:
            if f.when in seen:
                raise ValueError(f"two floors at {f.when}; keep one entry per time")
            seen.add(f.when)
        return sorted(v, key=lambda f: f.minute_of_week)

    @property
    def weekly(self) -> bool:
        """Entries per weekday (``cron(M H ? * MON *)``) rather than every day."""
        return self.floors[0].weekday is not None

    @property
    def period_min(self) -> int:
        """Minutes after which the schedule repeats: a day, or a week."""
        return WEEK_MIN if self.weekly else 1440


class PlanInputs(Frozen):
    """What a team chooses; everything else comes from measurements."""

    slo_ms: Annotated[float, Field(**SLO_MS.field())] = 3000.0
    """p95 TTFAB objective, milliseconds, queueing included."""
    surge_ratio: Annotated[float, Field(**SURGE_RATIO.field())] = 1.25
    """Traffic growth the fleet must absorb within one scale-out (1.25 = +25 %)."""
    peak_rps: Annotated[float, Field(**RATE_RPS.field())]
    """Busiest-hour request rate across the endpoint, requests per second."""
    trough_rps: Annotated[float, Field(**RATE_RPS.field())] = 1.0
    """Quietest-hour request rate, requests per second."""
    min_instances: Annotated[int, Field(**MIN_INSTANCES.field())] = 1
    """Instance floor the team insists on (real-time variants need at least 1)."""
    reaction: ReactionPolicy = ReactionPolicy()
    qmax_derate: Annotated[float, Field(**QMAX_DERATE.field())] = 1.0
    """Plan with floor(measured Q_max x this) until the endpoint is re-measured (``bench observe``
    recommends e.g. 0.9 when the deployed endpoint is slower than its ladder); 1.0 = as measured."""
    max_delay_s: Annotated[float, Field(**MAX_DELAY_S.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Batch (``hosting: async``) models only: acceptable completion delay, seconds, from a request's
    submission to its response in S3, a cold start from zero instances included (speech.plan.batch).
    Left out of dumps when unset, so real-time provenance documents keep their bytes."""

    # --- tuned values (bench tune searches them; None: the seed formula of speech.plan.realtime) ---
    # Every one is left out of dumps when unset, so plans and provenance documents without them keep
    # their bytes.
    slo_share: Annotated[float, Field(**SLO_SHARE.field())] = Field(
        DEFAULT_SLO_SHARE, exclude_if=lambda v: v == DEFAULT_SLO_SHARE)
    """Share of requests the fleet is sized to answer within the SLO (refused ones count as missed):
    the per-instance arrival rate of the fleet is the highest one whose birth-death chain keeps it
    (speech.plan.realtime.slo_rate). Default 0.995."""
    target_share: Annotated[float, Field(**TARGET_SHARE.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Scale-out target as a share of Q_max; at most 1 - h (the surge rule: h of Q_max stays free
    for a surge). None: 1 - h."""
    scale_in_step_share: Annotated[float, Field(**SCALE_IN_STEP_SHARE.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Share of the fleet one scale-in step removes; at most 1 - C_scale_min / C_scale_max (removing
    k of N lifts the rest by N / (N - k)). None: that bound."""
    scale_in_window_s: Annotated[int, Field(**SCALE_IN_WINDOW_S.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Seconds every period must sit at or below C_scale_min before a step; at least 3 metric
    periods. None: max(3 periods, 300 s)."""
    scale_in_cooldown_s: Annotated[int, Field(**SCALE_IN_COOLDOWN_S.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Seconds between scale-in steps; at least the window and the planning T_total. None: max(300,
    3 x planning T_total)."""
    scale_out_cooldown_s: Annotated[int, Field(**SCALE_OUT_COOLDOWN_S.field())] | None = Field(None, exclude_if=lambda v: v is None)
    """Target tracking's scale-out cooldown; between the metric period and the measured T_total.
    None: clamp(T_total / 2, 10, 30)."""
    surge_average_share: Annotated[float, Field(**SURGE_AVERAGE_SHARE.field())] | None = Field(
        None, exclude_if=lambda v: v is None)
    """The reactive layer on the Average of ConcurrentRequestsPerModel (speech.deploy.scaling.realtime):
    the surge alarm fires when the period's Average reaches this share of Q_max, and target
    tracking's target is Q_max itself (the gate holds concurrency there, so it never acts). For
    plans over scheduled floors sized at the SLO rate: there some instance refuses in almost every
    period, which holds the Maximum at Q_max, while the Average stays well below until the traffic
    outgrows the floor (docs/plan-cost.md). None: target tracking and the surge on the Maximum."""
    schedule: FloorSchedule | None = Field(None, exclude_if=lambda v: v is None)
    """Daily scheduled floors (``bench plan --schedule-from TRACE``); None: the floor is constant."""
    promise: Promise | None = Field(None, exclude_if=lambda v: v is None)
    """What the simulation of these inputs on a trace promised (``bench tune``); None: advisory plan."""
    reasons: dict[str, str] = Field({}, exclude_if=lambda v: not v)
    """Why each tuned value differs from its seed formula (input name -> reason), printed next to it."""

    @model_validator(mode="after")
    def _trough_below_peak(self) -> PlanInputs:
        if self.trough_rps > self.peak_rps:
            raise ValueError(f"trough_rps {self.trough_rps} exceeds peak_rps {self.peak_rps}")
        return self
