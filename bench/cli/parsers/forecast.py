"""``bench forecast``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.plan.forecast_names import DEFAULT_QUANTILE, MODELS

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
With --season-days 7 the forecast runs a week ahead and the floors are per weekday (a weekday's
crowd is not the weekend's), within the 200 scheduled actions of one scalable target (the slots
widen until the week fits), valid for the week. At least three seasons (--season-days days
each): the models (statsmodels' STL, the one-season MSTL; additive Holt-Winters on the log rate)
are checked on the last seasons, each forecast from the ones before, against seasonal-naive (the
season before again); --model auto keeps the lowest pinball loss, seasonal-naive when no model
beats it.

  python -m bench forecast --plan artifacts/plan-kokoro-82m.json --history cloudwatch:invocations.csv
  python -m bench forecast --plan P.json --history 'csv:requests.csv' --history-end 2026-12-03T00:00:00Z --json
  python -m bench forecast --plan P.json --history cloudwatch:three-weeks.json --season-days 7 --timezone Europe/Berlin

Exit 0 written, 2 bad input (nothing written).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:

    p.add_argument("--plan", required=True, type=Path, metavar="FILE",
                   help="plan artifact (bench plan): its per-instance rate, planning T_total, floor and max size the floors")
    p.add_argument("--history", required=True, metavar="SPEC",
                   help="request-rate history: a trace spec as for bench simulate, or cloudwatch:PATH (per-minute Invocations)")
    p.add_argument("--history-end", default=None, metavar="ISO",
                   help="when a trace-spec history ends, ISO 8601 (default: now, to the minute); cloudwatch: its last minute")
    p.add_argument("--model", choices=MODELS, default="auto", help="forecast model (default auto: the backtest's best)")
    p.add_argument("--quantile", type=float, default=DEFAULT_QUANTILE, metavar="Q",
                   help=f"quantile of the forecast the floors are sized for, in (0, 1) (default {DEFAULT_QUANTILE}; "
                        "below 0.5 only under a reactive layer that answers the rest: bench tune's surge on the Average)")
    p.add_argument("--season-days", type=int, choices=(1, 7), default=1,
                   help="the season: a day (daily floors for the next day), or a week (floors per weekday for the next week, "
                        "cron(M H ? * MON *); at least three weeks of history) (default 1)")
    p.add_argument("--timezone", default="UTC", metavar="TZ", help="IANA time zone of the schedule (default UTC)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="where forecast-<model>.json goes")
    p.add_argument("--json", action="store_true", help="print the forecast artifact as JSON instead of the table")
