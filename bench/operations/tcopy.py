"""``bench tcopy``'s measurement, the one function the command calls (:func:`measure_tcopy`): how
long a new model copy takes to serve on a running instance, and what it holds.

Local: a copy is a second server process of the same model on another port, started N times while
the first (--url) serves, under an optional load on the first. SageMaker: copy-count increases of
one of an inference component (bench.aws.copy_starts), the footprint from a local measurement. No
instance provisioning is in it; that is the point of a copy (docs/design.md §10, hot loading).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from bench import tool_version
from bench.aws import client as aws
from bench.aws.copy_starts import run_sagemaker
from bench.cli.options import serve_argv
from bench.cli.progress import RunProgress, wanted
from bench.errors import BenchError, CopyNotReady, TargetError, UsageError
from bench.load.ladder import request_mix
from bench.load.synthetic import free_port
from bench.load.targets import HttpTarget, Outcome
from container.markers import parse_at, parse_footprint_line, parse_stage_line
from speech.files import load_artifact
from speech.schema.artifacts import CopyArtifact, CopyFootprint, CopyStart, Fingerprint, Provenance

MIB = 2**20


# --- one start ---------------------------------------------------------------------------------


@dataclass
class StartResult:
    start: CopyStart
    footprint: dict
    """The new copy's /ping footprint at its first 200."""
    marker_footprint: dict | None
    warmup_done_s: float | None
    identity: dict


@dataclass
class _Reader:
    proc: subprocess.Popen
    stages: dict[str, dict] = field(default_factory=dict)
    footprint: dict | None = None
    tail: list[str] = field(default_factory=list)

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if (m := parse_stage_line(line)) is not None:
                self.stages.setdefault(m["stage"], m)
            elif (f := parse_footprint_line(line)) is not None:
                self.footprint = f
            self.tail.append(line.rstrip())
            del self.tail[:-20]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the container drains, nothing in flight here), then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_copy(serve_cmd: str, timeout_s: float, poll_s: float = 0.02) -> StartResult:
    """Spawn one copy, wait for its first /ping 200, read its markers and footprint, stop it."""

    port = free_port()
    argv = serve_argv(serve_cmd, port)
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started_at = datetime.now(UTC)
    t0 = time.time()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    except OSError as err:
        raise UsageError(f"--serve-cmd {serve_cmd!r}: cannot start ({err.strerror})") from None
    reader = _Reader(proc)
    thread = threading.Thread(target=reader.run, daemon=True)
    thread.start()
    try:
        body: dict | None = None
        with httpx.Client(timeout=1.0) as client:
            while body is None:
                if proc.poll() is not None:
                    raise CopyNotReady(f"the copy ({' '.join(argv)}) exited with {proc.returncode} before /ping 200: "
                                      + " | ".join(reader.tail[-3:]) + "; nothing written")
                if time.time() - t0 > timeout_s:
                    raise CopyNotReady(f"the copy did not answer /ping 200 within --timeout-s {timeout_s:g}: "
                                      + " | ".join(reader.tail[-3:]) + "; nothing written")
                try:
                    r = client.get(url + "/ping")
                    if r.status_code == 200:
                        ready = time.time()
                        body = r.json() if isinstance(r.json(), dict) else {}
                        break
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(poll_s)
    finally:
        _stop(proc)
        thread.join(timeout=5)
    if "footprint" not in body:
        raise TargetError(f"the copy's /ping 200 has no 'footprint' ({sorted(body)}): the container predates the "
                          "footprint report (container/footprint.py); rebuild it; nothing written")

    def offset(stage: str) -> float | None:
        m = reader.stages.get(stage)
        return None if m is None else round(max(0.0, parse_at(m["at"]).timestamp() - t0), 3)

    ready_s = round(ready - t0, 3)
    weights = offset("weights_ready")
    framework = offset("framework_init")
    source = "GET /ping 200 (polled every 20 ms); framework_init, weights_ready: stdout stage markers"
    if weights is None or weights > ready_s:
        # Without the marker, the load and the warm-up cannot be told apart: all of it is weights.
        weights, source = ready_s, "GET /ping 200 (polled every 20 ms); no weights_ready marker seen"
    if framework is not None and framework > weights:
        framework = None
    identity = {k: v for k, v in body.items() if k not in ("status", "footprint")}
    return StartResult(
        start=CopyStart(started_at=started_at, framework_init_s=framework, weights_ready_s=weights, ready_s=ready_s,
                        source=source),
        footprint=body["footprint"], marker_footprint=reader.footprint, warmup_done_s=offset("warmup_done"),
        identity=identity,
    )


# --- load on the first copy --------------------------------------------------------------------


class Load:
    """Closed-loop requests on the first copy in a background thread (it keeps serving while a
    copy starts beside it, as on a real instance); counts what it got."""

    def __init__(self, url: str, concurrency: int) -> None:
        self.url, self.concurrency = url, concurrency
        self.ok = self.failed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Load:
        if self.concurrency > 0:
            self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="tcopy-load", daemon=True)
            self._thread.start()
        return self

    async def _main(self) -> None:
        target = HttpTarget(self.url)
        texts, _ = request_mix("mixed")
        await target.open(self.concurrency)

        async def worker(i: int) -> None:
            n = i
            while not self._stop.is_set():
                out: Outcome = await target.invoke(texts[n % len(texts)])
                n += 1
                if out.ok:
                    self.ok += 1
                else:
                    self.failed += 1
                    await asyncio.sleep(0.05)

        try:
            await asyncio.gather(*(worker(i) for i in range(self.concurrency)))
        finally:
            await target.close()

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=70)


# --- pure helpers ------------------------------------------------------------------------------


def copy_footprint(footprints: list[dict]) -> CopyFootprint:
    """The largest of the starts' footprints (peak RSS; accelerator memory on CUDA), in MiB: the
    safe figure to pack by."""

    devices = {f["device"] for f in footprints}
    if len(devices) != 1:
        raise BenchError(f"the copies ran on different devices ({', '.join(sorted(devices))}); nothing written")
    device = devices.pop()
    host = max(max(f["rss_peak_bytes"], f["rss_bytes"]) for f in footprints) / MIB
    accel = [f for f in footprints if f.get("accelerator_bytes")]
    if device == "cuda" and not accel:
        raise BenchError("the copies ran on CUDA but none reported accelerator memory (install pynvml in the image, or "
                         "use the torch backend, which reports torch.cuda.max_memory_reserved); nothing written")
    top = max(accel, key=lambda f: f["accelerator_bytes"]) if device == "cuda" else None
    total = top.get("accelerator_total_bytes") if top else None
    return CopyFootprint(
        device=device,
        accelerator_memory_mib=round(top["accelerator_bytes"] / MIB, 1) if top else None,
        accelerator_memory_source=top["accelerator_source"] if top else None,
        accelerator_name=top.get("accelerator_name") if top else None,
        accelerator_memory_total_mib=round(total / MIB, 1) if total else None,
        host_memory_mib=round(host, 1),
    )


# --- command -----------------------------------------------------------------------------------


def measure_tcopy(args: argparse.Namespace, session: Any = None, clock: Callable[[], float] = time.time,
                  sleep: Callable[[float], None] = time.sleep) -> CopyArtifact:
    """Start ``--starts`` copies for the parsed flags of ``bench tcopy`` (local processes beside
    ``--url``, or copy-count increases of ``--inference-component``); the copy artifact, not yet
    written."""
    if bool(args.url) == bool(args.inference_component):
        raise UsageError("pass exactly one of --url (a local copy) or --inference-component (SageMaker)")
    if args.inference_component:
        return measure_component(args, session, clock, sleep)
    if args.footprint_from:
        raise UsageError("--footprint-from: only with --inference-component (a local copy reports its own footprint)")
    if args.starts < 1:
        raise UsageError(f"--starts {args.starts}: must be at least 1")
    if args.load_concurrency < 0:
        raise UsageError(f"--load-concurrency {args.load_concurrency}: must be >= 0")
    if not args.timeout_s > 0:
        raise UsageError(f"--timeout-s {args.timeout_s:g}: must be > 0 seconds")
    first = HttpTarget(args.url)
    first.check()
    fingerprint = first.fingerprint(args.instance_type, args.image_digest)
    first_identity = {k: v for k, v in first._identity.items() if k not in ("status", "footprint")}
    started = datetime.now(UTC)
    results: list[StartResult] = []
    progress = RunProgress("tcopy", args.starts, enabled=wanted(args), unit="copies")
    try:
        with Load(args.url, args.load_concurrency) as load:
            for i in range(args.starts):
                r = start_copy(args.serve_cmd, args.timeout_s)
                if r.identity != first_identity:
                    raise UsageError(
                        f"--serve-cmd starts another model than {args.url} serves (its /ping says {r.identity}, the first "
                        f"copy's {first_identity}); a copy must be the same model: fix --serve-cmd or --url"
                    )
                results.append(r)
                progress.line(f"  copy {i + 1}: /ping 200 after {r.start.ready_s:.3f} s (weights_ready "
                              f"{r.start.weights_ready_s:.3f} s), peak RSS {r.footprint['rss_peak_bytes'] / MIB:.0f} MiB")
                progress.advance(1, f"copy {i + 1} of {args.starts} ready")
    finally:
        progress.close()
    starts = [r.start for r in results]
    served = f"{load.ok} requests served on the first copy meanwhile ({load.failed} failed)" if args.load_concurrency else "first copy idle"
    artifact = CopyArtifact(
        model=args.model,
        fingerprint=fingerprint,
        footprint=copy_footprint([r.footprint for r in results]),
        starts=starts,
        planning_statistic=args.statistic,
        **CopyArtifact.summarize(starts, args.statistic),
        provenance=Provenance(
            origin="measured",
            source=f"bench tcopy (local-process): {args.starts} copies started by {args.serve_cmd!r} beside {args.url}, "
                   f"load concurrency {args.load_concurrency}; {served}",
            measured_at=started, tool="bench tcopy", target=first.name, tool_version=tool_version(),
            ended_at=datetime.now(UTC),
        ),
    )

    return artifact


def measure_component(args: argparse.Namespace, session: Any, clock: Callable[[], float],
                      sleep: Callable[[float], None]) -> CopyArtifact:
    """``--inference-component``: copy-count increases of one, timed to InService (bench.aws.copy_starts)."""
    if args.starts < 1:
        raise UsageError(f"--starts {args.starts}: must be at least 1")
    if not args.timeout_s > 0 or not args.poll_s > 0:
        raise UsageError(f"--timeout-s {args.timeout_s:g} / --poll-s {args.poll_s:g}: must be > 0 seconds")
    if args.footprint_from is None:
        raise UsageError("--inference-component needs --footprint-from FILE: SageMaker does not report a copy's memory; "
                         "measure it with bench tcopy --url on the same image and pass that artifact")
    source = load_artifact(args.footprint_from, CopyArtifact)
    sess = session or aws.session(args.region)
    started = datetime.now(UTC)
    progress = RunProgress("tcopy", args.starts, enabled=wanted(args), unit="copies")

    def done(i: int, st: Any) -> None:
        progress.line(f"  copy {i + 1}: InService after {st.ready_s:.1f} s")
        progress.advance(1, f"copy {i + 1} of {args.starts} in service")

    try:
        starts, ic = run_sagemaker(
            sess, args.inference_component, args.starts, poll_s=args.poll_s, timeout_s=args.timeout_s, clock=clock,
            sleep=sleep, log=(lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr)),
            done=done,
            # What was put back is said on stderr even with --json (stdout carries the JSON); -q silences it.
            notify=(lambda m: None) if getattr(args, "quiet", False) else (lambda m: print(m, file=sys.stderr)))
    finally:
        progress.close()
    endpoint = ic.get("EndpointName", "")
    if args.instance_type and args.image_digest:
        itype, digest = args.instance_type, args.image_digest
    else:
        itype, digest = aws.component_identity(sess, ic)
        itype, digest = args.instance_type or itype, args.image_digest or digest
    if not itype or not digest:
        raise TargetError(f"inference component {args.inference_component!r}: cannot tell its instance type and image digest "
                          f"(got {itype!r}, {digest or 'no digest'}); pass --instance-type and --image-digest; nothing written")
    try:
        fingerprint = Fingerprint.of(itype, digest)
    except ValueError as err:
        raise UsageError(f"fingerprint of {args.inference_component}: {str(err).splitlines()[0]}") from None
    artifact = CopyArtifact(
        model=args.model, fingerprint=fingerprint, footprint=source.footprint, starts=starts,
        planning_statistic=args.statistic, **CopyArtifact.summarize(starts, args.statistic),
        provenance=Provenance(
            origin="measured",
            source=f"bench tcopy (inference component {args.inference_component}): {args.starts} copy-count increases "
                   f"of one; footprint from {args.footprint_from.name} ({source.fingerprint.slug}, "
                   f"{source.provenance.target})",
            measured_at=started, tool="bench tcopy", target=f"sagemaker:{endpoint}", tool_version=tool_version(),
            region=getattr(sess, "region_name", None), ended_at=datetime.now(UTC),
        ),
    )

    return artifact
