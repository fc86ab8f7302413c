"""``bench forecast``: the next day's scheduled floors from the request-rate history, by a seasonal
model checked against seasonal-naive (speech.plan.forecast, docs/design.md §10.11).
Parses (bench/cli/parsers/forecast.py), calls :func:`bench.operations.forecast.forecast_floors`,
renders (:mod:`bench.report.terminal`)."""

from __future__ import annotations

import argparse
import json
import sys

from bench.operations.forecast import forecast_floors
from bench.report.terminal import render_forecast


def run(args: argparse.Namespace) -> int:
    art, out = forecast_floors(args)
    if args.json:
        print(json.dumps(art.model_dump(mode="json"), indent=2))
    else:
        print(render_forecast(art))
        print(f"\nwrote {out}")
    sys.stdout.flush()
    return 0
