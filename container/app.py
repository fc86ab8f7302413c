"""Starlette app: SageMaker routes, OpenAI-compatible alias, bidirectional WebSocket."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from . import markers
from .audio import SAMPLE_RATE, wav_header
from .backends import create_backend
from .engine import Engine, Job
from .errors import (BadRequest, ContainerError, EmptyText, InvalidJSON,
                     TextTooLong, UnknownVoice, UnsupportedMediaType)
from .metrics import MetricsRecorder
from .settings import Settings

log = logging.getLogger("container.app")


class SpeechRequest(BaseModel):
    """POST /invocations and one bidirectional-stream message."""

    model_config = ConfigDict(extra="ignore")
    text: str
    voice: str | None = None
    speed: float = 1.0
    response_format: Literal["pcm", "wav"] = "pcm"
    stream: bool = True


class OpenAISpeechRequest(BaseModel):
    """POST /v1/audio/speech (OpenAI's field names; `model` is accepted and ignored)."""

    model_config = ConfigDict(extra="ignore")
    input: str
    voice: str | None = None
    speed: float = 1.0
    response_format: Literal["pcm", "wav"] = "wav"
    model: str | None = None
    stream: bool = True

    def to_speech(self) -> SpeechRequest:
        return SpeechRequest(text=self.input, voice=self.voice, speed=self.speed,
                             response_format=self.response_format, stream=self.stream)


class State:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.backend = None
        self.engine: Engine | None = None
        self.metrics = MetricsRecorder(
            settings.model_name, capacity_rps=settings.pressure_capacity_rps,
            queue_max_depth=settings.queue_max_depth, weights=settings.pressure_weights,
            window_s=settings.pressure_window_s)


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)


def validate_request(raw: bytes | str, model: type[BaseModel], st: State) -> SpeechRequest:
    """Bytes -> checked SpeechRequest; every failure is a ContainerError with a 4xx status."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest("body is not valid UTF-8", extra={"position": e.start}) from None
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise InvalidJSON(f"body is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise InvalidJSON("body must be a JSON object")
    try:
        parsed = model.model_validate(obj)
    except ValidationError as e:
        raise BadRequest(_validation_message(e)) from None
    req = parsed.to_speech() if isinstance(parsed, OpenAISpeechRequest) else parsed
    s = st.settings
    if not req.text.strip():
        raise EmptyText("text is empty")
    if len(req.text) > s.max_text_chars:
        raise TextTooLong(f"text has {len(req.text)} characters; MAX_TEXT_CHARS={s.max_text_chars}")
    if "\x00" in req.text:
        raise BadRequest("text contains NUL characters")
    if not (s.speed_min <= req.speed <= s.speed_max) or req.speed != req.speed:
        raise BadRequest(f"speed must be between {s.speed_min} and {s.speed_max}")
    voices = st.backend.voices if st.backend is not None else ()
    if req.voice is None:
        req.voice = s.default_voice if s.default_voice in voices else (voices[0] if voices else None)
    if voices and req.voice not in voices:
        raise UnknownVoice(f"unknown voice {req.voice!r}", extra={"voices": list(voices)})
    return req


def _engine(st: State) -> Engine:
    if st.engine is None:
        raise ContainerError("engine not started")
    return st.engine


def build_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()
    st = State(settings)

    async def load_model() -> None:
        engine = st.engine
        backend = st.backend
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, backend.init_framework)
            markers.emit_stage("framework_init")
            await loop.run_in_executor(None, backend.load_weights)
            markers.emit_stage("weights_ready")
            if settings.warmup:
                t0 = time.monotonic()
                await loop.run_in_executor(None, backend.warmup)
                log.info("warmup took %.2f s", time.monotonic() - t0)
            markers.emit_stage("warmup_done")
            if settings.default_voice and settings.default_voice not in backend.voices:
                log.warning("DEFAULT_VOICE %r is not one of %s", settings.default_voice, backend.voices)
            engine.ready = True
            markers.emit_stage("ready")
        except ContainerError as e:
            engine.load_error = e.detail or str(e)
            log.error("model not loaded: %s (/ping answers 503)", engine.load_error)
        except Exception as e:  # keep serving 503 rather than crash-looping the instance
            engine.load_error = f"{type(e).__name__}: {e}"
            log.exception("model not loaded (/ping answers 503)")

    async def flush_metrics() -> None:
        while True:
            await asyncio.sleep(settings.metrics_interval_s)
            st.metrics.flush()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        st.backend = create_backend(settings)
        st.engine = Engine(settings, st.backend, st.metrics)
        st.engine.start()
        loader = asyncio.create_task(load_model())
        flusher = asyncio.create_task(flush_metrics())
        try:
            yield
        finally:
            loader.cancel()
            flusher.cancel()
            await st.engine.stop()
            st.metrics.flush()

    async def ping(request: Request) -> Response:
        engine = st.engine
        if engine is None or not engine.ready or engine.draining:
            status = "draining" if engine is not None and engine.draining else (
                "error" if engine is not None and engine.load_error else "loading")
            body = {"status": status}
            if engine is not None and engine.load_error:
                body["detail"] = engine.load_error
            return JSONResponse(body, status_code=503)
        body = {"status": "ok", **st.backend.identity()}
        if settings.image_digest:
            body["image_digest"] = settings.image_digest
        return JSONResponse(body)

    async def _read_json_body(request: Request) -> bytes:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json" and not ctype.endswith("+json"):
            raise UnsupportedMediaType(f"Content-Type must be application/json, got {ctype or 'none'!r}")
        return await request.body()

    async def speak(request: Request, model: type[BaseModel]) -> Response:
        raw = await _read_json_body(request)
        req = validate_request(raw, model, st)
        engine = _engine(st)
        job = engine.submit(req.text, req.voice, req.speed, stream=req.stream)
        return await respond(job, req, engine)

    async def respond(job: Job, req: SpeechRequest, engine: Engine) -> Response:
        headers = {"X-Sample-Rate": str(SAMPLE_RATE), "X-Request-Id": job.id}
        media = "audio/wav" if req.response_format == "wav" else "audio/pcm"
        chunks = job.chunks()
        try:
            # Wait for the first chunk before sending headers, so a shed or failed request
            # still gets its proper status code instead of a truncated 200.
            first = await chunks.__anext__()
        except StopAsyncIteration:
            first = b""
        except BaseException:
            engine.cancel(job)
            raise
        if not job.stream:
            body = (wav_header(len(first)) + first) if req.response_format == "wav" else first
            headers["X-TTFAB-Ms"] = f"{job.ttfab_ms or 0:.1f}"
            return Response(body, media_type=media, headers=headers)

        async def gen():
            try:
                yield (wav_header(None) + first) if req.response_format == "wav" else first
                async for pcm in chunks:
                    yield pcm
            except ContainerError as e:
                # Headers are gone; all we can do is end the stream early and say why in the log.
                log.warning("request %s ended early: %s", job.id, e.code)
            finally:
                engine.cancel(job)

        return StreamingResponse(gen(), media_type=media, headers=headers)

    async def invocations(request: Request) -> Response:
        return await speak(request, SpeechRequest)

    async def openai_speech(request: Request) -> Response:
        return await speak(request, OpenAISpeechRequest)

    async def bidi(ws: WebSocket) -> None:
        await ws.accept()
        send_lock = asyncio.Lock()
        inbox: asyncio.Queue = asyncio.Queue()

        async def send_json(obj: dict) -> None:
            async with send_lock:
                await ws.send_text(json.dumps(obj))

        async def worker() -> None:
            seq = 0
            while True:
                raw = await inbox.get()
                if raw is None:
                    return
                seq += 1
                job = None
                try:
                    req = validate_request(raw, SpeechRequest, st)
                    job = _engine(st).submit(req.text, req.voice, req.speed, stream=True)
                    samples = 0
                    async for pcm in job.chunks():
                        samples += len(pcm) // 2
                        async with send_lock:
                            await ws.send_bytes(pcm)
                    await send_json({"type": "done", "seq": seq, "audio_s": round(samples / SAMPLE_RATE, 3),
                                     "ttfab_ms": None if job.ttfab_ms is None else round(job.ttfab_ms, 1)})
                except ContainerError as e:
                    await send_json({"type": "error", "seq": seq, "error": e.code,
                                     "detail": e.detail, **e.extra})
                finally:
                    if job is not None:
                        _engine(st).cancel(job)

        task = asyncio.create_task(worker())
        try:
            while True:
                msg = await ws.receive()
                if msg["type"] == "websocket.disconnect":
                    break
                raw = msg.get("bytes") if msg.get("bytes") is not None else msg.get("text")
                if raw is None:
                    continue
                kind = _control_type(raw)
                if kind == "ping":
                    await send_json({"type": "pong"})
                elif kind == "close":
                    await inbox.put(None)
                    await task  # finish what was asked before closing
                    await ws.close(1000)
                    return
                else:
                    await inbox.put(raw)
        except WebSocketDisconnect:
            pass
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def container_error(request: Request, exc: ContainerError) -> Response:
        return JSONResponse(exc.body(), status_code=exc.status)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return JSONResponse({"error": "internal_error"}, status_code=500)

    app = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/v1/audio/speech", openai_speech, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidi),
        ],
        lifespan=lifespan,
        exception_handlers={ContainerError: container_error, Exception: unexpected_error},
    )
    app.state.container = st
    return app


def _control_type(raw: bytes | str) -> str | None:
    """'ping' / 'close' for control messages; anything else goes to the synthesis worker,
    which reports malformed input as an error frame."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and obj.get("type") in ("ping", "close"):
        return obj["type"]
    return None
