"""``bench tune``: search the deployable scaling parameters for the fewest instance-hours that keep
the SLO share on simulated days of a trace (speech.sim.tune, docs/design.md §10.10). Parses (bench/cli/parsers/tune.py),
calls :func:`bench.operations.tune.tune`, renders (:mod:`bench.report.tune`)."""

from __future__ import annotations

import argparse
import json
import sys

from bench.operations.tune import tune
from bench.report.runs import tune_report
from bench.report.tune import render_hpa_tune, render_tune
from speech.sim.artifact import TuneArtifact


def run(args: argparse.Namespace) -> int:
    outcome = tune(args)
    art = outcome.artifact
    if args.json:
        print(json.dumps(art.model_dump(mode="json"), indent=2))
    else:
        print(render_tune(art) if isinstance(art, TuneArtifact) else render_hpa_tune(art))
        print("\nwrote " + ", ".join(str(p) for p in outcome.written))
    sys.stdout.flush()
    if isinstance(art, TuneArtifact):
        args._report = tune_report(art)
    return 0 if outcome.held else 1
