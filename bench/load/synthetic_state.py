"""What both engines of the synthetic server share: its configuration, the lanes and admission
gate scheduled on absolute deadlines, the first-byte stamp, and the start-up's stage markers
(:mod:`bench.load.synthetic`'s docstring)."""

from __future__ import annotations

import asyncio
import heapq
import struct
import time
from dataclasses import dataclass, field

from container.markers import STAGES, emit_stage

STAMP_MAGIC = b"TS01"
STAMP_LEN = len(STAMP_MAGIC) + 8
SPIN_S = 0.0012
"""How long before a lane's deadline its handler stops sleeping and spins: ~12 % of a core at
S = 10 ms, one lane; skipped where lanes x SPIN_S would exceed a quarter of S, and for a null
server, which has no lanes."""


def stamp_bytes() -> bytes:
    return STAMP_MAGIC + struct.pack(">d", time.monotonic())


def read_stamp(chunk: bytes) -> float | None:
    """The server's monotonic send time from a first chunk, or None when it carries none."""
    if len(chunk) >= STAMP_LEN and chunk.startswith(STAMP_MAGIC):
        return struct.unpack(">d", chunk[len(STAMP_MAGIC) : STAMP_LEN])[0]
    return None


@dataclass
class SyntheticConfig:
    service_ms: float = 50.0
    """Time to the first byte once a request holds a service slot."""
    concurrency: int = 1
    """Requests served at once; 0 = unlimited (null server)."""
    queue_max: int = 0
    """Admission limit (queued + executing); 0 = no gate."""
    first_byte_delay_ms: float = 0.0
    """Extra delay before the first byte that holds no slot (a null server's 'latency')."""
    chunks: int = 3
    chunk_bytes: int = 4800
    chunk_interval_ms: float = 0.0
    """Gap between the chunks after the first one (slot already released)."""
    startup_s: float = 0.0
    """Pretend model loading time, spread over the stage markers."""
    stamp: bool = True
    engine: str = "starlette"
    """``starlette`` (uvicorn, the container's stack, with the WebSocket) or ``raw`` (asyncio streams, HTTP only)."""


@dataclass
class ServerState:
    cfg: SyntheticConfig
    in_system: int = 0
    lanes: list[float] | None = None
    """Heap of the monotonic times at which each of the ``concurrency`` service lanes is next free."""
    ready: bool = False
    served: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lanes = [0.0] * self.cfg.concurrency if self.cfg.concurrency > 0 else None

    async def first_byte(self) -> str | None:
        """Wait for a lane and the service time; returns an error code when refused.

        A lane serves its requests back to back on absolute deadlines: the first byte of the next
        request is due at max(when the lane frees, when the request asked) + S, and the handler
        sleeps until that monotonic time. The lag of each wake-up and the work of sending a
        response then delay only that response, never the lane, so Q_max is exactly SLO / S.
        """
        cfg = self.cfg
        if not self.ready:
            return "loading"
        if cfg.queue_max and self.in_system >= cfg.queue_max:
            return "queue_saturated"
        self.in_system += 1
        try:
            if cfg.first_byte_delay_ms:
                await asyncio.sleep(cfg.first_byte_delay_ms / 1000)
            now = time.monotonic()
            due = now + cfg.service_ms / 1000
            if self.lanes is None:
                if due > now:
                    await asyncio.sleep(due - now)
            elif cfg.service_ms > 0:
                due = max(heapq.heappop(self.lanes), now) + cfg.service_ms / 1000
                heapq.heappush(self.lanes, due)
                # Event-loop timers have millisecond granularity (libuv) or round up to it (epoll):
                # sleep to just short of the deadline, then spin the rest, so every first byte
                # leaves within microseconds of its deadline instead of 0-1 ms after it.
                spin = SPIN_S if cfg.concurrency * SPIN_S <= 0.25 * cfg.service_ms / 1000 else 0.0
                await asyncio.sleep(max(0.0, due - spin - time.monotonic()))
                while time.monotonic() < due:
                    pass
        finally:
            self.in_system -= 1
        return None


async def start_up(st: ServerState) -> None:
    # The container's own stages, spread over the configured start-up: the first is printed at
    # process start, the last once the server is ready.
    *steps, last = STAGES[1:]
    for s in steps:
        await asyncio.sleep(st.cfg.startup_s / len(steps))
        emit_stage(s)
    st.ready = True
    emit_stage(last)
