"""``bench tcopy``: how long a new model copy takes to serve on a running instance, and what it holds.
Parses (bench/cli/parsers/tcopy.py), calls :func:`bench.operations.tcopy.measure_tcopy`, renders
(:mod:`bench.report.terminal`) and writes."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench.operations.tcopy import measure_tcopy
from bench.report.publish import publish
from bench.report.terminal import render_copy
from speech.schema.artifacts import copy_filename


def run(args: argparse.Namespace, session: Any = None, clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep) -> int:
    artifact = measure_tcopy(args, session, clock, sleep)
    publish(args, artifact, copy_filename(artifact), render_copy, lambda a, p: p)
    return 0
