"""``bench ttotal``: how long a real scale-out takes, phase by phase -> ttotal artifact. Parses
(bench/cli/parsers/ttotal.py), calls :func:`bench.operations.ttotal.measure_ttotal`, renders
(:mod:`bench.report.terminal`) and writes."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench.aws.receipts import leave_receipt
from bench.load.targets import SageMakerTarget, Target
from bench.operations.ttotal import measure_ttotal
from bench.report.plots import plot_ttotal
from bench.report.publish import publish
from bench.report.terminal import render_ttotal
from speech.schema.artifacts import ttotal_filename


def run(args: argparse.Namespace, session: Any = None, clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep, probe_target: Target | None = None) -> int:
    """The artifact of the measured phases: published, with a receipt for a SageMaker target."""
    artifact, target = measure_ttotal(args, session, clock, sleep, probe_target)
    publish(args, artifact, ttotal_filename(artifact), render_ttotal, plot_ttotal)
    return leave_receipt(args, target.session if isinstance(target, SageMakerTarget) else None, artifact)
