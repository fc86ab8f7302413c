"""Closed-loop load: exactly N requests outstanding, a new one starting the moment one finishes.

One level = settle (discarded, lets queues reach steady state) + measure window. Statistics come
from requests whose first byte (TTFAB) or end (throughput) fall in the window; the client's mean
in-flight count is time-weighted over the window. The generator measures its own cost (event
loop lag, CPU share) so a ladder can show it was not the bottleneck.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from bench.load.targets import Outcome, Target
from speech.schema.artifacts import LadderLevel


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (it comes with uvicorn[standard]): its callbacks and
    socket reads cost a fraction of asyncio's, which is event-loop lag the measurement does not
    have to carry. Plain asyncio otherwise; the results mean the same either way."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def loop_kind(loop: asyncio.AbstractEventLoop | None = None) -> str:
    loop = loop or asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


MAX_ERROR_FRACTION = 0.01
"""A level with more failed requests than this misses the SLO whatever its latency."""


@dataclass
class LevelResult:
    concurrency: int
    measure_s: float
    outcomes: list[Outcome]
    """Requests that completed inside the measurement window."""
    ttfab_ms: np.ndarray
    inflight_mean: float
    loop_lag_p99_ms: float
    cpu_fraction: float
    window: tuple[float, float] = (0.0, 0.0)
    stall_runqueue_share: float | None = None
    """Of the loop-lag samples of 1 ms or more, the share of their lag the loop's thread spent
    runnable but without a CPU (other processes had it); None where the kernel does not say."""
    runqueue_wait_s: float | None = None
    """Total time the loop's thread waited for a CPU over the level (settle + measure)."""

    @property
    def ok(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def rejected(self) -> int:
        return sum(o.rejected for o in self.outcomes)

    @property
    def errors(self) -> int:
        return sum((not o.ok) and (not o.rejected) for o in self.outcomes)

    def pct(self, q: float) -> float:
        return float(np.percentile(self.ttfab_ms, q)) if self.ttfab_ms.size else float("inf")

    def meets(self, slo_ms: float) -> bool:
        """p95 within the SLO, nothing rejected by the gate, at most 1 % failed requests."""
        done = len(self.outcomes)
        return (
            self.ok > 0
            and self.pct(95) <= slo_ms
            and self.rejected == 0
            and self.errors <= MAX_ERROR_FRACTION * done
        )

    def to_level(self, slo_ms: float, cloudwatch_max: float | None = None) -> LadderLevel:
        finite = self.ttfab_ms.size > 0
        return LadderLevel(
            concurrency=self.concurrency,
            completed=len(self.outcomes),
            ok=self.ok,
            rejected=self.rejected,
            errors=self.errors,
            ttfab_p50_ms=round(self.pct(50), 3) if finite else 0.0,
            ttfab_p95_ms=round(self.pct(95), 3) if finite else 0.0,
            ttfab_p99_ms=round(self.pct(99), 3) if finite else 0.0,
            throughput_rps=round(self.ok / self.measure_s, 4),
            client_concurrency_mean=round(self.inflight_mean, 4),
            cloudwatch_concurrency_max=cloudwatch_max,
            meets_slo=self.meets(slo_ms),
            measure_s=self.measure_s,
        )


@dataclass
class _Inflight:
    """Time-weighted integral of the in-flight count over a window."""

    count: int = 0
    last_t: float = 0.0
    area: float = 0.0
    window: tuple[float, float] = (float("inf"), float("inf"))

    def change(self, now: float, delta: int) -> None:
        lo, hi = self.window
        a, b = max(self.last_t, lo), min(now, hi)
        if b > a:
            self.area += self.count * (b - a)
        self.count += delta
        self.last_t = now


@dataclass
class Progress:
    """What a progress display may show while a level runs."""

    concurrency: int
    phase: str
    elapsed_s: float
    total_s: float
    live_p95_ms: float | None
    done: int


def runqueue_wait_s(path: str = "/proc/thread-self/schedstat") -> float | None:
    """Seconds this thread (or the task ``path`` names) has spent runnable but waiting for a CPU
    (Linux schedstat); None where the kernel does not say."""
    try:
        with open(path) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


async def _loop_lag(stop: asyncio.Event, lags: list[float], period: float = 0.01, waits: list[float] | None = None) -> None:
    """Samples how late a ``period`` sleep wakes; with ``waits``, also how much of each sample the
    loop's thread spent waiting for a CPU (so a stall can be told apart from the loop's own work)."""
    while not stop.is_set():
        t = time.perf_counter()
        w0 = runqueue_wait_s() if waits is not None else None
        await asyncio.sleep(period)
        lags.append(max(0.0, time.perf_counter() - t - period))
        if waits is not None:
            w1 = runqueue_wait_s()
            waits.append(w1 - w0 if w0 is not None and w1 is not None else 0.0)


async def run_level_async(
    target: Target,
    concurrency: int,
    settle_s: float,
    measure_s: float,
    texts: Sequence[str],
    on_progress: Callable[[Progress], None] | None = None,
    drain_timeout_s: float = 30.0,
) -> LevelResult:
    await target.open(concurrency)
    # Collect now and move what survives out of the collector's sight: a full collection in the
    # middle of a level walks every object the process has ever imported (tens of ms here).
    gc.collect()
    gc.freeze()
    text_cycle = itertools.cycle(texts)
    t0 = time.perf_counter()
    w_lo, w_hi = t0 + settle_s, t0 + settle_s + measure_s
    inflight = _Inflight(last_t=t0, window=(w_lo, w_hi))
    stop_new = asyncio.Event()
    done: list[Outcome] = []
    lags: list[float] = []
    waits: list[float] | None = [] if runqueue_wait_s() is not None else None
    lag_stop = asyncio.Event()

    async def worker() -> None:
        while not stop_new.is_set():
            inflight.change(time.perf_counter(), +1)
            out = await target.invoke(next(text_cycle))
            inflight.change(out.end, -1)
            done.append(out)
            # A gate rejection returns at once; without a pause a rejected slot would spin.
            if out.rejected or (out.error and not out.ok):
                await asyncio.sleep(0.005)

    cpu0 = time.process_time()
    rq0 = runqueue_wait_s()
    lag_task = asyncio.create_task(_loop_lag(lag_stop, lags, waits=waits))
    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        while (now := time.perf_counter()) < w_hi:
            if on_progress is not None:
                live_ms = [
                    o.ttfab_s * 1000
                    for o in done[-2000:]
                    if o.ok and o.ttfab_s is not None and o.start + o.ttfab_s >= min(now, w_lo) - 5
                ]
                on_progress(
                    Progress(
                        concurrency=concurrency,
                        phase="settle" if now < w_lo else "measure",
                        elapsed_s=now - t0,
                        total_s=settle_s + measure_s,
                        live_p95_ms=float(np.percentile(live_ms, 95)) if live_ms else None,
                        done=len(done),
                    )
                )
            await asyncio.sleep(min(0.25, max(0.0, w_hi - now)))
        stop_new.set()
        cpu1 = time.process_time()
        rq1 = runqueue_wait_s()
        # Let in-flight requests finish so the next level starts on an idle server.
        _, pending = await asyncio.wait(workers, timeout=drain_timeout_s)
        for w in pending:
            w.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        stop_new.set()
        lag_stop.set()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, lag_task, return_exceptions=True)
        gc.unfreeze()
    inflight.change(w_hi, 0)
    in_window = [o for o in done if w_lo <= o.end <= w_hi]
    ttfab = np.array(
        [o.ttfab_s * 1000 for o in done if o.ok and o.ttfab_s is not None and w_lo <= o.start + o.ttfab_s <= w_hi]
    )
    wall = w_hi - t0
    share = None
    if waits is not None and lags:
        stalls = [(lag, min(w, lag)) for lag, w in zip(lags, waits, strict=True) if lag >= 0.001]
        share = sum(w for _, w in stalls) / sum(lag for lag, _ in stalls) if stalls else 0.0
    return LevelResult(
        concurrency=concurrency,
        measure_s=measure_s,
        outcomes=in_window,
        ttfab_ms=ttfab,
        inflight_mean=inflight.area / measure_s if measure_s > 0 else 0.0,
        loop_lag_p99_ms=float(np.percentile(lags, 99) * 1000) if lags else 0.0,
        cpu_fraction=(cpu1 - cpu0) / wall if wall > 0 else 0.0,
        window=(w_lo, w_hi),
        stall_runqueue_share=share,
        runqueue_wait_s=rq1 - rq0 if rq0 is not None and rq1 is not None else None,
    )



@contextmanager
def _ctrl_c_cancels(loop: asyncio.AbstractEventLoop, task: asyncio.Task) -> Iterator[list[bool]]:
    """Ctrl-C while a level runs cancels the level's task, and the caller raises KeyboardInterrupt
    once the loop has stopped; a second Ctrl-C raises at once. Python's own handler would raise it
    inside whichever loop callback was running (uvloop then logs that callback's traceback before
    the command's one line). Only where Ctrl-C has Python's default handler and in the main thread;
    otherwise (SIGINT ignored, or a command's own handler) nothing changes. The handler found is put
    back.

    A Python-level handler (``signal.signal``), as ``asyncio.Runner`` installs for ``asyncio.run``,
    not ``loop.add_signal_handler``: uvloop's handler only records the signal and acts when a byte
    reaches its wake-up socket, which it creates when the loop starts running, so a Ctrl-C landing
    between the two was kept and never acted on (the level ran to its end). Python runs this one at
    the next bytecode in the main thread wherever that is, and the call_soon_threadsafe wakes a loop
    that is already waiting."""
    interrupted: list[bool] = []
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler or threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    def on_ctrl_c(signum, frame) -> None:
        if interrupted or task.done():
            raise KeyboardInterrupt
        interrupted.append(True)
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Session:
    """One event loop for a whole ladder, so connections are reused across levels."""

    target: Target
    loop: asyncio.AbstractEventLoop = field(default_factory=new_event_loop)

    def level(self, concurrency: int, settle_s: float, measure_s: float, texts: Sequence[str], on_progress=None) -> LevelResult:
        task = self.loop.create_task(run_level_async(self.target, concurrency, settle_s, measure_s, texts, on_progress))
        with _ctrl_c_cancels(self.loop, task) as interrupted:
            try:
                return self.loop.run_until_complete(task)
            except asyncio.CancelledError:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise

    def close(self) -> None:
        if self.loop.is_running():
            # uvloop marks its loop running before it installs its signal wake-up socket and clears the mark only
            # in the finally that follows: an interrupt raised in between (Ctrl-C's KeyboardInterrupt, a SIGTERM's
            # Terminated, both Python-level handlers) leaves a loop that can neither run nor close ("this event
            # loop is already running", "Cannot close a running event loop"). The command is on its way out
            # with that interrupt; raising here instead would replace it (exit 1, not 130). The sockets close with
            # the process.
            return
        try:
            # After Ctrl-C the level's tasks are still pending on this loop: end them first.
            pending = asyncio.all_tasks(self.loop)
            for t in pending:
                t.cancel()

            async def settle() -> None:
                await asyncio.gather(*pending, return_exceptions=True)

            self.loop.run_until_complete(settle())
            self.loop.run_until_complete(self.target.close())
        finally:
            self.loop.close()
