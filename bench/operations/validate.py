"""``bench validate``'s checks, the one function the command calls (:func:`validate_deployment`): the
deployed policy equals the plan (read-only), and with --live the endpoint keeps its promise (a
level at C_scale_max within the SLO, CloudWatch's units as the plan's, under a freeze)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from bench.aws import client as aws
from bench.aws.freeze import Freeze
from bench.aws.scaling_check import Issue, compare
from bench.cli.options import check_timing
from bench.cli.progress import RunProgress, wanted
from bench.errors import UsageError
from bench.load.ladder import request_mix
from bench.load.loadgen import LevelResult, Session
from bench.load.locust_engine import LocustLevels, engine_options, locust_target
from bench.load.targets import SageMakerTarget, make_target
from speech.files import load_artifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.stack.read import command_region

RATIO_TOLERANCE = 0.2
"""The observed CloudWatch/client ratio may differ from the plan's by this fraction."""


def cloudwatch_units_issue(plan: PlanArtifact, inflight_per_instance: float, cloudwatch_max: float) -> Issue | None:
    """The scale-out target is deployed in CloudWatch units: it acts when ConcurrentRequestsPerModel
    reaches scaling_target_value, i.e. at scaling_target_value / observed ratio client requests in
    flight per instance. An issue when that is not C_scale_max (the ratio is off by more than
    RATIO_TOLERANCE)."""

    t = plan.thresholds
    if t.c_scale_max <= 0 or inflight_per_instance <= 0:
        return None
    planned = t.scaling_target_value / t.c_scale_max
    observed = cloudwatch_max / inflight_per_instance
    if abs(observed / planned - 1.0) <= RATIO_TOLERANCE:
        return None
    acts_at = t.scaling_target_value / observed if observed > 0 else float("inf")
    return Issue("cloudwatch_units", (
        f"at {inflight_per_instance:.2f} client requests in flight per instance CloudWatch read ConcurrentRequestsPerModel "
        f"(Maximum) {cloudwatch_max:g}: ratio {observed:.3f}, the plan's {planned:.3f}; the deployed TargetValue "
        f"{t.scaling_target_value:g} (CloudWatch units) acts at {acts_at:.1f} in flight per instance, not at C_scale_max "
        f"{t.c_scale_max:g}; fix: re-run bench qmax on this endpoint (it measures the ratio) and bench plan, then pulumi up"))


ENDPOINT_DOWN = ("Failed", "OutOfService", "UpdateRollbackFailed", "Deleting")
"""EndpointStatus values a live check cannot measure anything on."""


def endpoint_down_issue(sess, endpoint: str) -> Issue | None:
    """An issue when the endpoint left service during the live checks (DescribeEndpoint): its
    load figures then say nothing about the plan, so the checks stop there."""

    ep = aws.describe_endpoint(sess, endpoint)
    status = ep.get("EndpointStatus", "")
    if status not in ENDPOINT_DOWN:
        return None
    reason = ep.get("FailureReason")
    return Issue("endpoint", (
        f"endpoint {endpoint} went {status} during the live checks{f' ({reason})' if reason else ''}; the load "
        f"figures say nothing about the plan and the remaining checks were not run; fix: the endpoint (its "
        f"FailureReason, CloudWatch logs /aws/sagemaker/Endpoints/{endpoint}), then pulumi up and re-run bench "
        "validate --live"))


def live_checks(args, plan: PlanArtifact, target, instances: int, where: str = "the endpoint",
                read_cloudwatch: Callable[[datetime, datetime], aws.CloudwatchReading] | None = None,
                still_serving: Callable[[], Issue | None] | None = None, levels: LocustLevels | None = None,
                ) -> tuple[list[Issue], list[dict]]:
    """The two load checks; ``still_serving`` (SageMaker) runs after each and, when it returns an
    issue (the endpoint left service), that issue replaces the level's and the checks stop.
    ``levels``: run each level on Locust (--engine locust) instead of the asyncio session."""

    slo = args.slo_ms if args.slo_ms is not None else plan.inputs.slo_ms
    texts, _ = request_mix(args.mix)
    c_ok = max(1, round(0.8 * plan.thresholds.c_scale_max * instances))
    c_gate = (plan.q_max + max(1, math.ceil(0.1 * plan.q_max))) * instances
    per = f" ({instances} instances)" if instances > 1 else ""
    remeasure = (f"fix: the plan ({plan.fingerprint.slug}, Q_max {plan.q_max}) overstates what {where} sustains: "
                 f"measure it (bench qmax, bench ttotal) and re-plan, or deploy the image and instance type it was "
                 f"measured on")
    issues: list[Issue] = []
    rows: list[dict] = []
    session = Session(target) if levels is None else levels

    level_s = args.settle_s + args.measure_s
    progress = RunProgress("validate --live", total=2 * level_s, enabled=wanted(args), unit="s", every_s=5.0)
    base = 0.0

    def show(p) -> None:
        p95 = f"{p.live_p95_ms:.0f} ms" if p.live_p95_ms is not None else "-"
        progress.update(base + p.elapsed_s, f"{p.concurrency} in flight, {p.phase}, p95 {p95}, done {p.done}")

    try:
        wall0, perf0 = time.time(), time.perf_counter()
        r: LevelResult = session.level(c_ok, args.settle_s, args.measure_s, texts, show)
        base = level_s
        rows.append({"check": "0.8 x C_scale_max", "concurrency": c_ok, "p95_ms": r.pct(95), "rejected": r.rejected, "errors": r.errors})
        if still_serving is not None and (down := still_serving()) is not None:
            return [down], rows
        if read_cloudwatch is not None:
            to_dt = lambda t: datetime.fromtimestamp(wall0 + (t - perf0), tz=UTC)  # noqa: E731
            reading = read_cloudwatch(to_dt(r.window[0]), to_dt(r.window[1]))
            per_instance = r.inflight_mean / instances
            rows[-1].update(cloudwatch_max=reading.maximum, client_inflight_per_instance=round(per_instance, 4))
            if reading.maximum is None:
                rows[-1]["cloudwatch"] = f"no datapoint within {reading.waited_s:g} s: target units not checked"
            elif (issue := cloudwatch_units_issue(plan, per_instance, reading.maximum)) is not None:
                issues.append(issue)
        if not r.meets(slo):
            issues.append(Issue("live", f"{where} at {c_ok} in flight{per} (0.8 x C_scale_max {plan.thresholds.c_scale_max:g}): "
                                        f"p95 TTFAB {r.pct(95):.0f} ms, {r.rejected} rejected, {r.errors} errors; expected "
                                        f"p95 within the SLO {slo:g} ms and nothing rejected; {remeasure}"))
        g: LevelResult = session.level(c_gate, args.settle_s, args.measure_s, texts, show)
        rows.append({"check": "past Q_max", "concurrency": c_gate, "p95_ms": g.pct(95), "rejected": g.rejected, "errors": g.errors})
        if still_serving is not None and (down := still_serving()) is not None:
            return [down], rows
        if g.rejected == 0:
            issues.append(Issue("live", f"{where} at {c_gate} in flight{per} (past Q_max {plan.q_max}) rejected nothing; "
                                        f"expected 503 queue_saturated beyond queue_max_depth {plan.queue_max_depth}; fix: "
                                        f"set QUEUE_MAX_DEPTH={plan.queue_max_depth} on the container (the program sets it "
                                        "from the plan: pulumi up)"))
        if g.ok == 0 or g.pct(95) > slo:
            issues.append(Issue("live", f"{where} at {c_gate} in flight{per} (past Q_max {plan.q_max}): admitted requests had "
                                        f"p95 TTFAB {g.pct(95):.0f} ms ({g.ok} admitted); expected within the SLO {slo:g} ms, "
                                        f"since the gate holds at most {plan.queue_max_depth} per instance; {remeasure}"))
    finally:
        progress.close()
        session.close()
    return issues, rows


def validate_deployment(args: argparse.Namespace, session=None, load_target=None,
                        sleep: Callable[[float], None] = time.sleep) -> tuple[list[Issue], list[dict]]:
    """The deployed policy against the plan (--endpoint) and, with --live, the live checks, for the
    parsed flags of ``bench validate``; the issues and the live checks' rows. ``load_target``: where
    --live sends its requests instead of the endpoint (tests: a real local server while moto plays
    the control plane and CloudWatch)."""

    plan = load_artifact(args.plan, PlanArtifact)
    if args.live:
        check_timing(argparse.Namespace(slo_ms=args.slo_ms if args.slo_ms is not None else plan.inputs.slo_ms,
                                        settle_s=args.settle_s, measure_s=args.measure_s))
    if not args.endpoint and not args.url:
        raise UsageError("pass --endpoint NAME (policy check, and --live) or --url URL with --live")
    if args.url and not args.live:
        raise UsageError("--url has no policy to compare: add --live, or use --endpoint")
    _, eopts = engine_options(args, None, getattr(args, "transport", "stream")) if args.live else ("local", None)
    issues: list[Issue] = []
    live_rows: list[dict] = []
    sess = None
    if args.endpoint:
        sess = session or aws.session(command_region(args.region, getattr(args, "stack", None),
                                                     getattr(args, "stack_dir", Path("."))))
        aws.describe_endpoint(sess, args.endpoint)
        issues += compare(plan, aws.read_deployed(sess, args.endpoint))
    if args.live:
        target = make_target(argparse.Namespace(url=args.url, endpoint=None if args.url else args.endpoint,
                                                transport=args.transport), session=sess)
        target.check()
        levels = LocustLevels(locust_target(load_target or target), eopts, args.mix) if eopts is not None else None
        with ExitStack() as stack:
            instances = 1
            reader = serving = None
            if isinstance(target, SageMakerTarget):
                stack.enter_context(Freeze(sess, args.endpoint, args.state_dir, tool="bench validate --live"))
                current, _ = aws.variant_counts(aws.describe_endpoint(sess, args.endpoint))
                instances = current or 1
                reader = lambda a, b: aws.wait_concurrency_max(  # noqa: E731
                    sess, args.endpoint, a, b, wait_s=args.cloudwatch_wait_s, poll_s=args.poll_s, sleep=sleep,
                    progress=(lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr)))
                serving = lambda: endpoint_down_issue(sess, args.endpoint)  # noqa: E731
            where = f"local server {args.url}" if args.url else f"endpoint {args.endpoint}"
            got, live_rows = live_checks(args, plan, load_target or target, instances, where, reader, serving, levels)
            issues += got
            if levels is not None:
                issues += [Issue("live", f"Locust worker lost during the live checks: {d}; the level's figures miss its "
                                         "requests; fix: re-run (and check the worker machine)") for d in levels.dead]
    return issues, live_rows
