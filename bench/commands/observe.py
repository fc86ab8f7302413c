"""``bench observe``: calibrate a deployed plan against the endpoint's CloudWatch history.
Parses (bench/cli/parsers/observe.py), calls :func:`bench.operations.observe.observe_endpoint`,
renders (:mod:`bench.report.terminal`)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from bench.operations.observe import observe_endpoint
from bench.report.runs import observe_report
from bench.report.terminal import render_calibration


def run(args: argparse.Namespace, session: Any = None, now: datetime | None = None) -> int:
    artifact, out = observe_endpoint(args, session, now)
    if args.json:
        print(artifact.model_dump_json(indent=2))
    else:
        print(render_calibration(artifact))
        print(f"\nwrote {out}")
    sys.stdout.flush()

    args._report = observe_report(artifact)
    return 0 if artifact.verdict == "holds" else 1

