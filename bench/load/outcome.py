"""What one request came to, for every load engine: the closed-loop targets (``targets.py``) and the
Locust workers' clients (``eventstream.py``, ``ghttp.py``). No imports beyond the standard library,
so a Locust worker reads it without pulling httpx or boto3."""

from __future__ import annotations

from dataclasses import dataclass

REJECT_CODES = frozenset({"queue_saturated", "shed_deadline", "draining"})
"""The container's 503 error codes that mean it refused the request to protect its SLO (admission
gate, deadline shedding, drain), not that it failed."""


@dataclass
class Outcome:
    start: float
    """perf_counter() just before the request was sent."""
    end: float
    ttfab_s: float | None = None
    ok: bool = False
    rejected: bool = False
    error: str | None = None
    nbytes: int = 0
    first_chunk: bytes = b""
    """First bytes of the body (a synthetic server's send stamp lives there)."""
    first_at_mono: float | None = None
    """time.monotonic() when the first byte arrived, to compare with a server's stamp."""
