"""``bench qmax``'s ladder, the one function the command calls (:func:`measure_qmax`): the target
checked, the instance (SageMaker), copy or pod pinned to one for the run and restored after it,
concurrency 1 first and the levels in the ladder's order (bench.load.ladder.search: the schedule,
then bisection between the last level that met the SLO and the first that failed), CloudWatch's
reading per level, the count checked at the end, and the qmax artifact built. Progress goes to
stderr; the command renders and writes."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np

from bench import target_region, tool_version
from bench.aws import client as aws
from bench.aws.freeze import Freeze
from bench.cli.options import check_timing
from bench.cli.progress import RunProgress
from bench.errors import BenchError, UsageError
from bench.k8s.commands import pod_fingerprint
from bench.k8s.options import k8s_target
from bench.k8s.pause import Pause, ready_replicas
from bench.load.ladder import Estimate, estimate, geometric_levels, parse_levels, request_mix, search
from bench.load.loadgen import LevelResult, Session
from bench.load.targets import SageMakerTarget, Target, make_target
from speech.schema.artifacts import ClientOverhead, LadderLevel, Provenance, QmaxArtifact, ServiceTime, Slo


def schedule_of(args: argparse.Namespace) -> list[int]:
    if args.levels:
        return parse_levels(args.levels)
    return geometric_levels(args.start, args.factor, args.max_concurrency)


def check_args(args: argparse.Namespace) -> list[int]:
    check_timing(args)
    if not 0 <= args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance:g}: must be in [0, 1)")
    for flag in ("cloudwatch_wait_s", "poll_s", "pin_timeout_s"):
        if getattr(args, flag) < 0 or (flag == "poll_s" and args.poll_s == 0):
            raise UsageError(f"--{flag.replace('_', '-')} {getattr(args, flag):g}: must be "
                             f"{'> 0' if flag == 'poll_s' else '>= 0'} seconds")
    return with_level_one(schedule_of(args))


def with_level_one(schedule: list[int]) -> list[int]:
    """Concurrency 1 first: the uncontended service time every plan needs (W_max, the TTFAB alarm)."""
    return schedule if schedule[0] == 1 else [1, *schedule]


class _Display:
    """Progress on stderr (bench.cli.progress): on a terminal a bar with the level, phase, live p95 and
    the ETA of the worst-case schedule, each finished level's row above it; piped, plain lines that
    never wrap; nothing under -q or --json."""

    def __init__(self, enabled: bool, worst_s: float, slo_ms: float) -> None:
        self.slo_ms = slo_ms
        self.done_s = 0.0
        self.bar = RunProgress("qmax", total=worst_s, enabled=enabled, unit="s of the longest schedule", every_s=10.0)
        self.progress = self.bar if self.bar.enabled else None

    def update(self, p) -> None:
        p95 = f"{p.live_p95_ms:.0f} ms" if p.live_p95_ms is not None else "-"
        self.bar.update(self.done_s + p.elapsed_s,
                        f"level {p.concurrency:>4} {p.phase:<7} p95 {p95:>8} (SLO {self.slo_ms:g}) done {p.done}")

    def note(self, text: str) -> None:
        self.bar.update(text=text)

    def level_done(self, seconds: float, line: str) -> None:
        self.done_s += seconds
        self.bar.line(line)

    def stop(self) -> None:
        self.bar.close()


def level_line(r: LevelResult, slo_ms: float) -> str:
    mark = "ok " if r.meets(slo_ms) else "FAIL"
    return (f"  c={r.concurrency:<4} p50 {r.pct(50):8.1f}  p95 {r.pct(95):8.1f}  p99 {r.pct(99):8.1f} ms  "
            f"{r.ok / r.measure_s:7.2f} rps  in-flight {r.inflight_mean:6.2f}  rejected {r.rejected} errors {r.errors}  {mark}")


def cloudwatch_ratio(levels: list[LadderLevel]) -> tuple[float, str]:
    """Mean of CloudWatch Maximum / client mean in-flight over the levels CloudWatch covered."""

    ratios = [
        lv.cloudwatch_concurrency_max / lv.client_concurrency_mean
        for lv in levels
        if lv.cloudwatch_concurrency_max is not None and lv.client_concurrency_mean > 0
    ]
    return (round(float(np.mean(ratios)), 4), "measured") if ratios else (1.0, "assumed")


def ladder_estimate(args: argparse.Namespace) -> tuple[list[int], Estimate]:
    """The checked schedule (concurrency 1 first) and how many levels and seconds it can take
    (the wait for CloudWatch per level included for an endpoint)."""
    schedule = check_args(args)
    per_level = args.settle_s + args.measure_s
    return schedule, estimate(schedule, per_level + (args.cloudwatch_wait_s if args.endpoint else 0.0), args.tolerance)


def measure_qmax(args: argparse.Namespace, session: Any = None, load_target: Target | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[QmaxArtifact, Target]:
    """Run the ladder for the parsed flags of ``bench qmax``; the artifact (not yet written) and the
    target it measured. ``load_target``: where the ladder's requests go when not to the endpoint
    itself (tests send them to a real local server while the AWS control plane is moto, which
    cannot stream)."""
    schedule, est = ladder_estimate(args)
    per_level = args.settle_s + args.measure_s
    target = make_target(args, session=session or (aws.session(args.region) if args.endpoint and not getattr(args, "url", None) else None))
    target.check()
    fingerprint = target.fingerprint(args.instance_type, args.image_digest)
    k8s = k8s_target(args)
    if k8s is not None:
        if not args.url:
            raise UsageError("--kubernetes measures through --url (kubectl port-forward, or the Service's address)")
        cluster, fingerprint = pod_fingerprint(args, k8s)
    texts, mix = request_mix(args.mix)
    results: dict[int, LevelResult] = {}
    display = _Display(not (args.json or getattr(args, "quiet", False)), est.seconds_max, args.slo_ms)
    sm = isinstance(target, SageMakerTarget)
    sage = cast(SageMakerTarget, target)  # read only where sm (an endpoint's target)
    component = sm and bool(sage.inference_component)
    if args.receipt_bucket and not sm:
        raise UsageError("--receipt-bucket: a local run takes no receipt (only SageMaker measurements deploy)")

    log = (lambda m: None) if args.json or getattr(args, "quiet", False) else (lambda m: print(m, file=sys.stderr))

    def measure(c: int):
        wall0, perf0 = time.time(), time.perf_counter()
        r = lsession.level(c, args.settle_s, args.measure_s, texts, display.update)
        results[c] = r
        cw = None
        line = level_line(r, args.slo_ms)
        if sm and not component:
            to_dt = lambda t: datetime.fromtimestamp(wall0 + (t - perf0), tz=UTC)  # noqa: E731
            reading = aws.wait_concurrency_max(
                sage.session, args.endpoint, to_dt(r.window[0]), to_dt(r.window[1]),
                wait_s=args.cloudwatch_wait_s, poll_s=args.poll_s, sleep=sleep,
                progress=lambda m: display.note(f"level {c:>4} {m}") if display.progress else log(m),
            )
            cw = reading.maximum
            line += (f"  CloudWatch max {cw:g} ({reading.datapoints} datapoints{'' if reading.covered else ', partial'})"
                     if cw is not None else f"  CloudWatch: no datapoint within {args.cloudwatch_wait_s:g} s")
        display.level_done(per_level, line)
        return r.to_level(args.slo_ms, cw)

    started = datetime.now(UTC)
    with ExitStack() as stack:
        if sm and not component:
            stack.enter_context(Freeze(sage.session, args.endpoint, args.state_dir, tool="bench qmax",
                                       log=log, instances=1, timeout_s=args.pin_timeout_s, poll_s=args.poll_s,
                                       sleep=sleep))
        elif k8s is not None:
            stack.enter_context(Pause(cluster, k8s, 1, tool="bench qmax", state_dir=args.state_dir, log=log,
                                      timeout_s=args.pin_timeout_s, poll_s=args.poll_s, sleep=sleep))
        lsession = Session(load_target or target)
        stack.callback(lsession.close)
        stack.callback(display.stop)
        result = search(schedule, measure, args.tolerance, refine=not args.no_refine)
        if component:
            assert sage.inference_component is not None  # component: an endpoint target naming one (above)
            # Copy scaling is the user's to pin; a copy added mid-ladder would halve what each one saw.
            current, desired = aws.copy_counts(aws.describe_inference_component(sage.session, sage.inference_component))
            if current != 1:
                raise BenchError(
                    f"inference component {sage.inference_component} ran {current} copies by the end of the ladder "
                    f"(desired {desired}), not 1: the ladder did not measure one copy; nothing written"
                )
        elif sm:
            # Scaling was suspended, but a person or another tool may have changed the count.
            current, desired = aws.variant_counts(aws.describe_endpoint(sage.session, args.endpoint))
            if current != 1:
                raise BenchError(
                    f"{args.endpoint} ran {current} instance(s) by the end of the ladder (desired {desired}), not 1: "
                    "the ladder did not measure one instance; nothing written"
                )
        elif k8s is not None:
            total, ready = ready_replicas(cluster, k8s)
            if total != 1:
                raise BenchError(f"{k8s.provenance} ran {total} pod(s) ({ready} ready) by the end of the ladder, not 1: the "
                                 "ladder did not measure one pod; nothing written")

    uncontended = results[1]
    if uncontended.ttfab_ms.size == 0:
        errs = {o.error for o in uncontended.outcomes if o.error}
        raise BenchError(
            f"no request succeeded at concurrency 1 (errors: {', '.join(sorted(errs)) or 'none completed'}); "
            "check the server's logs; nothing written"
        )
    ratio, source = cloudwatch_ratio(result.levels) if sm and not component else (1.0, "assumed" if component else "not_applicable")
    artifact = QmaxArtifact(
        model=args.model,
        transport=target.transport,
        fingerprint=fingerprint,
        slo=Slo(ttfab_p95_ms=args.slo_ms),
        ladder=result.levels,
        q_max=result.q_max,
        bracketed=result.bracketed,
        first_failing_concurrency=result.first_failing,
        service_time=ServiceTime(
            mean_ms=round(max(float(np.mean(uncontended.ttfab_ms)), 1e-3), 3),
            p95_ms=round(max(uncontended.pct(95), 1e-3), 3),
        ),
        instances=1,
        cloudwatch_ratio=ratio,
        cloudwatch_ratio_source=source,
        request_mix=mix,
        client_overhead=ClientOverhead(
            loop_lag_p99_ms=round(max(r.loop_lag_p99_ms for r in results.values()), 3),
            cpu_fraction=round(max(r.cpu_fraction for r in results.values()), 4),
        ),
        provenance=Provenance(
            origin="measured",
            source=(f"one copy of inference component {sage.inference_component}: " if component else "")
            + f"bench qmax, {len(result.levels)} levels, settle {args.settle_s:g} s + measure {args.measure_s:g} s"
            f" each, measured in order {result.order}",
            measured_at=started,
            tool="bench qmax",
            target=k8s.provenance if k8s is not None else target.name,
            tool_version=tool_version(),
            region=target_region(target),
            ended_at=datetime.now(UTC),
        ),
    )
    return artifact, target
