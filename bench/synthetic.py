"""A synthetic inference server whose capacity is known exactly, for testing the measurement tools.

It speaks the container contract (DESIGN.md §6): ``GET /ping``, streaming ``POST /invocations``,
the bidirectional WebSocket, 503 ``queue_saturated`` at an optional admission gate, and the stage
markers on stdout. Requests are served ``--concurrency`` at a time (default one) with a fixed
service time S to the first byte, so a closed loop of N clients sees p95 TTFAB of about N x S and
the true Q_max for an SLO is floor(SLO / S). With ``--service-ms 0 --concurrency 0`` (unlimited)
and ``--first-byte-delay-ms`` it is a null server for measuring the client itself: the first
chunk starts with the server's CLOCK_MONOTONIC send time (8-byte big-endian double) after the
``STAMP_MAGIC`` prefix, comparable with ``time.monotonic()`` in any process on the same host.

    python -m bench.synthetic --service-ms 50 --port 8080
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

STAMP_MAGIC = b"TS01"
STAMP_LEN = len(STAMP_MAGIC) + 8
START_WALL = time.time()


def stamp_bytes() -> bytes:
    return STAMP_MAGIC + struct.pack(">d", time.monotonic())


def read_stamp(chunk: bytes) -> Optional[float]:
    """The server's monotonic send time from a first chunk, or None when it carries none."""
    if len(chunk) >= STAMP_LEN and chunk.startswith(STAMP_MAGIC):
        return struct.unpack(">d", chunk[len(STAMP_MAGIC) : STAMP_LEN])[0]
    return None


def emit_stage(stage: str) -> None:
    now = time.time()
    at = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    print(json.dumps({"event": "stage", "stage": stage, "at": at, "elapsed_s": round(now - START_WALL, 3)}), flush=True)


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


@dataclass
class _State:
    cfg: SyntheticConfig
    in_system: int = 0
    sem: Optional[asyncio.Semaphore] = None
    ready: bool = False
    served: int = 0
    extra: dict = field(default_factory=dict)


def build_app(cfg: SyntheticConfig):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    st = _State(cfg)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        st.sem = asyncio.Semaphore(cfg.concurrency) if cfg.concurrency > 0 else None
        steps = ["framework_init", "weights_ready", "warmup_done"]
        for s in steps:
            await asyncio.sleep(cfg.startup_s / len(steps))
            emit_stage(s)
        st.ready = True
        emit_stage("ready")
        yield

    async def first_byte() -> Optional[str]:
        """Wait for a slot and the service time; returns an error code when refused."""
        if not st.ready:
            return "loading"
        if cfg.queue_max and st.in_system >= cfg.queue_max:
            return "queue_saturated"
        st.in_system += 1
        try:
            if cfg.first_byte_delay_ms:
                await asyncio.sleep(cfg.first_byte_delay_ms / 1000)
            if st.sem is not None:
                async with st.sem:
                    await asyncio.sleep(cfg.service_ms / 1000)
            elif cfg.service_ms:
                await asyncio.sleep(cfg.service_ms / 1000)
        finally:
            st.in_system -= 1
        return None

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
        self.proc: Optional[subprocess.Popen] = None

    def argv(self) -> list[str]:
        c = self.cfg
        return [
            sys.executable, "-m", "bench.synthetic", "--port", str(self.port),
            "--service-ms", str(c.service_ms), "--concurrency", str(c.concurrency),
            "--queue-max", str(c.queue_max), "--first-byte-delay-ms", str(c.first_byte_delay_ms),
            "--chunks", str(c.chunks), "--chunk-bytes", str(c.chunk_bytes),
            "--chunk-interval-ms", str(c.chunk_interval_ms), "--startup-s", str(c.startup_s),
        ]

    def __enter__(self) -> "SyntheticServer":
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
        prog="python -m bench.synthetic",
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
    a = p.parse_args(argv)
    if a.chunk_bytes < STAMP_LEN:
        p.error(f"--chunk-bytes must be at least {STAMP_LEN}")
    emit_stage("container_started")
    import uvicorn

    cfg = SyntheticConfig(
        service_ms=a.service_ms, concurrency=a.concurrency, queue_max=a.queue_max,
        first_byte_delay_ms=a.first_byte_delay_ms, chunks=a.chunks, chunk_bytes=a.chunk_bytes,
        chunk_interval_ms=a.chunk_interval_ms, startup_s=a.startup_s,
    )
    uvicorn.run(build_app(cfg), host=a.host, port=a.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
