"""A synthetic inference server whose capacity is known exactly, for testing the measurement tools.

It speaks the container contract (docs/design.md §7): ``GET /ping``, streaming ``POST /invocations``,
the bidirectional WebSocket, 503 ``queue_saturated`` at an optional admission gate, and the stage
markers on stdout. Requests are served ``--concurrency`` at a time (default one) with a fixed
service time S to the first byte, so a closed loop of N clients sees p95 TTFAB of about N x S and
the true Q_max for an SLO is floor(SLO / S). Service is scheduled on absolute deadlines (a request's
first byte is due at max(previous due time, its arrival) + S on CLOCK_MONOTONIC), so the server's
own per-request overhead and timer slack never add up on top of S. With ``--service-ms 0 --concurrency 0`` (unlimited)
and ``--first-byte-delay-ms`` it is a null server for measuring the client itself: the first
chunk starts with the server's CLOCK_MONOTONIC send time (8-byte big-endian double) after the
``STAMP_MAGIC`` prefix, comparable with ``time.monotonic()`` in any process on the same host.

    python -m bench.load.synthetic --service-ms 50 --port 8080

``--engine raw`` serves the same HTTP contract (``/ping``, streaming ``/invocations``, 503 gate,
stage markers; no WebSocket) from a few dozen lines of asyncio streams instead of
starlette/uvicorn, and stamps the first chunk immediately before it is written to the socket:
a null server cheap enough that a client benchmark measures the client, not the server. It also
stands in for the SageMaker runtime API: ``POST /endpoints/<name>/invocations-response-stream``
answers in the response-stream event format (point AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME at it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

from bench.load.eventstream import EVENTSTREAM_TYPE, payload_part
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
class _State:
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


async def _startup(st: _State) -> None:
    # The container's own stages, spread over the configured start-up: the first is printed at
    # process start, the last once the server is ready.
    *steps, last = STAGES[1:]
    for s in steps:
        await asyncio.sleep(st.cfg.startup_s / len(steps))
        emit_stage(s)
    st.ready = True
    emit_stage(last)


def build_app(cfg: SyntheticConfig):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    st = _State(cfg)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await _startup(st)
        yield

    first_byte = st.first_byte

    async def ping(request: Request) -> Response:
        if not st.ready:
            return JSONResponse({"status": "loading"}, status_code=503)
        return JSONResponse(
            {"status": "ok", "backend": "synthetic", "service_ms": cfg.service_ms, "concurrency": cfg.concurrency}
        )

    async def invocations(request: Request) -> Response:
        try:
            payload = json.loads(await request.body() or b"{}")
            text = str(payload.get("text", ""))
        except (ValueError, AttributeError):
            return JSONResponse({"error": "bad_request"}, status_code=400)
        if not text:
            return JSONResponse({"error": "bad_request", "detail": "text is empty"}, status_code=400)
        err = await first_byte()
        if err:
            return JSONResponse({"error": err}, status_code=503)
        st.served += 1

        async def gen():
            # The stamp is taken as the first chunk is handed to the server, i.e. at send time.
            head = stamp_bytes() if cfg.stamp else b""
            yield head + b"\0" * (cfg.chunk_bytes - len(head))
            for _ in range(max(0, cfg.chunks - 1)):
                if cfg.chunk_interval_ms:
                    await asyncio.sleep(cfg.chunk_interval_ms / 1000)
                yield b"\0" * cfg.chunk_bytes

        return StreamingResponse(gen(), media_type="audio/pcm")

    async def bidi(ws: WebSocket) -> None:
        await ws.accept()
        seq = 0
        try:
            while True:
                msg = await ws.receive()
                if msg["type"] == "websocket.disconnect":
                    return
                raw = msg.get("bytes") or (msg.get("text") or "").encode()
                try:
                    obj = json.loads(raw)
                except ValueError:
                    await ws.send_text(json.dumps({"type": "error", "error": "bad_request"}))
                    continue
                if obj.get("type") == "ping":
                    await ws.send_text(json.dumps({"type": "pong"}))
                    continue
                seq += 1
                t0 = time.monotonic()
                err = await first_byte()
                if err:
                    await ws.send_text(json.dumps({"type": "error", "error": err, "seq": seq}))
                    continue
                st.served += 1
                head = stamp_bytes() if cfg.stamp else b""
                await ws.send_bytes(head + b"\0" * (cfg.chunk_bytes - len(head)))
                ttfab_ms = (time.monotonic() - t0) * 1000
                for _ in range(max(0, cfg.chunks - 1)):
                    if cfg.chunk_interval_ms:
                        await asyncio.sleep(cfg.chunk_interval_ms / 1000)
                    await ws.send_bytes(b"\0" * cfg.chunk_bytes)
                await ws.send_text(json.dumps({"type": "done", "seq": seq, "audio_s": 0.1 * cfg.chunks, "ttfab_ms": round(ttfab_ms, 3)}))
        except WebSocketDisconnect:
            return

    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidi),
        ],
        lifespan=lifespan,
    )


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _json_response(status: int, obj: dict, close: bool = False) -> bytes:
    body = json.dumps(obj).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{'connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    )
    return head.encode() + body


async def serve_raw(cfg: SyntheticConfig, host: str, port: int) -> None:
    """The HTTP contract on raw asyncio streams: keep-alive HTTP/1.1, requests with a
    Content-Length body, streamed responses in chunked transfer encoding."""
    st = _State(cfg)
    chunk_head = b"%x\r\n" % cfg.chunk_bytes
    filler = b"\0" * cfg.chunk_bytes
    later_chunk = chunk_head + filler + b"\r\n"
    stream_head = b"HTTP/1.1 200 OK\r\ncontent-type: audio/pcm\r\ntransfer-encoding: chunked\r\n\r\n"

    async def invocations(body: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            text = str(json.loads(body or b"{}").get("text", ""))
        except (ValueError, AttributeError):
            writer.write(_json_response(400, {"error": "bad_request"}))
            return
        if not text:
            writer.write(_json_response(400, {"error": "bad_request", "detail": "text is empty"}))
            return
        err = await st.first_byte()
        if err:
            writer.write(_json_response(503, {"error": err}))
            return
        st.served += 1
        # Headers and the first chunk go out in one write, stamped just before it.
        head = stamp_bytes() if cfg.stamp else b""
        writer.write(stream_head + chunk_head + head + filler[len(head):] + b"\r\n")
        for _ in range(max(0, cfg.chunks - 1)):
            if cfg.chunk_interval_ms:
                await asyncio.sleep(cfg.chunk_interval_ms / 1000)
            writer.write(later_chunk)
        writer.write(b"0\r\n\r\n")

    event_head = b"HTTP/1.1 200 OK\r\ncontent-type: " + EVENTSTREAM_TYPE.encode() + b"\r\ntransfer-encoding: chunked\r\n\r\n"

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n" % len(data) + data + b"\r\n"

    async def runtime_stream(body: bytes, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
        """SageMaker's InvokeEndpointWithResponseStream as the runtime API answers it: a SigV4
        Authorization header required (its form checked, not its signature), the container's
        chunks as PayloadPart events, a container error as a 424 ModelError carrying the
        container's status and body (OriginalStatusCode, OriginalMessage)."""
        auth = headers.get("authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 Credential=") or "/sagemaker/aws4_request" not in auth:
            writer.write(_json_response(403, {"message": "Missing or malformed SigV4 Authorization (service sagemaker)"}))
            return
        try:
            text = str(json.loads(body or b"{}").get("text", ""))
        except (ValueError, AttributeError):
            text = ""
        err = "bad_request" if not text else await st.first_byte()
        if err:
            status = 400 if err == "bad_request" else 503
            body = json.dumps({"ErrorCode": "CLIENT_ERROR_FROM_MODEL", "OriginalStatusCode": status,
                               "OriginalMessage": json.dumps({"error": err}),
                               "Message": f"Received client error ({status}) from primary with message"}).encode()
            writer.write(b"HTTP/1.1 424 Failed Dependency\r\ncontent-type: application/json\r\n"
                         b"x-amzn-ErrorType: ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/\r\n"
                         b"content-length: %d\r\n\r\n" % len(body) + body)
            return
        st.served += 1
        head = stamp_bytes() if cfg.stamp else b""
        writer.write(event_head + chunk(payload_part(head + filler[len(head):])))
        for _ in range(max(0, cfg.chunks - 1)):
            if cfg.chunk_interval_ms:
                await asyncio.sleep(cfg.chunk_interval_ms / 1000)
            writer.write(chunk(payload_part(filler)))
        writer.write(b"0\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                raw = await reader.readuntil(b"\r\n\r\n")
                lines = raw.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    writer.write(_json_response(400, {"error": "bad_request"}, close=True))
                    break
                method, path = parts[0], parts[1].split("?", 1)[0]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    writer.write(_json_response(400, {"error": "bad_request", "detail": "send a Content-Length body"}, close=True))
                    break
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if path == "/ping" and method == "GET":
                    if st.ready:
                        writer.write(_json_response(200, {"status": "ok", "backend": "synthetic", "engine": "raw",
                                                          "service_ms": cfg.service_ms, "concurrency": cfg.concurrency}))
                    else:
                        writer.write(_json_response(503, {"status": "loading"}))
                elif path == "/invocations" and method == "POST":
                    await invocations(body, writer)
                elif path.startswith("/endpoints/") and path.endswith("/invocations-response-stream") and method == "POST":
                    await runtime_stream(body, headers, writer)
                elif path in ("/ping", "/invocations"):
                    writer.write(_json_response(405, {"error": "method_not_allowed"}))
                else:
                    writer.write(_json_response(404, {"error": "not_found"}))
                await writer.drain()
                if parts[2] == "HTTP/1.0" or "close" in headers.get("connection", "").lower():
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port, backlog=1024)
    async with server:
        await _startup(st)
        await server.serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SyntheticServer:
    """Runs the synthetic server in its own process (so it never competes with the client for
    the GIL) on a free loopback port; a context manager that waits for ``/ping``."""

    def __init__(self, **kwargs) -> None:
        self.cfg = SyntheticConfig(**kwargs)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        c = self.cfg
        return [
            sys.executable, "-m", "bench.load.synthetic", "--port", str(self.port),
            "--service-ms", str(c.service_ms), "--concurrency", str(c.concurrency),
            "--queue-max", str(c.queue_max), "--first-byte-delay-ms", str(c.first_byte_delay_ms),
            "--chunks", str(c.chunks), "--chunk-bytes", str(c.chunk_bytes),
            "--chunk-interval-ms", str(c.chunk_interval_ms), "--startup-s", str(c.startup_s),
            "--engine", c.engine,
        ]

    def __enter__(self) -> SyntheticServer:
        import httpx

        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synthetic server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/ping", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError("synthetic server did not become ready within 20 s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.load.synthetic",
        description="Synthetic inference server with a known capacity: --concurrency requests at a time, "
        "each taking --service-ms to its first byte (true Q_max = floor(SLO / service time) at concurrency 1).",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--service-ms", type=float, default=50.0, help="time to first byte per request holding a slot (default 50)")
    p.add_argument("--concurrency", type=int, default=1, help="requests served at once; 0 = unlimited (default 1)")
    p.add_argument("--queue-max", type=int, default=0, help="admission gate depth, 503 queue_saturated beyond (default off)")
    p.add_argument("--first-byte-delay-ms", type=float, default=0.0, help="extra first-byte delay holding no slot")
    p.add_argument("--chunks", type=int, default=3, help="chunks per response (default 3)")
    p.add_argument("--chunk-bytes", type=int, default=4800)
    p.add_argument("--chunk-interval-ms", type=float, default=0.0, help="gap between later chunks")
    p.add_argument("--startup-s", type=float, default=0.0, help="pretend model loading time before ready")
    p.add_argument("--engine", choices=("starlette", "raw"), default="starlette",
                   help="starlette/uvicorn (default; has the WebSocket) or raw asyncio streams (HTTP only, cheapest)")
    a = p.parse_args(argv)
    if a.chunk_bytes < STAMP_LEN:
        p.error(f"--chunk-bytes must be at least {STAMP_LEN}")
    emit_stage(STAGES[0])
    cfg = SyntheticConfig(
        service_ms=a.service_ms, concurrency=a.concurrency, queue_max=a.queue_max,
        first_byte_delay_ms=a.first_byte_delay_ms, chunks=a.chunks, chunk_bytes=a.chunk_bytes,
        chunk_interval_ms=a.chunk_interval_ms, startup_s=a.startup_s, engine=a.engine,
    )
    if a.engine == "raw":
        try:
            import uvloop
        except ImportError:
            asyncio.run(serve_raw(cfg, a.host, a.port))
        else:
            uvloop.run(serve_raw(cfg, a.host, a.port))
        return 0
    import uvicorn

    uvicorn.run(build_app(cfg), host=a.host, port=a.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
