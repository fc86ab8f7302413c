"""``bench forecast``'s forecast, the one function the command calls (:func:`forecast_floors`): the
request-rate history forecast a day ahead (statsmodels, backtested against seasonal-naive), the
scheduled floors that keep its upper quantile in service one planning T_total ahead, the forecast
artifact written."""

from __future__ import annotations

import argparse
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from bench.errors import UsageError
from bench.load.traces import load_history
from speech.errors import PlanInputError
from speech.files import load_artifact, write_artifact
from speech.plan.forecast import DAY_MIN, forecast_rate, forecast_schedule
from speech.schema.artifacts import canonical_sha256
from speech.schema.config import FloorSchedule, ForecastProvenance
from speech.schema.forecast_artifact import ForecastArtifact
from speech.schema.plan_artifacts import PlanArtifact


def forecast_floors(args: argparse.Namespace) -> tuple[ForecastArtifact, Path]:
    """The next day's floors (``--season-days 7``: the next week's, per weekday) for the parsed flags
    of ``bench forecast``: the history forecast
    (backtested against seasonal-naive), its upper quantile sized at the plan's per-instance rate a
    planning T_total ahead; the forecast artifact and where it was written."""
    if not 0.0 < args.quantile < 1.0:
        raise UsageError(f"--quantile {args.quantile:g}: must be in (0, 1) (e.g. 0.9: the floors cover the forecast's 90th "
                         "percentile; below 0.5 only under a reactive layer that answers the rest, as bench tune may choose)")
    plan = load_artifact(args.plan, PlanArtifact)
    try:
        FloorSchedule(timezone=args.timezone, floors=[{"at": "00:00", "min_instances": 1}, {"at": "00:01", "min_instances": 1}])
    except ValueError as err:
        raise UsageError(f"--timezone {args.timezone!r}: {err}") from None

    end, arrivals = load_history(args.history, args.history_end)

    local_start = (end - timedelta(seconds=int(arrivals.size))).astimezone(ZoneInfo(args.timezone))
    # a weekly season is forecast a week ahead and written as floors per weekday (cron(M H ? * MON *)):
    # its minutes count from Monday 00:00 in the schedule's zone
    weekly = args.season_days == 7
    start_minute = (local_start.weekday() * DAY_MIN if weekly else 0) + local_start.hour * 60 + local_start.minute
    horizon = timedelta(days=args.season_days)
    try:
        fc = forecast_rate(arrivals, start_minute=start_minute, season_days=args.season_days,
                           horizon_min=args.season_days * DAY_MIN, model=args.model, quantile=args.quantile)
    except PlanInputError as err:
        raise UsageError(f"--history {args.history!r}: {err}") from None
    digest = hashlib.sha256(np.asarray(arrivals, dtype=np.float64).tobytes()).hexdigest()
    refresh = " ".join(["python -m bench forecast", f"--plan {args.plan}", f"--history '{args.history}'",
                        f"--model {args.model}", f"--quantile {args.quantile:g}", f"--season-days {args.season_days}",
                        f"--timezone {args.timezone}", f"--out {args.out}"])
    prov = ForecastProvenance(model=fc.model, quantile=args.quantile, history_sha256=digest,
                              history_end=end.isoformat().replace("+00:00", "Z"), horizon_s=int(horizon.total_seconds()),
                              valid_until=(end + horizon).isoformat().replace("+00:00", "Z"),
                              backtest_loss={k: round(v, 4) for k, v in fc.backtest.losses.items()}, refresh=refresh)
    per = plan.capacity.per_instance_rps or plan.capacity.throughput_at_target_rps
    try:
        schedule = forecast_schedule(fc, per_instance_rps=per, lead_s=plan.t_total.planning_s, floor=plan.fleet.min_instances,
                                     max_instances=plan.fleet.max_instances, timezone=args.timezone, provenance=prov,
                                     trace_sha256=digest)
    except PlanInputError as err:
        raise UsageError(f"--plan {args.plan}: {err}") from None
    season = arrivals[-fc.season_min * 60:]
    last = season[: (season.size // 60) * 60].reshape(-1, 60).mean(axis=1)
    art = ForecastArtifact(history=args.history, history_hours=round(arrivals.size / 3600, 3), plan_sha256=canonical_sha256(plan),
                           per_instance_rps=per, lead_s=plan.t_total.planning_s, start_minute=fc.start_minute,
                           point_rps=[round(float(x), 3) for x in fc.point_rps[:fc.period_min]],
                           upper_rps=[round(float(x), 3) for x in fc.upper_rps[:fc.period_min]],
                           last_season_rps=[round(float(x), 3) for x in last], schedule=schedule, created_at=datetime.now(UTC))
    out = write_artifact(args.out / f"forecast-{plan.model}.json", art)
    return art, out
