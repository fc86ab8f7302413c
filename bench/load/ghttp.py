"""The container's streaming ``POST /invocations`` on geventhttpclient, for Locust workers.

geventhttpclient's ``read(n)`` blocks until n bytes (or the end) have arrived, which would time the
first audio byte at the n-th; :func:`read_some` returns whatever the socket has delivered, so the
first byte is stamped when it arrives. It reads the response's buffer and socket directly
(geventhttpclient 2.6's ``_body_buffer`` and ``_sock``; the version is pinned in the lock).

Imported only inside Locust processes: geventhttpclient is loaded by the constructor, not here.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from bench.load.eventstream import REJECT_CODES, StreamResult


def read_some(resp: Any, size: int = 1 << 16) -> bytes:
    """The body bytes that have arrived (waiting for at least one), or b"" at the end."""
    buf = resp._body_buffer
    while not buf and not resp.message_complete:
        sock = resp._sock
        if sock is None:
            break
        data = sock.recv(size)
        resp.feed(data)
        if not data:
            if not resp.message_complete:
                raise ConnectionError("the server closed the connection inside the response body")
            break
    out = bytes(buf)
    del buf[:]
    return out


def warm_resolver(host: str, port: int) -> None:
    """Resolve the host once before the run: gevent's resolver starts its thread pool on first use,
    a stall that would otherwise delay the first requests' send times."""
    import gevent.socket

    try:
        gevent.socket.getaddrinfo(host, port)
    except OSError:
        pass  # the requests will report it, one by one


def finish(resp: Any, broken: bool) -> None:
    """Give the connection back to the pool, or close it when the exchange failed part-way (its
    socket may still hold the rest of a response)."""
    pool, sock = getattr(resp, "_pool", None), getattr(resp, "_sock", None)
    if broken and pool is not None and sock is not None and not resp.message_complete:
        resp._sock = resp._pool = None
        pool.release_socket(sock)
    else:
        resp.release()


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

    def invoke(self, body: bytes) -> StreamResult:
        start = time.perf_counter()
        out = StreamResult(start=start, end=start)
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
        except (OSError, TimeoutError) as err:
            out.error = err.__class__.__name__
        except Exception as err:  # noqa: BLE001 - geventhttpclient's parse errors; one request must not end the run
            out.error = err.__class__.__name__
        finally:
            if resp is not None:
                finish(resp, broken=out.error is not None and not out.rejected)
            out.end = time.perf_counter()
        return out
