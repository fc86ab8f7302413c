"""``bench validate``: the deployed policy equals the plan, and (--live) the endpoint keeps its promise.
Parses (bench/cli/parsers/validate.py), calls :func:`bench.operations.validate.validate_deployment`,
renders."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from bench.operations.validate import validate_deployment
from bench.report.runs import validate_report
from bench.report.terminal import render_validation


def run(args: argparse.Namespace, session=None, load_target=None, sleep: Callable[[float], None] = time.sleep) -> int:
    """``load_target``: where --live sends its requests instead of the endpoint (tests: a real local
    server while moto plays the control plane and CloudWatch)."""
    issues, live_rows = validate_deployment(args, session, load_target, sleep)
    ok = not issues
    if args.json:
        print(json.dumps({"ok": ok, "issues": [i.as_dict() for i in issues], "live": live_rows}, indent=2))
    else:
        print(render_validation(issues, live_rows))

    args._report = validate_report(ok, issues, live_rows, args.endpoint or args.url)
    return 0 if ok else 1
