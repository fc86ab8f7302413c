"""``bench replay``: a traffic trace sent open-loop to a real target, each request at its
timestamp, TTFAB and rejections recorded per request: the real-world check of ``bench simulate``.
Parses (bench/cli/parsers/replay.py), calls :func:`bench.operations.replay.replay_trace`, renders
(:mod:`bench.report.terminal`)."""

from __future__ import annotations

import argparse

from bench.operations.replay import replay_trace
from bench.report.runs import replay_report
from bench.report.terminal import render_replay


def run(args: argparse.Namespace) -> int:
    art, path = replay_trace(args)
    if args.json:
        print(art.model_dump_json(indent=2, exclude={"per_request"}))
    else:
        print(render_replay(art))
        print(f"wrote {path}")

    args._report = replay_report(art)
    return 130 if art.interrupted else 0
