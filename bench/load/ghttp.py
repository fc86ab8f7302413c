"""The container's streaming ``POST /invocations`` on geventhttpclient, for Locust workers.

The first audio byte is stamped when it arrives (:func:`bench.load.gsocket.read_some`).

Imported only inside Locust processes: geventhttpclient is loaded by the constructor, not here.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from bench.load.gsocket import exchange, read_some, warm_resolver
from bench.load.outcome import REJECT_CODES, Outcome


class HttpStream:
    """POST /invocations streamed, on a pool of keep-alive connections (one per request in flight)."""

    def __init__(self, url: str, concurrency: int = 10_000, timeout_s: float = 65.0) -> None:
        from geventhttpclient import HTTPClient

        u = urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"{url!r}: expected http://HOST:PORT or https://...")
        self.path = u.path.rstrip("/") + "/invocations"
        self.http = HTTPClient(u.hostname, port=u.port, ssl=u.scheme == "https", concurrency=concurrency,
                               connection_timeout=10.0, network_timeout=timeout_s)
        warm_resolver(u.hostname, u.port or (443 if u.scheme == "https" else 80))

    def invoke(self, body: bytes) -> Outcome:
        return exchange(self.http, self.path, body, {"Content-Type": "application/json"}, container_error, read_audio)


def container_error(status: int, raw: bytes) -> tuple[str, bool]:
    """(the container's error code, or ``http_<status>``; rejected: a 503 with a gate code)."""
    try:
        code = str(json.loads(raw).get("error", "")) or f"http_{status}"
    except (ValueError, AttributeError):
        code = f"http_{status}"
    return code, status == 503 and code in REJECT_CODES


def read_audio(resp: Any, out: Outcome) -> None:
    """The body is the audio itself: its first byte is the first audio byte."""
    while data := read_some(resp):
        if out.ttfab_s is None:
            out.ttfab_s = time.perf_counter() - out.start
        out.nbytes += len(data)
