"""``bench capacity``: where more concurrency goes, copies into the spare room of running instances
first (CPU cores, host memory and accelerator memory, every resource a copy requests), new
instances for the rest.
Parses (bench/cli/parsers/capacity.py), calls :func:`bench.operations.capacity.evaluate`, renders
(:mod:`bench.report.terminal`)."""

from __future__ import annotations

import argparse
import sys

from bench.operations.capacity import evaluate
from bench.report.terminal import render_capacity


def run(args: argparse.Namespace) -> int:
    c = evaluate(args)
    fleet, evaluation = c.fleet, c.evaluation
    if c.fleet_written is not None and evaluation is None and not args.json:
        print(f"wrote {c.fleet_written}: {len(fleet.instances)} instances, models {', '.join(sorted(fleet.models))} "
              f"(placement {fleet.placement})")
    if evaluation is None:
        if args.json:
            print(fleet.model_dump_json(indent=2))
        return 0
    if args.json:
        print(evaluation.model_dump_json(indent=2))
    else:
        render_capacity(evaluation, fleet)
    sys.stdout.flush()
    return 1 if evaluation.verdict == "stop" else 0
