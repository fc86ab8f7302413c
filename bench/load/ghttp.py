"""The container's streaming ``POST /invocations`` on geventhttpclient, for Locust workers.

The first audio byte is stamped when it arrives (:func:`bench.load.gsocket.read_some`).

Imported only inside Locust processes: geventhttpclient is loaded by the constructor, not here.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

from bench.load.gsocket import finish, read_some, warm_resolver
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
        start = time.perf_counter()
        out = Outcome(start=start, end=start)
        resp = None
        try:
            resp = self.http.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
            if resp.status_code != 200:
                raw = resp.read()
                try:
                    code = str(json.loads(raw).get("error", "")) or f"http_{resp.status_code}"
                except (ValueError, AttributeError):
                    code = f"http_{resp.status_code}"
                out.error, out.rejected = code, resp.status_code == 503 and code in REJECT_CODES
                return out
            while data := read_some(resp):
                if out.ttfab_s is None:
                    out.ttfab_s = time.perf_counter() - start
                out.nbytes += len(data)
            out.ok = out.ttfab_s is not None
            if not out.ok:
                out.error = "empty_stream"
        except Exception as err:  # noqa: BLE001 - socket errors, timeouts, geventhttpclient's parse errors: one request must not end the run
            out.error = err.__class__.__name__
        finally:
            if resp is not None:
                finish(resp, broken=out.error is not None and not out.rejected)
            out.end = time.perf_counter()
        return out
