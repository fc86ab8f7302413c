"""``bench ttotal``: how long a real scale-out takes, phase by phase -> ttotal artifact."""

from __future__ import annotations

import argparse

# asyncio is imported where a load runs (about 0.1 s): --help does not pay for it.
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from bench.load.targets import Outcome, Target
    from speech.schema.artifacts import Phase, QmaxArtifact, TtotalArtifact


from bench import target_region, tool_version
from bench.errors import BenchError, TargetError, UsageError
from container.markers import STAGES, parse_at, parse_stage_line

DESCRIPTION = """\
Measure T_total: from the moment more capacity is asked for until traffic is served at the
ladder's latency again, phase by phase.

SageMaker (--endpoint): freezes scaling, forces desired + 1 (UpdateEndpointWeightsAndCapacities),
then timestamps instance_logging (the new log stream's first event), the container's stage
markers from that stream, in_service (DescribeEndpoint CurrentInstanceCount) and
traffic_recovered (a probe load whose rolling p95 is back at the ladder's own p95 for the
per-instance concurrency); then puts the desired count back and restores scaling.

Local (--url of a running container): starts a second server process on a free port with
--serve-cmd (default `python -m container serve`, --host/--port appended unless the command
contains {port}) and times its stage markers, first /ping 200 and first served request;
provisioning phases are recorded as not applicable.

The artifact holds what was measured. The report and plot also show the planning T_total as
`bench plan` computes it (speech.plan.formulas.planning_t_total: + metric period x datapoints to alarm +
scale-out cooldown, with the plan's default reaction policy; a stack that sets its own reaction
policy plans with that one), and name the phase that dominates and what shortens it.
The qmax artifact must come from the same fingerprint and transport (else exit 2, nothing written).

  python -m bench ttotal --qmax artifacts/qmax-....json --endpoint dev-kokoro-82m
  python -m bench ttotal --qmax artifacts/qmax-....json --url http://127.0.0.1:8080
  python -m bench ttotal --qmax artifacts/qmax-....json --kubernetes speech/dev-kokoro-82m --instance-type ml.g5.xlarge

Kubernetes (--kubernetes NAMESPACE/DEPLOYMENT, the kubeconfig's credentials): pauses the
autoscaler at the current count + 1 (the desired_set moment), then timestamps from the API the new
pod's creation, the node's creation and readiness when the cluster autoscaler had to add one, the
PodScheduled condition, the kubelet's Pulled event, the container's start, the Ready condition and
the first audio byte of one request through the API server's pod proxy; then restores the
autoscaler and the count (also on Ctrl-C and SIGTERM).

Exit 0 written, 1 the scale-out did not complete in --timeout-s, 2 bad input, 130 interrupted.
"""

ORDER = ("desired_set", "instance_logging", *STAGES, "in_service", "traffic_recovered")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bench.cli.options import add_target_arguments

    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact of the same fingerprint")
    add_target_arguments(p)
    p.add_argument("--serve-cmd", default=f"{sys.executable} -m container serve", metavar="CMD",
                   help="local mode: command starting a second server (default: python -m container serve)")
    p.add_argument("--probe-concurrency", type=int, default=None, metavar="N",
                   help="closed-loop probe load during the scale-out (default min(10, Q_max); 0 = no probe)")
    p.add_argument("--recover-window-s", type=float, default=60.0, metavar="S",
                   help="probe p95 must stay at the ladder's level this long to count as recovered (default 60)")
    p.add_argument("--poll-s", type=float, default=5.0, metavar="S", help="AWS polling interval (default 5)")
    p.add_argument("--timeout-s", type=float, default=1800.0, metavar="S", help="give up after (default 1800)")
    p.add_argument("--instance-type", metavar="TYPE", help="override the fingerprint's instance type")
    p.add_argument("--image-digest", metavar="sha256:...", help="override the fingerprint's image digest")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="artifact directory (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the artifact as JSON")
    p.add_argument("--plot", action="store_true", help="also write a phase waterfall PNG")
    from bench.k8s.options import add_kubernetes_arguments

    add_kubernetes_arguments(p, "time a scale-out of this Deployment on a cluster (its autoscaler paused and restored; no "
                                "--url/--endpoint): pod created, node added, scheduled, image pulled, started, ready, first "
                                "audio byte through the API server's pod proxy")
    p.add_argument("--pod-port", type=int, default=8080, metavar="PORT",
                   help="with --kubernetes: the container's port for the first request (default 8080)")


# --- pure helpers ------------------------------------------------------------------------------


def marker_phases(markers: list[dict], t0: datetime, source: str) -> list[Phase]:
    """Phases from stage markers; container_started is derived from the first marker's elapsed
    time (process start), which is earlier than any line it could print."""
    out: list[Phase] = []
    seen: set[str] = set()
    for m in markers:
        name = m["stage"]
        if name in seen:
            continue
        seen.add(name)
        at = parse_at(m["at"])
        if name == "container_started" or not out:
            start = datetime.fromtimestamp(at.timestamp() - m["elapsed_s"], tz=UTC)
            if "container_started" not in [p.name for p in out]:
                out.append(phase("container_started", start, t0, "derived: first marker's at - elapsed_s", True))
                seen.add("container_started")
            if name == "container_started":
                continue
        out.append(phase(name, at, t0, source, False))
    return out


def phase(name: str, at: datetime | None, t0: datetime, source: str, bounded: bool, applicable: bool = True) -> Phase:
    from speech.schema.artifacts import Phase

    if not applicable or at is None:
        return Phase(name=name, at=None, offset_s=None, source=source, bounded=bounded, applicable=False)
    off = (at - t0).total_seconds()
    # Clocks of two machines (or a marker rounded to ms) may put a phase a hair before t0.
    return Phase(name=name, at=at, offset_s=round(max(0.0, off), 3), source=source, bounded=bounded or off < 0)


def ordered(phases: list[Phase]) -> list[Phase]:
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(phases, key=lambda p: (p.offset_s if p.offset_s is not None else float("inf"), rank.get(p.name, 99)))


def t_total_line(a: TtotalArtifact) -> str:
    """measured + reaction = planning, computed by the plan's own function (default reaction policy)."""
    from speech.plan.formulas import planning_t_total
    from speech.schema.config import ReactionPolicy

    policy = ReactionPolicy()
    t = planning_t_total(a.measured_total_s, policy)
    return (f"measured {t.measured_s:.3f} s + reaction bound {t.reaction_bound_s:g} s (period {policy.metric_period_s} s x "
            f"{policy.datapoints_to_alarm} datapoints + scale-out cooldown) = planning {t.planning_s:.3f} s, as bench plan "
            "computes it with the default reaction policy")


def ladder_p95_at(q: QmaxArtifact, concurrency: float) -> float:
    import numpy as np

    xs = [lv.concurrency for lv in q.ladder]
    return float(np.interp(concurrency, xs, [lv.ttfab_p95_ms for lv in q.ladder]))


def recovered_at(
    samples: list[tuple[float, float]], threshold_ms: float, window_s: float, not_before: float, until: float
) -> float | None:
    """Start of the first window (>= not_before) of length window_s whose p95 TTFAB is within the
    threshold; samples are (wall time of first byte, TTFAB ms). None when no full window qualifies."""
    import numpy as np

    pts = sorted(s for s in samples if s[0] >= not_before)
    for i, (start, _) in enumerate(pts):
        if start + window_s > until:
            return None
        win = [ms for t, ms in pts[i:] if t <= start + window_s]
        if len(win) >= 5 and float(np.percentile(win, 95)) <= threshold_ms:
            return start
    return None


# --- probe load --------------------------------------------------------------------------------


@dataclass
class Probe:
    """Closed-loop load in a background thread, recording (wall time of first byte, TTFAB ms)."""

    target: Target
    concurrency: int
    texts: list[str]
    samples: list[tuple[float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        import asyncio

        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="probe", daemon=True)
        self._thread.start()

    async def _main(self) -> None:
        import asyncio

        await self.target.open(self.concurrency)
        wall0, perf0 = time.time(), time.perf_counter()

        async def worker(i: int) -> None:
            n = i
            while not self._stop.is_set():
                out: Outcome = await self.target.invoke(self.texts[n % len(self.texts)])
                n += 1
                if out.ok and out.ttfab_s is not None:
                    self.samples.append((wall0 + (out.start + out.ttfab_s - perf0), out.ttfab_s * 1000))
                else:  # refused or failed: back off instead of spinning on errors
                    await asyncio.sleep(0.05)

        try:
            await asyncio.gather(*(worker(i) for i in range(self.concurrency)))
        finally:
            await self.target.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=70)


# --- SageMaker ---------------------------------------------------------------------------------


def log_group(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def _stream_names(logs: Any, group: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    try:
        for page in logs.get_paginator("describe_log_streams").paginate(logGroupName=group):
            for s in page.get("logStreams", []):
                out[s["logStreamName"]] = s
    except logs.exceptions.ResourceNotFoundException:  # the group appears with the first instance's logs
        pass
    return out


def _stream_events(logs: Any, group: str, stream: str) -> list[dict]:
    pages = logs.get_paginator("filter_log_events").paginate(logGroupName=group, logStreamNames=[stream])
    return sorted((e for page in pages for e in page.get("events", [])), key=lambda e: e["timestamp"])


def run_sagemaker(
    sess: Any,
    endpoint: str,
    qmax: QmaxArtifact,
    *,
    probe: Probe | None,
    recover_window_s: float,
    poll_s: float,
    timeout_s: float,
    state_dir: Path | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> list[Phase]:
    from bench.aws import client as aws
    from bench.aws.freeze import Freeze

    sm = sess.client("sagemaker")
    logs = sess.client("logs")
    group = log_group(endpoint)
    before_streams = set(_stream_names(logs, group))
    current, desired = aws.variant_counts(aws.describe_endpoint(sess, endpoint))
    base = desired or current or 1
    new = base + 1
    with Freeze(sess, endpoint, state_dir, tool="bench ttotal", log=log) as frozen:
        if frozen.active:
            frozen.pin(new)
        if probe is not None:
            probe.start()
        try:
            t0_s = clock()
            sm.update_endpoint_weights_and_capacities(
                EndpointName=endpoint,
                DesiredWeightsAndCapacities=[{"VariantName": aws.VARIANT, "DesiredInstanceCount": new}],
            )
            t0 = datetime.fromtimestamp(t0_s, tz=UTC)
            log(f"{endpoint}: desired instance count {base} -> {new} at {t0:%H:%M:%S}")
            first_event: datetime | None = None
            markers: list[dict] = []
            new_stream: str | None = None
            in_service: datetime | None = None
            recovered: float | None = None
            threshold = ladder_p95_at(qmax, (probe.concurrency / new) if probe else 1) * 1.1 + 5.0
            while True:
                now = clock()
                if now - t0_s > timeout_s:
                    raise BenchError(
                        f"{endpoint}: scale-out to {new} not complete after {timeout_s:g} s (in_service "
                        f"{'yes' if in_service else 'no'}, new log stream {new_stream or 'none'}); nothing written"
                    )
                if new_stream is None:
                    fresh = sorted(
                        (s for name, s in _stream_names(logs, group).items() if name not in before_streams),
                        key=lambda s: s.get("firstEventTimestamp") or s.get("creationTime") or 0,
                    )
                    if fresh:
                        new_stream = fresh[0]["logStreamName"]
                if new_stream is not None and (first_event is None or not any(m["stage"] == "ready" for m in markers)):
                    events = _stream_events(logs, group, new_stream)
                    if events:
                        first_event = datetime.fromtimestamp(events[0]["timestamp"] / 1000, tz=UTC)
                        markers = [m for e in events if (m := parse_stage_line(e.get("message", "")))]
                if in_service is None:
                    ep = aws.describe_endpoint(sess, endpoint)
                    cur, _ = aws.variant_counts(ep)
                    status = ep.get("EndpointStatus")
                    if status in ("Failed", "OutOfService", "UpdateRollbackFailed", "Deleting"):
                        # Stop now rather than at --timeout-s; Freeze restores (or names the thaw command).
                        reason = ep.get("FailureReason")
                        raise TargetError(f"{endpoint} went {status} during the scale-out"
                                          f"{f' ({reason})' if reason else ''}; nothing measured")
                    if ep.get("EndpointStatus") == "InService" and (cur or 0) >= new:
                        in_service = datetime.fromtimestamp(now, tz=UTC)
                        log(f"{endpoint}: InService with {cur} instances after {now - t0_s:.1f} s")
                if in_service is not None and probe is not None and recovered is None:
                    # Only load served once the new instance is in service counts as recovered.
                    recovered = recovered_at(list(probe.samples), threshold, recover_window_s, in_service.timestamp(), clock())
                have_markers = any(m["stage"] == "ready" for m in markers)
                if in_service is not None and have_markers and (probe is None or recovered is not None):
                    break
                sleep(poll_s)
        finally:
            if probe is not None:
                probe.stop()
        # Give back the instance the measurement added before scaling is restored.
        try:
            sm.update_endpoint_weights_and_capacities(
                EndpointName=endpoint,
                DesiredWeightsAndCapacities=[{"VariantName": aws.VARIANT, "DesiredInstanceCount": base}],
            )
        except Exception as err:  # noqa: BLE001 - the measurement stands; say what to do
            log(f"warning: could not set {endpoint} back to {base} instances ({aws.client_error_message(err)}); "
                "scaling will scale it in, or set it by hand")
    phases = [phase("desired_set", t0, t0, "UpdateEndpointWeightsAndCapacities call", False)]
    phases.append(phase("instance_logging", first_event, t0, f"first event of new log stream {new_stream}", True))
    phases += marker_phases(markers, t0, f"container log marker ({new_stream})")
    phases.append(
        phase("in_service", in_service, t0, f"DescribeEndpoint CurrentInstanceCount >= {new} (polled every {poll_s:g} s)", poll_s > 0)
    )
    if probe is not None:
        at = datetime.fromtimestamp(recovered, tz=UTC) if recovered else None
        phases.append(phase("traffic_recovered", at, t0,
                            f"probe at concurrency {probe.concurrency}: p95 <= {threshold:.0f} ms (ladder p95 at "
                            f"{probe.concurrency / new:g}/instance +10%) for {recover_window_s:g} s", True))
    else:
        phases.append(phase("traffic_recovered", None, t0, "no probe load (--probe-concurrency 0)", True, applicable=False))
    return ordered(phases)


# --- local process -----------------------------------------------------------------------------


def run_local(serve_cmd: str, transport: str, timeout_s: float, log: Callable[[str], None]) -> list[Phase]:
    import asyncio

    import httpx

    from bench.cli.options import serve_argv
    from bench.load.ladder import request_mix
    from bench.load.synthetic import free_port
    from bench.load.targets import HttpTarget, WebSocketTarget

    port = free_port()
    argv = serve_argv(serve_cmd, port)
    url = f"http://127.0.0.1:{port}"
    markers: list[dict] = []
    tail: list[str] = []
    t0_s = time.time()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    except OSError as err:
        raise UsageError(f"--serve-cmd {serve_cmd!r}: cannot start ({err.strerror})") from None
    t0 = datetime.fromtimestamp(t0_s, tz=UTC)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = parse_stage_line(line)
            if m:
                markers.append(m)
            tail.append(line.rstrip())
            del tail[:-20]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        ready_at = None
        while ready_at is None:
            if proc.poll() is not None:
                raise TargetError(f"--serve-cmd exited with {proc.returncode} before serving: " + " | ".join(tail[-3:]))
            if time.time() - t0_s > timeout_s:
                raise TargetError(f"--serve-cmd did not answer /ping within {timeout_s:g} s: " + " | ".join(tail[-3:]))
            try:
                if httpx.get(url + "/ping", timeout=1.0).status_code == 200:
                    ready_at = datetime.fromtimestamp(time.time(), tz=UTC)
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        target = WebSocketTarget(url) if transport == "bidirectional" else HttpTarget(url)
        texts, _ = request_mix("short")

        async def one() -> Outcome:
            await target.open(1)
            try:
                return await target.invoke(texts[0])
            finally:
                await target.close()

        wall0, perf0 = time.time(), time.perf_counter()
        out = asyncio.run(one())
        if not out.ok or out.ttfab_s is None:
            raise TargetError(f"the new process at {url} failed its first request ({out.error})")
        served_at = datetime.fromtimestamp(wall0 + (out.start + out.ttfab_s - perf0), tz=UTC)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=2)
    if not any(m["stage"] == "ready" for m in markers):
        log("warning: the new process printed no 'ready' stage marker; phases come from /ping only")
    phases = [phase("desired_set", t0, t0, f"process spawned: {' '.join(argv)}", False)]
    phases.append(phase("instance_logging", None, t0, "local process: no instance provisioning", False, applicable=False))
    phases += marker_phases(markers, t0, "stdout stage marker")
    phases.append(phase("in_service", ready_at, t0, "first GET /ping 200 (polled every 20 ms)", True))
    phases.append(
        phase("traffic_recovered", served_at, t0, f"first byte of the first request served (TTFAB {out.ttfab_s * 1000:.1f} ms)", False)
    )
    return ordered(phases)


# --- command -----------------------------------------------------------------------------------


def render(a: TtotalArtifact) -> str:
    from bench.report.text import dominant_phase

    rows = [f"T_total for {a.model} ({a.trigger}) on {a.fingerprint.slug}", "phase               offset s  bounded  source"]
    for p in a.phases:
        off = f"{p.offset_s:8.3f}" if p.offset_s is not None else "     n/a"
        rows.append(f"{p.name:<18}  {off}  {'yes' if p.bounded else 'no ':<7}  {p.source}")
    rows.append(t_total_line(a))
    d = dominant_phase(a)
    if d is not None:
        rows.append(f"dominant phase: {d.name} ({d.what}), {d.seconds:.1f} s = {100 * d.share:.0f}% of the measured "
                    f"T_total; shortened by {d.shortens}")
    return "\n".join(rows)


def run(args: argparse.Namespace, session: Any = None, clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep, probe_target: Target | None = None) -> int:
    from bench.aws import client as aws
    from bench.load.ladder import request_mix
    from bench.load.targets import make_target
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact

    qmax = load_artifact(args.qmax, QmaxArtifact)
    for name in ("recover_window_s", "poll_s", "timeout_s"):
        if getattr(args, name) < 0 or (name == "timeout_s" and args.timeout_s == 0):
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name):g}: must be positive")
    from bench.k8s.options import k8s_target

    k8s = k8s_target(args)
    if k8s is not None:
        if args.url or args.endpoint:
            raise UsageError("--kubernetes times a Deployment's scale-out: drop --url/--endpoint")
        from bench.k8s.commands import ttotal_phases

        log = (lambda m: None) if args.json or getattr(args, "quiet", False) else (lambda m: print(m, file=sys.stderr))
        started = datetime.now(UTC)
        phases, fp = ttotal_phases(args, k8s, qmax, log)
        return _write(args, qmax, phases, "kubernetes-scale", fp, k8s.provenance, None, started)
    sess = session or (aws.session(args.region) if args.endpoint and not getattr(args, "url", None) else None)
    target = make_target(args, session=sess)
    target.check()
    fp = target.fingerprint(args.instance_type, args.image_digest)
    if fp != qmax.fingerprint:
        raise UsageError(
            f"{args.qmax} was measured on {qmax.fingerprint.slug} ({qmax.fingerprint.instance_type}, "
            f"{qmax.fingerprint.image_digest[:19]}) but {target.name} is {fp.slug} ({fp.instance_type}, "
            f"{fp.image_digest[:19]}); measure qmax on this target first"
        )
    if target.transport != qmax.transport:
        raise UsageError(f"{args.qmax} was measured over {qmax.transport!r} but --transport is {target.transport!r}")
    log = (lambda m: None) if args.json or getattr(args, "quiet", False) else (lambda m: print(m, file=sys.stderr))
    started = datetime.now(UTC)
    if args.endpoint:
        c = args.probe_concurrency if args.probe_concurrency is not None else max(1, min(10, qmax.q_max))
        probe = Probe(probe_target or target, c, request_mix("mixed")[0]) if c > 0 else None
        phases = run_sagemaker(sess, args.endpoint, qmax, probe=probe, recover_window_s=args.recover_window_s,
                               poll_s=args.poll_s, timeout_s=args.timeout_s, state_dir=args.state_dir,
                               clock=clock, sleep=sleep, log=log)
        trigger = "forced-desired"
    else:
        phases = run_local(args.serve_cmd, args.transport, args.timeout_s, log)
        trigger = "local-process"
    return _write(args, qmax, phases, trigger, qmax.fingerprint, target.name, target, started)


def _write(args: argparse.Namespace, qmax: Any, phases: list[Phase], trigger: str, fingerprint: Any, target_name: str,
           target: Target | None, started: datetime) -> int:
    """The artifact of the measured phases: published, with a receipt for a SageMaker target."""
    from bench.aws.receipts import leave_receipt
    from bench.load.targets import SageMakerTarget
    from bench.report.plots import plot_ttotal
    from bench.report.publish import publish
    from speech.schema.artifacts import Provenance, TtotalArtifact, ttotal_filename

    measured = max(p.offset_s for p in phases if p.applicable and p.offset_s is not None)
    if measured <= 0:
        raise BenchError("every phase was observed at offset 0: nothing to measure; nothing written")
    artifact = TtotalArtifact(
        model=qmax.model,
        trigger=trigger,
        transport=qmax.transport,
        fingerprint=fingerprint,
        phases=phases,
        measured_total_s=round(measured, 3),
        provenance=Provenance(origin="measured", source=f"bench ttotal ({trigger})", measured_at=started,
                              tool="bench ttotal", target=target_name, tool_version=tool_version(),
                              region=target_region(target) if target is not None else None, ended_at=datetime.now(UTC)),
    )
    publish(args, artifact, ttotal_filename(artifact), render, plot_ttotal)
    return leave_receipt(args, target.session if isinstance(target, SageMakerTarget) else None, artifact)
