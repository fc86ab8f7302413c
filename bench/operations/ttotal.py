"""``bench ttotal``'s measurement, the one function the command calls (:func:`measure_ttotal`): a
real scale-out timed phase by phase (SageMaker: desired count forced under a freeze, CloudWatch
Logs' stage markers, a probe load until traffic recovers; Kubernetes: the Deployment's pods; local:
a second container process), and the ttotal artifact built from the phases. Progress goes to
stderr; the command renders and writes."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import target_region, tool_version
from bench.aws import client as aws
from bench.aws.freeze import Freeze
from bench.cli.options import serve_argv
from bench.errors import BenchError, TargetError, UsageError
from bench.k8s.commands import ttotal_phases
from bench.k8s.options import k8s_target
from bench.load.ladder import request_mix
from bench.load.synthetic import free_port
from bench.load.targets import HttpTarget, Outcome, Target, WebSocketTarget, make_target
from container.markers import STAGES, parse_at, parse_stage_line
from speech.files import load_artifact
from speech.schema.artifacts import Phase, Provenance, QmaxArtifact, TtotalArtifact

ORDER = ("desired_set", "instance_logging", *STAGES, "in_service", "traffic_recovered")


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
    if not applicable or at is None:
        return Phase(name=name, at=None, offset_s=None, source=source, bounded=bounded, applicable=False)
    off = (at - t0).total_seconds()
    # Clocks of two machines (or a marker rounded to ms) may put a phase a hair before t0.
    return Phase(name=name, at=at, offset_s=round(max(0.0, off), 3), source=source, bounded=bounded or off < 0)


def ordered(phases: list[Phase]) -> list[Phase]:
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(phases, key=lambda p: (p.offset_s if p.offset_s is not None else float("inf"), rank.get(p.name, 99)))


def ladder_p95_at(q: QmaxArtifact, concurrency: float) -> float:
    xs = [lv.concurrency for lv in q.ladder]
    return float(np.interp(concurrency, xs, [lv.ttfab_p95_ms for lv in q.ladder]))


def recovered_at(
    samples: list[tuple[float, float]], threshold_ms: float, window_s: float, not_before: float, until: float
) -> float | None:
    """Start of the first window (>= not_before) of length window_s whose p95 TTFAB is within the
    threshold; samples are (wall time of first byte, TTFAB ms). None when no full window qualifies."""

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
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="probe", daemon=True)
        self._thread.start()

    async def _main(self) -> None:
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


def measure_ttotal(args: argparse.Namespace, session: Any = None, clock: Callable[[], float] = time.time,
                   sleep: Callable[[float], None] = time.sleep,
                   probe_target: Target | None = None) -> tuple[TtotalArtifact, Target | None]:
    """Time one scale-out for the parsed flags of ``bench ttotal`` (a Deployment's, an endpoint's
    forced one, or a second local process); the artifact (not yet written) and the target it
    measured (None on Kubernetes)."""
    qmax = load_artifact(args.qmax, QmaxArtifact)
    for name in ("recover_window_s", "poll_s", "timeout_s"):
        if getattr(args, name) < 0 or (name == "timeout_s" and args.timeout_s == 0):
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name):g}: must be positive")

    k8s = k8s_target(args)
    if k8s is not None:
        if args.url or args.endpoint:
            raise UsageError("--kubernetes times a Deployment's scale-out: drop --url/--endpoint")

        log = (lambda m: None) if args.json or getattr(args, "quiet", False) else (lambda m: print(m, file=sys.stderr))
        started = datetime.now(UTC)
        phases, fp = ttotal_phases(args, k8s, qmax, log)
        return _artifact(qmax, phases, "kubernetes-scale", fp, k8s.provenance, None, started), None
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
    return _artifact(qmax, phases, trigger, qmax.fingerprint, target.name, target, started), target


def _artifact(qmax: Any, phases: list[Phase], trigger: str, fingerprint: Any, target_name: str, target: Target | None,
              started: datetime) -> TtotalArtifact:
    """The artifact of the measured phases; BenchError when nothing took time."""
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
    return artifact
