"""``bench copies``: the plan for a model hosted as copies (an inference component), no AWS calls.
Parses (bench/cli/parsers/copies.py), calls :func:`bench.operations.copies.plan_copies`, renders
(:mod:`bench.report.terminal`)."""

from __future__ import annotations

import argparse
import sys

from bench.operations.copies import plan_copies
from bench.report.terminal import render_copy_plan


def run(args: argparse.Namespace) -> int:
    plan, out = plan_copies(args)
    if args.json:
        print(plan.model_dump_json(indent=2))
    else:
        print(render_copy_plan(plan))
        print(f"\nwrote {out}")
    sys.stdout.flush()
    return 1 if plan.verdict == "stop" else 0
