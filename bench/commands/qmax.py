"""``bench qmax``: closed-loop concurrency ladder -> qmax artifact (Q_max, service time, curve). Parses
(bench/cli/parsers/qmax.py), calls :func:`bench.operations.qmax.measure_qmax`, renders
(:mod:`bench.report.terminal`) and writes."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.aws.receipts import leave_receipt
from bench.load.targets import SageMakerTarget, Target
from bench.operations.qmax import ladder_estimate, measure_qmax
from bench.report.plots import plot_qmax
from bench.report.publish import publish
from bench.report.terminal import no_qmax_message, render_qmax
from speech.schema.artifacts import qmax_filename


def run(args: argparse.Namespace, session: Any = None, load_target: Target | None = None,
        sleep: Callable[[float], None] = time.sleep) -> int:
    """``load_target``: where the ladder's requests go when not to the endpoint itself (tests send
    them to a real local server while the AWS control plane is moto, which cannot stream)."""
    schedule, est = ladder_estimate(args)
    if args.dry_run:
        target_desc = args.url or (f"sagemaker:{args.endpoint}" if args.endpoint else "(no target given)")
        print(f"qmax dry run against {target_desc}, SLO p95 TTFAB {args.slo_ms:g} ms")
        print(f"schedule: {', '.join(map(str, schedule))} then bisection to "
              f"{'one step' if args.tolerance == 0 else f'{args.tolerance:.0%}'}")
        print(f"per level: settle {args.settle_s:g} s + measure {args.measure_s:g} s"
              + (f" + up to {args.cloudwatch_wait_s:g} s waiting for CloudWatch" if args.endpoint else ""))
        if args.endpoint:
            print("SageMaker: pins the endpoint to exactly one InService instance for the run, restores it after")
        print(f"estimate: {est.levels_min} to {est.levels_max} levels, {_fmt_s(est.seconds_min)} to {_fmt_s(est.seconds_max)}"
              " (plus drain time per level)")
        print("no requests sent, no AWS calls made")
        return 0

    artifact, target = measure_qmax(args, session, load_target, sleep)
    publish(args, artifact, qmax_filename(artifact), render_qmax, plot_qmax)
    rc = leave_receipt(args, target.session if isinstance(target, SageMakerTarget) else None, artifact)
    if artifact.q_max < 1:
        # A ladder where nothing met the SLO is a failed run, not a result: the artifact stays as
        # the evidence (bench plan stops on it), the exit code says so.
        if not args.json:
            print(no_qmax_message(artifact), file=sys.stderr)
        return 1
    return rc


def _fmt_s(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.0f} s"
