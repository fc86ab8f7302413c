"""``bench forecast``: the next day's scheduled floors from the request-rate history, by a seasonal
model checked against seasonal-naive (speech.plan.forecast, docs/design.md §10.11)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.errors import UsageError

DESCRIPTION = """\
Forecast the next day's traffic from its history and write the scheduled floors that have the
forecast's upper quantile in service one planning T_total ahead (Application Auto Scaling scheduled
actions; KEDA cron triggers where the Kubernetes renderer runs), as forecast-<model>.json. Put them
into the stack with `bench plan --stack NAME --floors-from forecast-<model>.json`; the policy pack
refuses a forecast past its horizon at preview, with this command as the fix.

History (--history): a trace spec as bench simulate reads it (csv:PATH, diurnal:..., azure-conv),
its first second at --history-start, ending at --history-end; or cloudwatch:PATH, a per-minute export of
the endpoint's Invocations metric (CSV Timestamp,Value, or the JSON of aws cloudwatch get-metric-data
/ get-metric-statistics, period 60, statistic Sum), whose own timestamps say when it starts and ends.
At least three seasons (--season-days days each): the models (statsmodels' STL, the one-season
MSTL; additive Holt-Winters on the log rate) are checked on the last seasons, each forecast from
the ones before, against seasonal-naive (yesterday again); --model auto keeps the lowest pinball
loss, seasonal-naive when no model beats it.

  python -m bench forecast --plan artifacts/plan-kokoro-82m.json --history cloudwatch:invocations.csv
  python -m bench forecast --plan P.json --history 'csv:requests.csv' --history-end 2026-12-03T00:00:00Z --json

Exit 0 written, 2 bad input (nothing written).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from speech.plan.forecast import DEFAULT_QUANTILE, MODELS

    p.add_argument("--plan", required=True, type=Path, metavar="FILE",
                   help="plan artifact (bench plan): its per-instance rate, planning T_total, floor and max size the floors")
    p.add_argument("--history", required=True, metavar="SPEC",
                   help="request-rate history: a trace spec as for bench simulate, or cloudwatch:PATH (per-minute Invocations)")
    p.add_argument("--history-end", default=None, metavar="ISO",
                   help="when a trace-spec history ends, ISO 8601 (default: now, to the minute); cloudwatch: its last minute")
    p.add_argument("--model", choices=MODELS, default="auto", help="forecast model (default auto: the backtest's best)")
    p.add_argument("--quantile", type=float, default=DEFAULT_QUANTILE, metavar="Q",
                   help=f"upper quantile the floors are sized for, in [0.5, 1) (default {DEFAULT_QUANTILE})")
    p.add_argument("--season-days", type=int, choices=(1, 7), default=1, help="the season: a day, or a week (default 1)")
    p.add_argument("--timezone", default="UTC", metavar="TZ", help="IANA time zone of the schedule (default UTC)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="where forecast-<model>.json goes")
    p.add_argument("--json", action="store_true", help="print the forecast artifact as JSON instead of the table")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from speech.errors import PlanInputError
    from speech.files import load_artifact, write_artifact
    from speech.plan.forecast import DAY_MIN, forecast_rate, forecast_schedule
    from speech.schema.artifacts import canonical_sha256
    from speech.schema.config import FloorSchedule, ForecastProvenance
    from speech.schema.forecast_artifact import ForecastArtifact
    from speech.schema.plan_artifacts import PlanArtifact

    if not 0.5 <= args.quantile < 1.0:
        raise UsageError(f"--quantile {args.quantile:g}: must be in [0.5, 1) (e.g. 0.9: the floors cover the forecast's 90th percentile)")
    plan = load_artifact(args.plan, PlanArtifact)
    try:
        FloorSchedule(timezone=args.timezone, floors=[{"at": "00:00", "min_instances": 1}, {"at": "00:01", "min_instances": 1}])
    except ValueError as err:
        raise UsageError(f"--timezone {args.timezone!r}: {err}") from None
    from bench.load.traces import load_history

    end, arrivals = load_history(args.history, args.history_end)
    from zoneinfo import ZoneInfo

    local_start = (end - timedelta(seconds=int(arrivals.size))).astimezone(ZoneInfo(args.timezone))
    try:
        fc = forecast_rate(arrivals, start_minute=local_start.hour * 60 + local_start.minute, season_days=args.season_days,
                           model=args.model, quantile=args.quantile)
    except PlanInputError as err:
        raise UsageError(f"--history {args.history!r}: {err}") from None
    digest = hashlib.sha256(np.asarray(arrivals, dtype=np.float64).tobytes()).hexdigest()
    refresh = " ".join(["python -m bench forecast", f"--plan {args.plan}", f"--history '{args.history}'",
                        f"--model {args.model}", f"--quantile {args.quantile:g}", f"--season-days {args.season_days}",
                        f"--timezone {args.timezone}", f"--out {args.out}"])
    prov = ForecastProvenance(model=fc.model, quantile=args.quantile, history_sha256=digest,
                              history_end=end.isoformat().replace("+00:00", "Z"), horizon_s=86400,
                              valid_until=(end + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
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
                           point_rps=[round(float(x), 3) for x in fc.point_rps[:DAY_MIN]],
                           upper_rps=[round(float(x), 3) for x in fc.upper_rps[:DAY_MIN]],
                           last_season_rps=[round(float(x), 3) for x in last], schedule=schedule, created_at=datetime.now(UTC))
    out = write_artifact(args.out / f"forecast-{plan.model}.json", art)
    if args.json:
        print(json.dumps(art.model_dump(mode="json"), indent=2))
    else:
        print(render(art))
        print(f"\nwrote {out}")
    sys.stdout.flush()
    return 0


def render(a) -> str:
    s = a.schedule
    prov = s.forecast if s is not None else None
    lines = [f"bench forecast: {a.history} ({a.history_hours:g} h of history)"]
    if prov is not None:
        naive = prov.backtest_loss.get("seasonal-naive")
        mine = prov.backtest_loss.get(prov.model)
        losses = ", ".join(f"{k} {v:.2f}" for k, v in prov.backtest_loss.items())
        verdict = ("seasonal-naive kept: no model beat it" if prov.model == "seasonal-naive" else
                   f"{prov.model} beats seasonal-naive ({mine:.2f} < {naive:.2f})")
        lines += [f"model: {prov.model} at the {prov.quantile:g} quantile; backtest pinball loss (requests/s): {losses}: {verdict}",
                  f"valid until {prov.valid_until} (history ends {prov.history_end}); refresh: {prov.refresh}"]
    if s is None:
        lines.append("no minute of the forecast needs more than the plan's floor: no floors written")
        return "\n".join(lines)
    lines.append(f"{len(s.floors)} scheduled floors ({s.timezone}), capacity {a.lead_s:g} s ahead at {a.per_instance_rps:g} "
                 "requests/s an instance:")
    lines.append("  " + ", ".join(f"{f.at} {f.min_instances}" for f in s.floors))
    return "\n".join(lines)
