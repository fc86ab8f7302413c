"""One request on geventhttpclient, shared by the Locust workers' clients (:mod:`bench.load.ghttp`
for the container, :mod:`bench.load.eventstream` for SageMaker): :func:`exchange` sends it and
records every way it ends as an Outcome; each client brings only its error codes and body reader.

geventhttpclient's ``read(n)`` blocks until n bytes (or the end) have arrived, which would time the
first audio byte at the n-th; :func:`read_some` returns whatever the socket has delivered, so the
first byte is stamped when it arrives. It reads the response's buffer and socket directly
(geventhttpclient 2.6's ``_body_buffer`` and ``_sock``; the version is pinned in the lock).

Imported only inside Locust processes; gevent is loaded where it is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.load.outcome import Outcome


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


def exchange(http: Any, path: str, body: bytes, headers: dict[str, str],
             error_of: Callable[[int, bytes], tuple[str, bool]],
             read_body: Callable[[Any, Outcome], None]) -> Outcome:
    """One streamed POST on a geventhttpclient pool, recorded as an :class:`Outcome` whatever
    happens (one request must never end the run).

    A status other than 200 is ``error_of(status, body)`` = (error code, rejected by the gate).
    A 200 is read by ``read_body(resp, out)``, which stamps ``out.ttfab_s`` (seconds after
    ``out.start``) at the first audio byte, counts ``out.nbytes`` and sets ``out.error`` for an
    error inside the stream; no audio at all is ``empty_stream``. Any exception (socket errors,
    timeouts, parse errors) is its class name. The connection goes back to the pool unless the
    exchange broke part-way (:func:`finish`)."""
    start = time.perf_counter()
    out = Outcome(start=start, end=start)
    resp = None
    try:
        resp = http.request("POST", path, body=body, headers=headers)
        if resp.status_code != 200:
            out.error, out.rejected = error_of(resp.status_code, resp.read())
            return out
        read_body(resp, out)
        if out.ttfab_s is None and out.error is None:
            out.error = "empty_stream"
        out.ok = out.error is None
    except Exception as err:  # noqa: BLE001 - socket errors, timeouts, geventhttpclient's parse errors: one request must not end the run
        out.error = err.__class__.__name__
    finally:
        if resp is not None:
            finish(resp, broken=out.error is not None and not out.rejected)
        out.end = time.perf_counter()
    return out
