"""A minimal HTTP/1.1 client on raw asyncio streams, for the ladder's ``http://`` targets.

Kept apart from the targets (bench/load/targets.py) because it is a protocol implementation with its
own failure modes (see tests/bench/load/test_raw_http.py): the targets only ask it for a connection,
send a request and iterate the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterable
from typing import SupportsIndex, cast
from urllib.parse import urlsplit

from bench.errors import TargetError, UsageError


class HttpProtocolError(TargetError):
    """One HTTP exchange failed (refused connection, malformed or truncated response, timeout).

    ``code`` is the short name an Outcome records (httpx's exception names, so reports read the
    same as before); the message says what happened and where. ``no_response`` marks a request the
    server never answered at all (a kept-alive connection it had closed), which is safe to retry.
    """

    def __init__(self, code: str, message: str, no_response: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.no_response = no_response


class ArrivalReader(asyncio.StreamReader):
    """A StreamReader that notes when the event loop read each piece of a response off the socket,
    so the first body byte is timed when it arrived, not when its task next ran (in a burst of
    readable sockets every ``data_received`` runs before any waiting task does)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: list[tuple[int, float, float]] | None = None
        """(bytes fed since ``arm`` up to the end of this piece, perf_counter, monotonic)."""
        self._fed = 0

    def arm(self) -> None:
        """Start noting arrivals; the response's bytes are counted from here."""
        # StreamReader's buffer (CPython's asyncio/streams.py); typeshed does not declare it.
        self.arrivals, self._fed = [], len(self._buffer)  # type: ignore[attr-defined]

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if self.arrivals is not None:
            self._fed += len(cast(bytes, data))  # the transport feeds the bytes it read
            self.arrivals.append((self._fed, time.perf_counter(), time.monotonic()))
        super().feed_data(data)

    def arrival_of(self, offset: int) -> tuple[float, float] | None:
        """(perf_counter, monotonic) when the byte at ``offset`` (counted from ``arm``) arrived;
        stops noting arrivals."""
        arrivals, self.arrivals = self.arrivals, None
        for end, perf, mono in arrivals or ():
            if end > offset:
                return perf, mono
        return None


class Connection:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams."""

    __slots__ = ("reader", "writer", "reusable")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.reusable = True

    def alive(self) -> bool:
        return self.reusable and not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.reusable = False
        with contextlib.suppress(Exception):
            self.writer.close()


class Response:
    __slots__ = ("status", "headers", "head_len", "first_offset")

    def __init__(self, status: int, headers: dict[str, str], head_len: int) -> None:
        self.status, self.headers, self.head_len = status, headers, head_len
        self.first_offset = head_len
        """Where the first body byte sits in the response (set as body_parts yields it)."""


class RawHttpClient:
    """A minimal HTTP/1.1 client for ``http://`` URLs: one keep-alive connection per slot, requests
    with Content-Length, responses with chunked or Content-Length bodies (or read to EOF).

    It exists because a general client's per-chunk machinery (httpx/httpcore: several coroutine
    layers, events and locks per read) costs tens of microseconds per chunk and, at hundreds of
    streams, delays the loop by more than the latencies being measured. Here a chunk is one
    ``read`` on the StreamReader and the first body byte is stamped as soon as that read returns.
    """

    def __init__(self, url: str, connect_timeout_s: float = 10.0) -> None:
        u = urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise UsageError(f"{url!r}: the raw client speaks http:// only")
        self.host = u.hostname
        self.port = u.port or 80
        self.base_path = u.path.rstrip("/")
        self.host_header = u.netloc
        self.connect_timeout_s = connect_timeout_s

    async def connect(self) -> Connection:
        where = f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                loop = asyncio.get_running_loop()
                reader = ArrivalReader(limit=1 << 20, loop=loop)
                protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
                transport, _ = await loop.create_connection(lambda: protocol, self.host, self.port)
                writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        except ConnectionRefusedError:
            raise HttpProtocolError("ConnectError", f"{where} refused the connection; is the server running?") from None
        except TimeoutError:
            raise HttpProtocolError("ConnectTimeout", f"{where}: no connection within {self.connect_timeout_s:g} s") from None
        except OSError as err:
            raise HttpProtocolError("ConnectError", f"{where}: cannot connect ({err.strerror or err})") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Connection(reader, writer)

    def request_bytes(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        head = (
            f"POST {self.base_path}{path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            f"Content-Type: {content_type}\r\nAccept: */*\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body

    async def send(self, conn: Connection, data: bytes) -> Response:
        """Write a request and read the response head; the body is left on the reader."""
        if isinstance(conn.reader, ArrivalReader):
            conn.reader.arm()
        try:
            conn.writer.write(data)
            raw = await conn.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as err:
            conn.close()
            if not getattr(err, "partial", b""):
                raise HttpProtocolError(
                    "RemoteProtocolError", "the server closed the connection without a response", no_response=True
                ) from None
            raise HttpProtocolError("RemoteProtocolError", "the server closed the connection inside the response head") from None
        except asyncio.LimitOverrunError:
            conn.close()
            raise HttpProtocolError("RemoteProtocolError", "malformed response: no end of headers within 1 MiB") from None
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            conn.close()
            raise HttpProtocolError("RemoteProtocolError", f"malformed status line {lines[0][:60]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                conn.close()
                raise HttpProtocolError("RemoteProtocolError", f"malformed header line {line[:60]!r}")
            headers[name.strip().lower()] = value.strip()
        if parts[0] == "HTTP/1.0" or "close" in headers.get("connection", "").lower():
            conn.reusable = False
        return Response(int(parts[1]), headers, len(raw))

    @staticmethod
    async def body_parts(conn: Connection, resp: Response):
        """The response body as it arrives: chunked, Content-Length, or to EOF."""
        reader = conn.reader
        te = resp.headers.get("transfer-encoding", "").lower()
        pos: int | None = resp.head_len
        try:
            if "chunked" in te:
                while True:
                    line = await reader.readuntil(b"\r\n")
                    if pos is not None:
                        pos += len(line)
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        conn.close()
                        raise HttpProtocolError("RemoteProtocolError", f"malformed chunk size line {line[:40]!r}") from None
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                            pass
                        return
                    if pos is not None:
                        resp.first_offset, pos = pos, None
                    while size:
                        data = await reader.read(size)
                        if not data:
                            raise asyncio.IncompleteReadError(b"", size)
                        size -= len(data)
                        yield data
                    if (await reader.readexactly(2)) != b"\r\n":
                        conn.close()
                        raise HttpProtocolError("RemoteProtocolError", "malformed chunked body: no CRLF after a chunk")
            elif "content-length" in resp.headers:
                try:
                    left = int(resp.headers["content-length"])
                except ValueError:
                    conn.close()
                    raise HttpProtocolError("RemoteProtocolError", "malformed Content-Length") from None
                while left > 0:
                    data = await reader.read(min(left, 1 << 16))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", left)
                    left -= len(data)
                    yield data
            else:
                conn.reusable = False
                while data := await reader.read(1 << 16):
                    yield data
        except (asyncio.IncompleteReadError, ConnectionError):
            conn.close()
            raise HttpProtocolError("RemoteProtocolError", "the server closed the connection inside the response body") from None
        except asyncio.LimitOverrunError:
            conn.close()
            raise HttpProtocolError("RemoteProtocolError", "malformed chunked body: chunk size line too long") from None
