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

What both engines share is in :mod:`bench.load.synthetic_state`; the raw engine in
:mod:`bench.load.synthetic_raw`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time

from bench.load.synthetic_raw import serve_raw
from bench.load.synthetic_state import STAMP_LEN, ServerState, SyntheticConfig, stamp_bytes, start_up
from container.markers import STAGES, emit_stage


def build_app(cfg: SyntheticConfig):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    st = ServerState(cfg)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await start_up(st)
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
