"""Worker processes for the commands whose work is many independent pure pieces (``bench tune``'s
simulated days, :func:`speech.sim.tune.simulate_day`): the ``--jobs`` flag and the map the pieces
run through. Results come back in order, so what a command computes does not depend on ``--jobs``.

The workers are forked (Linux: they start in milliseconds and share the parent's imports) and
ignore Ctrl-C: the parent alone turns it into exit 130, and the pieces not yet started are
cancelled.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.errors import WorkerError


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def add_jobs_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help=f"worker processes that run {what} side by side (default: the cores, {default_jobs()} here; "
                        "1: all in this process). The result does not depend on it")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def process_map(jobs: int | None) -> Iterator[tuple[Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]], int]]:
    """(a map over ``jobs`` worker processes, ``jobs``) for the block's length; the builtin ``map``,
    listed, for 1. A worker that dies is a :class:`WorkerError`."""
    jobs = default_jobs() if jobs is None else jobs
    if jobs <= 1:
        yield (lambda fn, items: list(map(fn, items))), 1
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"),
                               initializer=_ignore_sigint)

    def pmap(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        try:
            return list(pool.map(fn, items))
        except BrokenProcessPool:
            raise WorkerError(f"a worker process died (of {jobs}; killed for memory?); nothing was written: "
                              "re-run with fewer --jobs, or --jobs 1") from None

    try:
        yield pmap, jobs
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
