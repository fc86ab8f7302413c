"""``bench simulate``: a traffic trace against a simulated fleet of the measured instance, every
policy side by side (speech.sim, docs/design.md §10). Parses (bench/cli/parsers/simulate.py), calls
:func:`bench.operations.simulate.simulate_trace`, renders (:mod:`bench.report.simulation`)."""

from __future__ import annotations

import argparse
import json
import sys

from bench.operations.simulate import simulate_trace
from bench.report.runs import simulation_report
from bench.report.simulation import promise_lines, render_simulation


def run(args: argparse.Namespace) -> int:
    s = simulate_trace(args)
    art = s.artifact
    if args.json:
        if s.hot is None:
            print(art.model_dump_json(indent=2))
        else:
            print(json.dumps({"simulation": art.model_dump(mode="json"), "hot_load": s.hot}, indent=2))
    else:
        print(render_simulation(art))
        if s.tuned is not None:
            print("\n" + "\n".join(promise_lines(art, s.tuned)))
        if s.hot is not None:
            print("\n" + s.hot["table"])
        print("\nwrote " + ", ".join(str(p) for p in s.written))
    sys.stdout.flush()

    args._report = simulation_report(art, s.runs, s.model, s.plan)
    return 0


