"""``bench demo``: the whole chain on this machine, on real parts, in a few minutes. Parses
(bench/cli/parsers/demo.py), calls :func:`bench.operations.demo.demo`, renders
(:mod:`bench.report.demo`).

The chain's measuring and planning steps are the commands a user types: the chain yields each
command line and this command runs it through the entry point (``speech-bench``), so the chain
never calls back up into the commands."""

from __future__ import annotations

import argparse
from typing import TypeVar

from bench.cli.main import main
from bench.operations.demo import Chain, Say, demo
from bench.report.demo import render_demo

T = TypeVar("T")


def drive(chain: Chain[T]) -> T:
    """Run ``chain`` to its end: print each line it says as ``[step] text``, run each command line it
    yields through the entry point and send back the exit code; return what it returns. Closed on
    every exit path, so an interrupted chain stops its container."""
    reply: int | None = None
    try:
        while True:
            try:
                event = chain.send(reply)
            except StopIteration as done:
                return done.value
            if isinstance(event, Say):
                print(f"[{event.step}] {event.text}", flush=True)
                reply = None
            else:
                reply = main(event.argv)
    finally:
        chain.close()


def run(args: argparse.Namespace) -> int:
    summary = drive(demo(args))
    print()
    print(render_demo(summary))
    return 0
