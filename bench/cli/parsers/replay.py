"""``bench replay``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import add_target_arguments
from bench.load.ladder import MIXES
from bench.load.locust_engine import LOCAL_MAX_RPS, add_engine_arguments

DESCRIPTION = f"""\
Send a traffic trace to a real target open-loop: every request leaves at its own timestamp,
whether or not earlier ones have answered (a closed loop would slow down with the server and hide
its queue). Records per request when it was due, when it was sent, TTFAB and whether the gate
rejected it (503 queue_saturated / shed_deadline / draining).

  python -m bench replay --trace step:base=20,factor=3,at=30,duration=60 --url http://127.0.0.1:8080
  python -m bench replay --trace azure-conv:peak=40,speedup=60 --endpoint dev-kokoro-82m --duration 120
  python -m bench replay --trace steady:rps=3000,duration=60 --url http://127.0.0.1:8080 --engine locust --workers 4

Engines: `local` (one asyncio process) or `locust` (a Locust master and --workers worker processes,
or --master-bind HOST:PORT --expect-workers N for workers on other machines; each worker sends an
independent random thinning of the trace, the same artifact either way). `auto` (default) picks
local up to {LOCAL_MAX_RPS} requests/s at the trace's busiest second, Locust above it.

Traces are the same specs as `bench simulate` (see its --help). Writes replay-<trace>.json into
--out (with --csv / --html, Locust's files beside it). Exit 0 done, 2 bad input, 130 interrupted
(with --engine locust what was measured so far is written).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:

    add_target_arguments(p)
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic (same specs as bench simulate)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="replay only the first S seconds")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed for timestamps within each second (default 0)")
    p.add_argument("--mix", default="mixed", choices=sorted(MIXES), help="request texts (default mixed; a size column picks by size)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="also report the share answered within this SLO")
    p.add_argument("--out", type=Path, default=Path("out/replay"), metavar="DIR", help="artifact directory (default out/replay)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_engine_arguments(p, files=False)
