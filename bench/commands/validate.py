"""``bench validate``: the deployed policy equals the plan, and (--live) the endpoint keeps its promise."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from bench.aws import client as aws
    from bench.aws.scaling_check import Issue
    from bench.load.loadgen import LevelResult
    from bench.load.locust_engine import LocustLevels
    from speech.schema.plan_artifacts import PlanArtifact

from bench.errors import UsageError
from bench.load.locust_engine import add_engine_arguments

DESCRIPTION = """\
Check a deployed endpoint against a plan artifact (bench plan): the scalable target's min/max,
the scale-out target value and cooldown, the scale-in step policy and cooldown, the surge step
size (speech.deploy.scaling.surge_adjustment), both alarms (threshold, comparison, statistic, period,
evaluation periods), and that nothing is frozen or orphaned.

The deployed thresholds are in CloudWatch units (ConcurrentRequestsPerModel = client in-flight x
the plan's CloudWatch/client ratio); the messages give both.

With --live also load it (closed loop, scaling frozen for the check and restored after):
  1. at 0.8 x C_scale_max per instance: p95 TTFAB must stay within the SLO, and (SageMaker)
     CloudWatch must read ConcurrentRequestsPerModel at the plan's ratio, so the deployed target
     value really sits at C_scale_max (polled until CloudWatch covers the window,
     --cloudwatch-wait-s);
  2. just past Q_max per instance: the admission gate must reject (503 queue_saturated) and the
     admitted requests must stay within the SLO.
--url runs only the live checks against a local container (no policy to compare).

On SageMaker scaling is restored on every way out (an AWS error that outlasts the retries,
Ctrl-C, SIGTERM) and stderr says so; if AWS refuses the restore, the error names the exact
`bench thaw` command. An endpoint that leaves service during the load (Failed, OutOfService)
stops the checks with an `endpoint` issue (exit 1) naming the way back.

  python -m bench validate --plan artifacts/plan-kokoro-82m.json --endpoint dev-kokoro-82m
  python -m bench validate --plan plan.json --url http://127.0.0.1:8080 --live --measure-s 20

--engine locust runs each level on Locust processes (--workers N local ones, or --master-bind
HOST:PORT --expect-workers N remote ones), for levels one process cannot keep in flight.

Exit 0 pass, 1 fail, 2 bad input or an AWS error, 130 interrupted (scaling restored).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path, metavar="FILE", help="plan artifact (bench plan)")
    p.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint to check")
    p.add_argument("--url", metavar="URL", help="local container for --live checks only")
    p.add_argument("--transport", choices=["stream", "bidirectional"], default="stream", help="for --live (default stream)")
    p.add_argument("--live", action="store_true", help="also run the two load checks")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="SLO for --live (default: the plan's)")
    p.add_argument("--settle-s", type=float, default=10.0, metavar="S", help="per live check, discarded (default 10)")
    p.add_argument("--measure-s", type=float, default=30.0, metavar="S", help="per live check, measured (default 30)")
    p.add_argument("--mix", default="mixed", choices=["short", "mixed", "long"], help="request texts (default mixed)")
    p.add_argument("--region", metavar="REGION",
                   help="AWS region (default: --stack's aws:region, else the environment's)")
    p.add_argument("--stack", metavar="NAME", help="stack whose aws:region the endpoint is in (reads Pulumi.NAME.yaml)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml lives (default .)")
    p.add_argument("--state-dir", type=Path, default=None, metavar="DIR", help="freeze state directory (see bench thaw)")
    p.add_argument("--json", action="store_true", help="print {ok, issues, live} as JSON")
    p.add_argument("--cloudwatch-wait-s", type=float, default=180.0, metavar="S",
                   help="--live on SageMaker: wait at most this long for ConcurrentRequestsPerModel (default 180)")
    p.add_argument("--poll-s", type=float, default=10.0, metavar="S", help="AWS polling interval (default 10)")
    add_engine_arguments(p, files=False)


RATIO_TOLERANCE = 0.2
"""The observed CloudWatch/client ratio may differ from the plan's by this fraction."""


def cloudwatch_units_issue(plan: PlanArtifact, inflight_per_instance: float, cloudwatch_max: float) -> Issue | None:
    """The scale-out target is deployed in CloudWatch units: it acts when ConcurrentRequestsPerModel
    reaches scaling_target_value, i.e. at scaling_target_value / observed ratio client requests in
    flight per instance. An issue when that is not C_scale_max (the ratio is off by more than
    RATIO_TOLERANCE)."""
    from bench.aws.scaling_check import Issue

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
    from bench.aws import client as aws
    from bench.aws.scaling_check import Issue

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
    from bench.aws.scaling_check import Issue
    from bench.load.ladder import request_mix
    from bench.load.loadgen import Session

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
    from bench.cli.progress import RunProgress, wanted

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


def run(args: argparse.Namespace, session=None, load_target=None, sleep: Callable[[float], None] = time.sleep) -> int:
    """``load_target``: where --live sends its requests instead of the endpoint (tests: a real local
    server while moto plays the control plane and CloudWatch)."""
    from bench.aws import client as aws
    from bench.aws.scaling_check import Issue, compare
    from bench.cli.options import check_timing
    from bench.load.locust_engine import LocustLevels, engine_options, locust_target
    from bench.load.targets import SageMakerTarget, make_target
    from speech.files import load_artifact
    from speech.schema.plan_artifacts import PlanArtifact

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
        from speech.stack.read import command_region

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
                from bench.aws.freeze import Freeze

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
    ok = not issues
    if args.json:
        print(json.dumps({"ok": ok, "issues": [i.as_dict() for i in issues], "live": live_rows}, indent=2))
    else:
        for i in issues:
            print(f"[{i.kind}] {i.message}")
        for row in live_rows:
            cw = (f", CloudWatch max {row['cloudwatch_max']:g} at {row['client_inflight_per_instance']:g} in flight per "
                  f"instance" if row.get("cloudwatch_max") is not None else f", {row['cloudwatch']}" if "cloudwatch" in row else "")
            print(f"live {row['check']}: concurrency {row['concurrency']}, p95 {row['p95_ms']:.1f} ms, "
                  f"rejected {row['rejected']}, errors {row['errors']}{cw}")
        print("validate: pass" if ok else f"validate: FAIL ({len(issues)} issue(s))")
    from bench.report.runs import validate_report

    args._report = validate_report(ok, issues, live_rows, args.endpoint or args.url)
    return 0 if ok else 1
