"""``bench qmax``: closed-loop concurrency ladder -> qmax artifact (Q_max, service time, curve)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from bench.load.loadgen import LevelResult
    from bench.load.targets import Target
    from speech.schema.artifacts import LadderLevel, QmaxArtifact


from bench import target_region, tool_version
from bench.errors import BenchError, UsageError

DESCRIPTION = """\
Find Q_max: the highest number of requests held in flight on one instance whose p95
time-to-first-audio-byte (TTFAB, queueing included) stays within the SLO.

Closed loop: exactly N requests outstanding, a new one starts when one finishes. Each level
settles (--settle-s, discarded) then measures (--measure-s). The ladder climbs the schedule
(--levels, or --start x --factor up to --max-concurrency) until a level breaks the SLO, then
bisects on integer concurrency between the last passing and first failing level, so Q_max is
bracketed to one step. Concurrency 1 is always measured (added first when the schedule starts
higher): it is the uncontended service time.

On SageMaker the ladder measures ONE instance: the scalable target is pinned to min = max =
desired = 1 with all scaling suspended, the run waits until exactly one instance is InService
(and refuses, restoring everything, when the endpoint cannot get there: quota, capacity, a
failed update), and the desired count and scaling are restored on every exit (see `bench thaw`).
After each level it polls CloudWatch until ConcurrentRequestsPerModel covers the level's window
(at most --cloudwatch-wait-s) and records the CloudWatch Maximum beside the client's mean
in-flight; their ratio converts the plan's thresholds into CloudWatch units
(cloudwatch_ratio_source: measured, or assumed when no datapoint ever arrived; not_applicable
for --url).

  python -m bench qmax --url http://127.0.0.1:8080 --slo-ms 3000
  python -m bench qmax --endpoint prod-kokoro-82m --slo-ms 3000 --plot
  python -m bench qmax --url URL --slo-ms 500 --dry-run

Writes qmax-<model>-<transport>-<slug>.json into --out. Exit 0 written, 1 Q_max 0 (no level
met the SLO: a failed run; the artifact is written as the evidence, and the lowest level's
figures and what to change go to stderr), 2 bad input (nothing written, nothing left frozen),
130 interrupted.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bench.cli.options import add_target_arguments

    add_target_arguments(p)
    p.add_argument("--slo-ms", type=float, default=3000.0, metavar="MS", help="p95 TTFAB SLO in ms (default 3000)")
    p.add_argument("--levels", metavar="N,N,...", help="explicit increasing schedule, e.g. 1,2,4,8,16")
    p.add_argument("--start", type=int, default=1, metavar="N", help="first level of the geometric schedule (default 1)")
    p.add_argument("--factor", type=float, default=2.0, metavar="X", help="growth of the geometric schedule (default 2)")
    p.add_argument("--max-concurrency", type=int, default=256, metavar="N", help="top of the geometric schedule (default 256)")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="F",
                   help="stop refining when the bracket is within F x Q_max (default 0: one step)")
    p.add_argument("--no-refine", action="store_true", help="measure the schedule only, no bisection")
    p.add_argument("--settle-s", type=float, default=20.0, metavar="S", help="per level, discarded (default 20)")
    p.add_argument("--measure-s", type=float, default=60.0, metavar="S", help="per level, measured (default 60)")
    p.add_argument("--mix", default="mixed", choices=["short", "mixed", "long"], help="request texts (default mixed)")
    p.add_argument("--instance-type", metavar="TYPE", help="override the fingerprint's instance type")
    p.add_argument("--image-digest", metavar="sha256:...", help="override the fingerprint's image digest")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="artifact directory (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the artifact as JSON (no progress bar)")
    p.add_argument("--plot", action="store_true", help="also write a PNG of p95 TTFAB vs concurrency")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and a wall-clock estimate; no calls at all")
    g = p.add_argument_group("SageMaker")
    g.add_argument("--cloudwatch-wait-s", type=float, default=180.0, metavar="S",
                   help="per level, wait at most this long for ConcurrentRequestsPerModel to cover the level "
                        "(CloudWatch publishes with a delay; default 180)")
    g.add_argument("--poll-s", type=float, default=10.0, metavar="S", help="AWS polling interval (default 10)")
    g.add_argument("--inference-component", metavar="NAME",
                   help="components endpoint: measure ONE copy of this inference component (invocations name it: "
                        "InferenceComponentName). It must run exactly one copy (copy scaling pinned to 1 by you); the run "
                        "checks that before and after the ladder and leaves the instance count alone. CloudWatch's "
                        "per-model concurrency is not read for it (cloudwatch_ratio assumed 1)")
    g.add_argument("--pin-timeout-s", type=float, default=1800.0, metavar="S",
                   help="give up when the endpoint is not at exactly one InService instance after this long (default 1800)")
    from bench.k8s.options import add_kubernetes_arguments

    add_kubernetes_arguments(p, "with --url (a port-forward or Service address reaching the Deployment's pods): pause this "
                                "Deployment's autoscaler at exactly one ready pod for the ladder and restore it on every way "
                                "out; the fingerprint is the Deployment's image digest and --instance-type")


def schedule_of(args: argparse.Namespace) -> list[int]:
    from bench.load.ladder import geometric_levels, parse_levels

    if args.levels:
        return parse_levels(args.levels)
    return geometric_levels(args.start, args.factor, args.max_concurrency)


def check_args(args: argparse.Namespace) -> list[int]:
    from bench.cli.options import check_timing

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


def _fmt_s(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.0f} s"


class _Display:
    """Progress on stderr (bench.cli.progress): on a terminal a bar with the level, phase, live p95 and
    the ETA of the worst-case schedule, each finished level's row above it; piped, plain lines that
    never wrap; nothing under -q or --json."""

    def __init__(self, enabled: bool, worst_s: float, slo_ms: float) -> None:
        from bench.cli.progress import RunProgress

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


def render(a: QmaxArtifact) -> str:
    rows = ["concurrency  completed  ok  p50 ms  p95 ms  p99 ms  rps  in-flight  cw max  meets"]
    for lv in a.ladder:
        cw = f"{lv.cloudwatch_concurrency_max:g}" if lv.cloudwatch_concurrency_max is not None else "-"
        rows.append(
            f"{lv.concurrency:>11}  {lv.completed:>9}  {lv.ok:>2}  {lv.ttfab_p50_ms:6.1f}  {lv.ttfab_p95_ms:6.1f}  "
            f"{lv.ttfab_p99_ms:6.1f}  {lv.throughput_rps:.2f}  {lv.client_concurrency_mean:9.2f}  {cw:>6}  "
            f"{'yes' if lv.meets_slo else 'no'}"
        )
    bracket = f"bracketed ({a.first_failing_concurrency} fails)" if a.bracketed else "NOT bracketed (lower bound only)"
    rows.append(
        f"Q_max = {a.q_max}, {bracket}; service time mean {a.service_time.mean_ms:.1f} ms, p95 "
        f"{a.service_time.p95_ms:.1f} ms (concurrency 1); CloudWatch/client ratio {a.cloudwatch_ratio:g} "
        f"({a.cloudwatch_ratio_source.replace('_', ' ')}); {a.instances or '?'} instance(s)"
    )
    if a.client_overhead:
        rows.append(f"client overhead: event-loop lag p99 {a.client_overhead.loop_lag_p99_ms:.2f} ms, "
                    f"CPU {100 * (a.client_overhead.cpu_fraction or 0):.0f}% of one core")
    return "\n".join(rows)


def cloudwatch_ratio(levels: list[LadderLevel]) -> tuple[float, str]:
    """Mean of CloudWatch Maximum / client mean in-flight over the levels CloudWatch covered."""
    import numpy as np

    ratios = [
        lv.cloudwatch_concurrency_max / lv.client_concurrency_mean
        for lv in levels
        if lv.cloudwatch_concurrency_max is not None and lv.client_concurrency_mean > 0
    ]
    return (round(float(np.mean(ratios)), 4), "measured") if ratios else (1.0, "assumed")


def run(args: argparse.Namespace, session: Any = None, load_target: Target | None = None,
        sleep: Callable[[float], None] = time.sleep) -> int:
    """``load_target``: where the ladder's requests go when not to the endpoint itself (tests send
    them to a real local server while the AWS control plane is moto, which cannot stream)."""
    import numpy as np

    from bench.aws import client as aws
    from bench.aws.receipts import leave_receipt
    from bench.load.ladder import estimate, request_mix, search
    from bench.load.loadgen import Session
    from bench.load.targets import SageMakerTarget, make_target
    from speech.schema.artifacts import ClientOverhead, Provenance, QmaxArtifact, ServiceTime, Slo, qmax_filename

    schedule = check_args(args)
    per_level = args.settle_s + args.measure_s
    est = estimate(schedule, per_level + (args.cloudwatch_wait_s if args.endpoint else 0.0), args.tolerance)
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

    target = make_target(args, session=session or (aws.session(args.region) if args.endpoint and not getattr(args, "url", None) else None))
    target.check()
    fingerprint = target.fingerprint(args.instance_type, args.image_digest)
    from bench.k8s.options import k8s_target

    k8s = k8s_target(args)
    if k8s is not None:
        if not args.url:
            raise UsageError("--kubernetes measures through --url (kubectl port-forward, or the Service's address)")
        from bench.k8s.commands import pod_fingerprint

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
            from bench.aws.freeze import Freeze

            stack.enter_context(Freeze(sage.session, args.endpoint, args.state_dir, tool="bench qmax",
                                       log=log, instances=1, timeout_s=args.pin_timeout_s, poll_s=args.poll_s,
                                       sleep=sleep))
        elif k8s is not None:
            from bench.k8s.pause import Pause

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
            from bench.k8s.pause import ready_replicas

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
    from bench.report.plots import plot_qmax
    from bench.report.publish import publish

    publish(args, artifact, qmax_filename(artifact), render, plot_qmax)
    rc = leave_receipt(args, target.session if isinstance(target, SageMakerTarget) else None, artifact)
    if artifact.q_max < 1:
        # A ladder where nothing met the SLO is a failed run, not a result: the artifact stays as
        # the evidence (bench plan stops on it), the exit code says so.
        if not args.json:
            print(no_qmax_message(artifact), file=sys.stderr)
        return 1
    return rc


def no_qmax_message(a: QmaxArtifact) -> str:
    """Why Q_max is 0, with the lowest level's figures, and what to change."""
    from bench.report.plots import why_level_failed

    lv = a.ladder[0]
    slo = a.slo.ttfab_p95_ms
    fix = (f"an SLO above the uncontended p95 (--slo-ms {max(slo, lv.ttfab_p95_ms) * 1.25:.0f} or more), or a faster "
           "instance or image" if lv.ttfab_p95_ms > slo else
           "the server's capacity: it refused or failed requests at one in flight (check its logs and queue depth)")
    return (f"FAILED: Q_max = 0: no level met the SLO {slo:g} ms. The lowest level, concurrency {lv.concurrency}: "
            f"p50 {lv.ttfab_p50_ms:.1f} ms, p95 {lv.ttfab_p95_ms:.1f} ms, {lv.ok} ok of {lv.completed}, "
            f"{lv.rejected} rejected, {lv.errors} errors ({why_level_failed(lv, slo)}). "
            f"Change {fix}, then re-run bench qmax.")


