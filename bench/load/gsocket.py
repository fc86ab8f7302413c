"""Reading a geventhttpclient response as it arrives, shared by the Locust workers' clients
(:mod:`bench.load.ghttp` for the container, :mod:`bench.load.eventstream` for SageMaker).

geventhttpclient's ``read(n)`` blocks until n bytes (or the end) have arrived, which would time the
first audio byte at the n-th; :func:`read_some` returns whatever the socket has delivered, so the
first byte is stamped when it arrives. It reads the response's buffer and socket directly
(geventhttpclient 2.6's ``_body_buffer`` and ``_sock``; the version is pinned in the lock).

Imported only inside Locust processes; gevent is loaded where it is used.
"""

from __future__ import annotations

from typing import Any


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
