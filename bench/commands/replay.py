"""``bench replay``: a traffic trace sent open-loop to a real target, each request at its
timestamp, TTFAB and rejections recorded per request: the real-world check of ``bench simulate``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Sequence

import numpy as np

from speech.schema.artifacts import SCHEMA_VERSION, Frozen
from speech.files import write_artifact

from bench.errors import UsageError
from bench.load.ladder import MIXES
from bench.load.loadgen import new_event_loop
from bench.cli.options import add_target_arguments
from bench.load.traces import load_trace
from bench.load.targets import Outcome, Target, make_target

DESCRIPTION = """\
Send a traffic trace to a real target open-loop: every request leaves at its own timestamp,
whether or not earlier ones have answered (a closed loop would slow down with the server and hide
its queue). Records per request when it was due, when it was sent, TTFAB and whether the gate
rejected it (503 queue_saturated / shed_deadline / draining).

  python -m bench replay --trace step:base=20,factor=3,at=30,duration=60 --url http://127.0.0.1:8080
  python -m bench replay --trace azure-conv:peak=40,speedup=60 --endpoint dev-kokoro-82m --duration 120

Traces are the same specs as `bench simulate` (see its --help). Writes replay-<trace>.json into
--out. Exit 0 done, 2 bad input, 130 interrupted (what was measured so far is written).
"""

LateWarnMs = 50.0


class ReplayRequest(Frozen):
    due_s: float
    late_ms: float
    """How long after its timestamp the request was sent (client lag)."""
    ttfab_ms: float | None
    status: str
    """ok, rejected, or the error code."""


class ReplayArtifact(Frozen):
    schema_version: int = SCHEMA_VERSION
    kind: str = "replay"
    target: str
    trace_spec: str
    seed: int
    duration_s: float
    slo_ms: float | None = None
    requests: int
    ok: int
    rejected: int
    errors: int
    ttfab_p50_ms: float | None
    ttfab_p95_ms: float | None
    ttfab_p99_ms: float | None
    within_slo_share: float | None = None
    send_late_p99_ms: float
    started_at: datetime
    per_request: list[ReplayRequest]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_target_arguments(p)
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic (same specs as bench simulate)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="replay only the first S seconds")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed for timestamps within each second (default 0)")
    p.add_argument("--mix", default="mixed", choices=sorted(MIXES), help="request texts (default mixed; a size column picks by size)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="also report the share answered within this SLO")
    p.add_argument("--out", type=Path, default=Path("out/replay"), metavar="DIR", help="artifact directory (default out/replay)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


@dataclass
class Sent:
    due_s: float
    sent_s: float
    outcome: Outcome


def texts_for(sizes: np.ndarray | None, count: int, mix: str) -> list[str]:
    """One text per request: cycling the mix, or by size rank when the trace has sizes (the
    shortest texts for the smallest requests)."""
    pool = sorted(MIXES[mix], key=len)
    if sizes is None or sizes.size == 0:
        return [pool[i % len(pool)] for i in range(count)]
    ranks = np.argsort(np.argsort(sizes, kind="stable"), kind="stable") / max(1, sizes.size - 1)
    return [pool[min(len(pool) - 1, int(r * len(pool)))] for r in ranks]


async def replay_async(target: Target, times_s: Sequence[float], texts: Sequence[str]) -> list[Sent]:
    """Send request i at ``times_s[i]`` after the start, concurrently, and wait for all answers."""
    await target.open(1)
    t0 = time.perf_counter()
    results: list[Sent] = []

    async def one(due: float, text: str) -> None:
        now = time.perf_counter() - t0
        sent = now
        out = await target.invoke(text)
        results.append(Sent(due_s=due, sent_s=sent, outcome=out))

    tasks = []
    try:
        for due, text in zip(times_s, texts, strict=True):
            delay = due - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due, text)))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await target.close()
    return sorted(results, key=lambda s: s.due_s)


def summarize(sent: list[Sent], *, target: str, spec: str, seed: int, duration_s: float, slo_ms: float | None,
              started_at: datetime) -> ReplayArtifact:
    ttfab = np.array([s.outcome.ttfab_s * 1000 for s in sent if s.outcome.ok and s.outcome.ttfab_s is not None])
    ok = sum(1 for s in sent if s.outcome.ok)
    rejected = sum(1 for s in sent if s.outcome.rejected)
    pct = lambda q: round(float(np.percentile(ttfab, q)), 3) if ttfab.size else None  # noqa: E731
    late = np.array([max(0.0, s.sent_s - s.due_s) * 1000 for s in sent]) if sent else np.zeros(1)
    return ReplayArtifact(
        target=target, trace_spec=spec, seed=seed, duration_s=duration_s, slo_ms=slo_ms, requests=len(sent), ok=ok,
        rejected=rejected, errors=len(sent) - ok - rejected, ttfab_p50_ms=pct(50), ttfab_p95_ms=pct(95),
        ttfab_p99_ms=pct(99),
        within_slo_share=(round(float((ttfab <= slo_ms).sum()) / len(sent), 6) if slo_ms and sent else None),
        send_late_p99_ms=round(float(np.percentile(late, 99)), 3), started_at=started_at,
        per_request=[
            ReplayRequest(
                due_s=round(s.due_s, 6), late_ms=round(max(0.0, s.sent_s - s.due_s) * 1000, 3),
                ttfab_ms=round(s.outcome.ttfab_s * 1000, 3) if s.outcome.ok and s.outcome.ttfab_s is not None else None,
                status="ok" if s.outcome.ok else "rejected" if s.outcome.rejected else (s.outcome.error or "error"),
            )
            for s in sent
        ],
    )


def run(args: argparse.Namespace) -> int:
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration {args.duration:g}: must be > 0 seconds")
    if args.slo_ms is not None and not args.slo_ms > 0:
        raise UsageError(f"--slo-ms {args.slo_ms:g}: must be > 0")
    trace = load_trace(args.trace)
    times, sizes = trace.request_times(seed=args.seed, duration_s=args.duration)
    if times.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no requests in the first {args.duration or trace.duration_s:g} s")
    target = make_target(args)
    target.check()
    texts = texts_for(sizes, times.size, args.mix)
    started = datetime.now(UTC)
    duration = float(args.duration or trace.duration_s)
    print(f"replaying {times.size} requests over {duration:g} s to {target.name} (open loop)", file=sys.stderr)
    loop = new_event_loop()
    try:
        sent = loop.run_until_complete(replay_async(target, times.tolist(), texts))
    finally:
        loop.close()
    art = summarize(sent, target=target.name, spec=trace.spec, seed=args.seed, duration_s=duration, slo_ms=args.slo_ms,
                    started_at=started)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in trace.name)
    path = write_artifact(args.out / f"replay-{safe}.json", art)
    if args.json:
        print(art.model_dump_json(indent=2, exclude={"per_request"}))
    else:
        p = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
        print(f"{art.requests} requests: {art.ok} ok, {art.rejected} rejected ({100 * art.rejected / art.requests:.2f}%), "
              f"{art.errors} errors")
        print(f"TTFAB p50 / p95 / p99: {p(art.ttfab_p50_ms)} / {p(art.ttfab_p95_ms)} / {p(art.ttfab_p99_ms)} ms"
              + (f"; within SLO {100 * art.within_slo_share:.2f}%" if art.within_slo_share is not None else ""))
        warn = "  (client fell behind: results understate the offered load)" if art.send_late_p99_ms > LateWarnMs else ""
        print(f"sent late p99 {art.send_late_p99_ms:.1f} ms{warn}")
        print(f"wrote {path}")
    return 0
