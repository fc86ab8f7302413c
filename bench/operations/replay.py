"""``bench replay``'s run, the one function the command calls (:func:`replay_trace`): a traffic trace
sent open-loop to a real target, each request at its timestamp (our event loop, or Locust's
processes above ``LOCAL_MAX_RPS``), TTFAB and rejections recorded per request, the replay artifact
written: the real-world check of ``bench simulate``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.cli.progress import RunProgress, wanted
from bench.errors import TargetError, UsageError
from bench.load.ladder import MIXES
from bench.load.loadgen import new_event_loop
from bench.load.locust_engine import engine_options, locust_target, run_locust
from bench.load.schedule import Schedule, request_body
from bench.load.schedule import texts_for as schedule_texts
from bench.load.targets import Outcome, Target, make_target
from bench.load.traces import load_trace
from speech.files import write_artifact
from speech.schema.artifacts import ReplayArtifact, ReplayRequest


def open_loop_slots(peak_rps: float) -> int:
    """Requests an open loop may hold in flight: 5 s of the busiest second's arrivals (threads of a
    SageMaker pool start only when needed, so a generous bound costs nothing until used)."""
    return int(min(2048, max(16, 5 * peak_rps)))


@dataclass
class Sent:
    due_s: float
    sent_s: float
    outcome: Outcome


def texts_for(sizes: np.ndarray | None, count: int, mix: str) -> list[str]:
    """One text per request from the mix (see bench.load.schedule.texts_for)."""

    return schedule_texts(sizes, count, MIXES[mix])


async def replay_async(target: Target, times_s: Sequence[float], texts: Sequence[str], slots: int = 1,
                       on_progress: Callable[[int, int, int, float], None] | None = None) -> list[Sent]:
    """Send request i at ``times_s[i]`` after the start, concurrently, and wait for all answers.
    ``slots``: requests that may be in flight at once (SageMaker's thread pool is sized to it; a
    pool smaller than the load would queue requests unseen, after their send time was taken).
    ``on_progress(sent, answered, rejected, elapsed_s)`` twice a second while it runs (a display)."""

    await target.open(slots)
    t0 = time.perf_counter()
    results: list[Sent] = []
    rejected = 0

    async def one(due: float, text: str) -> None:
        nonlocal rejected
        now = time.perf_counter() - t0
        sent = now
        out = await target.invoke(text)
        results.append(Sent(due_s=due, sent_s=sent, outcome=out))
        rejected += bool(out.rejected)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.5)
            on_progress(len(tasks), len(results), rejected, time.perf_counter() - t0)  # type: ignore[misc]

    tasks: list[asyncio.Task] = []
    tick = asyncio.create_task(ticker()) if on_progress is not None else None
    try:
        for due, text in zip(times_s, texts, strict=True):
            delay = due - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due, text)))
        await asyncio.gather(*tasks)
    finally:
        if tick is not None:
            tick.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *([tick] if tick is not None else []), return_exceptions=True)
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


def replay_trace(args: argparse.Namespace) -> tuple[ReplayArtifact, Path]:
    """Replay ``--trace`` open-loop against the target for the parsed flags of ``bench replay`` (our
    event loop, or Locust's processes with ``--engine locust``); the artifact and where it was
    written."""
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration {args.duration:g}: must be > 0 seconds")
    if args.slo_ms is not None and not args.slo_ms > 0:
        raise UsageError(f"--slo-ms {args.slo_ms:g}: must be > 0")
    trace = load_trace(args.trace)
    times, sizes = trace.request_times(seed=args.seed, duration_s=args.duration)
    if times.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no requests in the first {args.duration or trace.duration_s:g} s")
    target = make_target(args)
    duration = float(args.duration or trace.duration_s)
    peak = float(np.bincount(times.astype(int)).max()) if times.size else 0.0
    _, eopts = engine_options(args, peak, getattr(args, "transport", "stream"))
    target.check()
    texts = texts_for(sizes, times.size, args.mix)
    started = datetime.now(UTC)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in trace.name)
    extra: dict = {"scheduled": int(times.size)}

    show = wanted(args)
    if eopts is None:
        if show:
            print(f"replaying {times.size} requests over {duration:g} s to {target.name} (open loop)", file=sys.stderr)
        loop = new_event_loop()
        with RunProgress("replay", total=int(times.size), enabled=show, unit="answered") as progress:
            def on_progress(sent: int, answered: int, rejected: int, elapsed_s: float) -> None:
                progress.update(answered, f"{sent:,} sent, {rejected:,} rejected, {elapsed_s:.0f}/{duration:g} s")

            try:
                sent = loop.run_until_complete(replay_async(target, times.tolist(), texts, open_loop_slots(peak),
                                                            on_progress))
                progress.update(len(sent))  # the last tick may predate the last answers
            finally:
                loop.close()
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        # Locust's own CSV and HTML go beside ours (--csv DIR, --html FILE: bench.cli.results).
        eopts.csv_prefix = (args.csv / f"locust-replay-{safe}").resolve() if args.csv else None
        eopts.html = args.html.with_name(f"{args.html.stem}-locust.html").resolve() if args.html else None
        if eopts.csv_prefix is not None:
            eopts.csv_prefix.parent.mkdir(parents=True, exist_ok=True)
        if eopts.html is not None:
            eopts.html.parent.mkdir(parents=True, exist_ok=True)
        eopts.quiet = args.json or not show
        where = (f"master on {eopts.master_bind}, {eopts.expect_workers} remote worker(s)" if eopts.master_bind
                 else f"{eopts.workers} worker process(es)")
        if show:
            print(f"replaying {times.size} requests over {duration:g} s to {target.name} (open loop, Locust: {where})",
                  file=sys.stderr)
        sched = Schedule.of(times, texts, request_body, spec=trace.spec, seed=args.seed, duration_s=duration)
        res = run_locust(locust_target(target), eopts, schedule=sched, timeout_s=duration + 180)
        sent = [Sent(due_s=r[0], sent_s=r[0] + max(0.0, r[1]) / 1000,
                     outcome=Outcome(start=r[4], end=r[5], ttfab_s=None if r[2] is None else r[2] / 1000, ok=r[3] == "ok",
                                     rejected=r[3] == "rejected", error=None if r[3] in ("ok", "rejected") else r[3]))
                for r in res.rows]
        sent.sort(key=lambda x: x.due_s)
        if not sent and res.interrupted:
            raise KeyboardInterrupt
        if not sent:
            raise TargetError("the Locust run measured no request" + (f" ({'; '.join(res.dead)})" if res.dead else ""))
        extra = {"engine": "locust", "workers": res.workers, "scheduled": int(times.size), "dead_workers": res.dead,
                 "interrupted": res.interrupted}
    art = summarize(sent, target=target.name, spec=trace.spec, seed=args.seed, duration_s=duration, slo_ms=args.slo_ms,
                    started_at=started)
    if extra:
        art = art.model_copy(update=extra)
    path = write_artifact(args.out / f"replay-{safe}.json", art)
    return art, path
