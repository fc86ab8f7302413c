"""An open-loop schedule (when each request is due, which body it sends) and its split across workers.

Shared by both replay engines: the asyncio one sends the whole schedule from one process; the
Locust one (bench/load/locust_engine.py, bench/load/locustfile.py) has its master split it into
independent thinnings, one per worker, and send each worker its share over Locust's messaging.
numpy only: Locust workers import this, and nothing here may pull in the heavy parts of bench.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

THINNING_STREAM = 0x7E57
"""Mixed into the seed for the worker split, so it is independent of the trace's own draws."""


def texts_for(sizes: np.ndarray | None, count: int, pool_texts: Sequence[str]) -> list[str]:
    """One text per request: cycling the pool, or by size rank when the trace has sizes (the
    shortest texts for the smallest requests)."""
    pool = sorted(pool_texts, key=len)
    if sizes is None or sizes.size == 0:
        return [pool[i % len(pool)] for i in range(count)]
    ranks = np.argsort(np.argsort(sizes, kind="stable"), kind="stable") / max(1, sizes.size - 1)
    return [pool[min(len(pool) - 1, int(r * len(pool)))] for r in ranks]


@dataclass
class Schedule:
    times_s: np.ndarray
    """Due time of each request after the start, ascending."""
    body_ids: np.ndarray
    """Index into ``bodies`` per request."""
    bodies: list[bytes]
    """Distinct request bodies (JSON), each sent as is."""
    spec: str = ""
    seed: int = 0
    duration_s: float = 0.0

    @classmethod
    def of(cls, times_s: np.ndarray, texts: Sequence[str], body_of, *, spec: str = "", seed: int = 0,
           duration_s: float = 0.0) -> Schedule:
        distinct: dict[str, int] = {}
        ids = np.fromiter((distinct.setdefault(t, len(distinct)) for t in texts), dtype=np.int32, count=len(texts))
        bodies = [body_of(t) for t in distinct]
        return cls(np.asarray(times_s, dtype=np.float64), ids, bodies, spec, seed, duration_s)

    def save(self, path: Path) -> Path:
        meta = {"spec": self.spec, "seed": self.seed, "duration_s": self.duration_s,
                "bodies": [b.decode("utf-8") for b in self.bodies]}
        with open(path, "wb") as f:
            np.savez(f, times_s=self.times_s, body_ids=self.body_ids, meta=np.array(json.dumps(meta)))
        return path

    @classmethod
    def load(cls, path: Path) -> Schedule:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return cls(z["times_s"].astype(np.float64), z["body_ids"].astype(np.int32),
                       [b.encode("utf-8") for b in meta["bodies"]], meta["spec"], int(meta["seed"]), float(meta["duration_s"]))

    def split(self, workers: int, seed: int) -> list[np.ndarray]:
        """Request indices per worker: each request goes to a worker drawn uniformly at random
        (seeded), so each share is an independent thinning of the same traffic (a Poisson stream
        thinned this way stays Poisson at 1/workers of the rate) rather than every k-th request."""
        if workers < 1:
            raise ValueError("workers must be >= 1")
        who = np.random.default_rng([seed, THINNING_STREAM]).integers(0, workers, size=self.times_s.size)
        return [np.flatnonzero(who == w) for w in range(workers)]


def request_body(text: str) -> bytes:
    """The container contract's request, as the asyncio engine sends it."""
    from bench.load.targets import payload

    return json.dumps(payload(text)).encode()


def schedule_from_spec(spec: str, seed: int, duration_s: float | None, mix: str) -> Schedule:
    """For the shipped locustfile run by plain ``locust`` (no ``bench replay`` to build the schedule)."""
    from bench.load.ladder import MIXES
    from bench.load.traces import load_trace

    trace = load_trace(spec)
    times, sizes = trace.request_times(seed=seed, duration_s=duration_s)
    return Schedule.of(times, texts_for(sizes, times.size, MIXES[mix]), request_body, spec=trace.spec, seed=seed,
                       duration_s=float(duration_s or trace.duration_s))
