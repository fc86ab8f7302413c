"""SageMaker's bidirectional stream: WebSocket /invocations-bidirectional-stream. JSON messages
in (text or binary frames), PCM binary frames and JSON status frames out; see container/README.md."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..audio import SAMPLE_RATE
from ..errors import ContainerError
from ..limits import loads_bounded
from ..protocol import SpeechRequest
from .common import engine_of, state, submit, validate_request

log = logging.getLogger("container.routes.bidi")


def control_type(raw: bytes | str, max_depth: int) -> str | None:
    """'ping' / 'close' for control messages; anything else goes to the synthesis worker,
    which reports malformed input as an error frame."""
    try:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8")
        obj = loads_bounded(raw, max_depth)
    except (ContainerError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and obj.get("type") in ("ping", "close"):
        return obj["type"]
    return None


class _Session:
    """One WebSocket session: a receive loop and one synthesis worker answering in order."""

    def __init__(self, ws: WebSocket):
        self.ws = ws
        self.st = state(ws)
        self.send_lock = asyncio.Lock()
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.busy = False
        self.task: asyncio.Task | None = None

    async def send_json(self, obj: dict) -> None:
        async with self.send_lock:
            await self.ws.send_text(json.dumps(obj))

    async def worker(self) -> None:
        while True:
            item = await self.inbox.get()
            if item is None:
                return
            seq, req = item
            self.busy = True
            job = None
            try:
                if isinstance(req, ContainerError):
                    raise req
                job = submit(engine_of(self.st), req, stream=True)
                samples = 0
                async for pcm in job.chunks():
                    samples += len(pcm) // 2
                    async with self.send_lock:
                        await self.ws.send_bytes(pcm)
                await self.send_json({"type": "done", "seq": seq, "audio_s": round(samples / SAMPLE_RATE, 3),
                                      "ttfab_ms": None if job.ttfab_ms is None else round(job.ttfab_ms, 1)})
            except ContainerError as e:
                await self.send_json({"type": "error", "seq": seq, "error": e.code,
                                      "detail": e.detail, **e.extra})
            finally:
                self.busy = False
                if job is not None:
                    engine_of(self.st).cancel(job)

    async def shut(self, code: int, reason: str) -> None:
        """Stop work for this session, then close with a code and a reason the client sees."""
        assert self.task is not None  # run() starts the worker before anything can shut the session
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        log.info("websocket closed by server: %d %s", code, reason)
        with contextlib.suppress(Exception):
            await self.ws.close(code, reason)

    async def run(self) -> None:
        s, ws = self.st.settings, self.ws
        self.task = asyncio.create_task(self.worker())
        seq = 0
        invalid_in_a_row = 0
        try:
            while True:
                try:
                    msg = await asyncio.wait_for(ws.receive(), s.ws_idle_timeout_s)
                except TimeoutError:
                    if self.busy or not self.inbox.empty():
                        continue  # quiet client, but audio is still being made for it
                    await self.shut(1001, f"idle for {s.ws_idle_timeout_s:g} s (WS_IDLE_TIMEOUT_S)")
                    return
                if msg["type"] == "websocket.disconnect":
                    break
                raw = msg.get("bytes") if msg.get("bytes") is not None else msg.get("text")
                if raw is None:
                    continue
                kind = control_type(raw, s.max_json_depth)
                if kind == "ping":
                    await self.send_json({"type": "pong"})
                    continue
                if kind == "close":
                    await self.inbox.put(None)
                    await self.task  # finish what was asked before closing
                    await ws.close(1000)
                    return
                seq += 1
                item: SpeechRequest | ContainerError
                try:
                    item = validate_request(raw, SpeechRequest, self.st)
                    invalid_in_a_row = 0
                except ContainerError as e:
                    item = e
                    invalid_in_a_row += 1
                if self.inbox.qsize() >= s.ws_max_pending:
                    await self.shut(1008, f"more than {s.ws_max_pending} messages pending (WS_MAX_PENDING)")
                    return
                await self.inbox.put((seq, item))
                if invalid_in_a_row >= s.ws_max_invalid_messages:
                    assert isinstance(item, ContainerError)  # WS_MAX_INVALID_MESSAGES >= 1: this message was invalid
                    await self.shut(1008, f"{invalid_in_a_row} invalid messages in a row "
                                          f"(WS_MAX_INVALID_MESSAGES); last: {item.code}")
                    return
        except WebSocketDisconnect:
            pass
        finally:
            if not self.task.done():
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.task


async def bidi(ws: WebSocket) -> None:
    await ws.accept()
    await _Session(ws).run()


routes = [WebSocketRoute("/invocations-bidirectional-stream", bidi)]
