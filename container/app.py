"""Starlette app: SageMaker routes, the OpenAI-compatible speech API, bidirectional WebSocket."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from . import markers
from . import voices as voices_mod
from .audio import SAMPLE_RATE
from .backends import create_backend
from .encode import MEDIA_TYPES, ResponseFormat, encode_all, make_encoder
from .engine import Engine, Job
from .errors import (BadRequest, ContainerError, EmptyText, InvalidJSON, MethodNotAllowed, NotAcceptable,
                     ModelNotFound, ModelUnavailable, NotFound, TextTooLong, UnsupportedMediaType)
from .limits import check_content_length, loads_bounded, read_limited
from .metrics import MetricsRecorder
from .settings import Settings

log = logging.getLogger("container.app")
# /v1/models "created": when this process started (the models are not versioned by date here).
CREATED = int(time.time())


class SpeechRequest(BaseModel):
    """POST /invocations and one bidirectional-stream message (the stream always sends PCM)."""

    model_config = ConfigDict(extra="ignore")
    text: str
    voice: str | None = None
    speed: float = 1.0
    response_format: ResponseFormat = "pcm"
    stream: bool = True


class VoiceRef(BaseModel):
    """OpenAI's custom-voice form, `{"id": "..."}`; the id is looked up like a voice name."""

    model_config = ConfigDict(extra="ignore")
    id: str


class OpenAISpeechRequest(BaseModel):
    """POST /v1/audio/speech with OpenAI's fields. `instructions` is accepted and ignored (Kokoro
    takes no style prompt); `stream` (ours, default true) false waits for the whole utterance."""

    model_config = ConfigDict(extra="ignore")
    input: str
    model: str | None = None
    voice: str | VoiceRef | None = None
    speed: float = 1.0
    response_format: ResponseFormat = "mp3"
    stream_format: Literal["audio", "sse"] = "audio"
    instructions: str | None = None
    stream: bool = True

    def to_speech(self) -> SpeechRequest:
        voice = self.voice.id if isinstance(self.voice, VoiceRef) else self.voice
        return SpeechRequest(text=self.input, voice=voice, speed=self.speed,
                             response_format=self.response_format, stream=self.stream)


class State:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.backend = None
        self.engine: Engine | None = None
        self.metrics = MetricsRecorder(
            settings.model_name, capacity_rps=settings.pressure_capacity_rps,
            queue_max_depth=settings.queue_max_depth, weights=settings.pressure_weights,
            window_s=settings.pressure_window_s, endpoint_name=settings.endpoint_name,
            variant_name=settings.variant_name)
        self._aliases: dict[str, str] | None = None

    @property
    def voices(self) -> tuple[str, ...]:
        return self.backend.voices if self.backend is not None else ()

    @property
    def default_voice(self) -> str | None:
        return voices_mod.default_voice(self.voices, self.settings.default_voice)

    @property
    def blends(self) -> bool:
        return bool(self.backend is not None and self.backend.supports_blends)

    def aliases(self) -> dict[str, str]:
        """OpenAI voice name -> canonical voice on this backend (fixed once the model is loaded)."""
        ready = self.engine is not None and self.engine.ready
        if self._aliases is not None and ready:
            return self._aliases
        table = voices_mod.resolve_alias_table(
            voices_mod.effective_aliases(self.settings.openai_voices), self.voices,
            self.default_voice, self.blends)
        if ready:
            self._aliases = table
        return table

    def model_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.settings.model_name, *self.settings.openai_models)))


def _validation_error(e: ValidationError) -> BadRequest:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg')}")
    first = e.errors()[0].get("loc", ()) if e.errors() else ()
    return BadRequest("; ".join(parts), param=str(first[0]) if first else None)


def validate_request(raw: bytes | str, model: type[BaseModel], st: State) -> SpeechRequest:
    """Bytes -> checked SpeechRequest with a canonical voice; every failure is a 4xx ContainerError."""
    s = st.settings
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest("body is not valid UTF-8", extra={"position": e.start}) from None
    obj = loads_bounded(raw, s.max_json_depth)
    if not isinstance(obj, dict):
        raise InvalidJSON("body must be a JSON object")
    try:
        parsed = model.model_validate(obj)
    except ValidationError as e:
        raise _validation_error(e) from None
    openai = isinstance(parsed, OpenAISpeechRequest)
    text_field = "input" if openai else "text"
    if openai:
        if parsed.model is not None and parsed.model not in st.model_ids():
            raise ModelNotFound(f"model {parsed.model[:80]!r} does not exist here; use one of "
                                f"{', '.join(st.model_ids())}", param="model")
        if parsed.stream_format == "sse":
            raise BadRequest("stream_format 'sse' is not supported; use 'audio' (the default), which "
                             "streams the encoded audio itself", param="stream_format")
    req = parsed.to_speech() if openai else parsed
    if not req.text.strip():
        raise EmptyText(f"{text_field} is empty", param=text_field)
    if len(req.text) > s.max_text_chars:
        raise TextTooLong(f"{text_field} has {len(req.text)} characters; MAX_TEXT_CHARS={s.max_text_chars}",
                          param=text_field)
    if "\x00" in req.text:
        raise BadRequest(f"{text_field} contains NUL characters", param=text_field)
    if not (s.speed_min <= req.speed <= s.speed_max) or req.speed != req.speed:
        raise BadRequest(f"speed must be between {s.speed_min} and {s.speed_max}", param="speed")
    req.voice = voices_mod.resolve_voice(req.voice, available=st.voices, aliases=st.aliases(),
                                         fallback=st.default_voice, blends=st.blends)
    return req


ACCEPT_FORMATS: dict[str, ResponseFormat] = {**{media.split(";")[0]: fmt for fmt, media in MEDIA_TYPES.items()},
                                              "audio/x-wav": "wav", "audio/wave": "wav", "audio/ogg": "opus"}
"""Accept media types an asynchronous request may name, to the response format that answers them."""


def format_for_accept(accept: str | None) -> ResponseFormat:
    """The first audio format the Accept header names (WAV for none, ``*/*`` or ``audio/*``);
    406 when it names only formats this server cannot produce."""
    if not accept or not accept.strip():
        return "wav"
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("*/*", "audio/*"):
            return "wav"
        if media in ACCEPT_FORMATS:
            return ACCEPT_FORMATS[media]
    raise NotAcceptable(f"Accept {accept[:120]!r} names no format this server produces; use one of "
                        f"{', '.join(sorted(ACCEPT_FORMATS))} (or omit it for audio/wav)", param="Accept")


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
            # After the drain: worker processes (TORCH_WORKERS) stop only once nothing needs them.
            await asyncio.get_running_loop().run_in_executor(None, st.backend.close)
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
        limit = settings.max_body_bytes
        check_content_length(request.headers.get("content-length"), limit)
        return await read_limited(request.stream(), limit)

    async def speak(request: Request, model: type[BaseModel]) -> Response:
        raw = await _read_json_body(request)
        req = validate_request(raw, model, st)
        engine = _engine(st)
        job = engine.submit(req.text, req.voice, req.speed, stream=req.stream)
        return await respond(job, req, engine, request)

    async def cancel_on_disconnect(request: Request, engine: Engine, job: Job) -> None:
        """The body is read, so the next ASGI message is the client going away (or the response
        ending): free the admission slot then, not when the next segment would have been sent."""
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                if not job.finished:
                    log.info("request %s: client disconnected, cancelled", job.id)
                    engine.cancel(job)
                return

    async def respond(job: Job, req: SpeechRequest, engine: Engine, request: Request) -> Response:
        headers = {"X-Sample-Rate": str(SAMPLE_RATE), "X-Request-Id": job.id}
        media = MEDIA_TYPES[req.response_format]
        watcher = asyncio.create_task(cancel_on_disconnect(request, engine, job))
        chunks = job.chunks()
        try:
            # Wait for the first chunk before sending headers, so a shed or failed request
            # still gets its proper status code instead of a truncated 200.
            first = await chunks.__anext__()
        except StopAsyncIteration:
            first = b""
        except BaseException:
            watcher.cancel()
            engine.cancel(job)
            raise
        if not job.stream:
            watcher.cancel()
            body = await asyncio.to_thread(encode_all, req.response_format, first)
            headers["X-TTFAB-Ms"] = f"{job.ttfab_ms or 0:.1f}"
            return Response(body, media_type=media, headers=headers)
        encoder = make_encoder(req.response_format, streaming=True)

        async def gen():
            try:
                out = await asyncio.to_thread(encoder.feed, first)
                if out:
                    yield out
                async for pcm in chunks:
                    out = await asyncio.to_thread(encoder.feed, pcm)
                    if out:
                        yield out
                out = await asyncio.to_thread(encoder.finish)
                if out:
                    yield out
            except ContainerError as e:
                # Headers are gone; all we can do is end the stream early and say why in the log.
                log.warning("request %s ended early: %s", job.id, e.code)
            finally:
                watcher.cancel()
                engine.cancel(job)
                # close waits for an encode still running in its thread; never on the event loop.
                asyncio.get_running_loop().run_in_executor(None, encoder.close)

        return StreamingResponse(gen(), media_type=media, headers=headers)

    async def invocations(request: Request) -> Response:
        if not st.settings.async_inference:
            return await speak(request, SpeechRequest)
        # An asynchronous endpoint: SageMaker stores whatever body comes back, so send one whole
        # file with its real sizes in the header, in the format the request or Accept names.
        raw = await _read_json_body(request)
        req = validate_request(raw, SpeechRequest, st)
        if "response_format" not in req.model_fields_set:
            req.response_format = format_for_accept(request.headers.get("accept"))
        req.stream = False
        engine = _engine(st)
        job = engine.submit(req.text, req.voice, req.speed, stream=False)
        return await respond(job, req, engine, request)

    async def openai_speech(request: Request) -> Response:
        return await speak(request, OpenAISpeechRequest)

    def _model_card(model_id: str) -> dict:
        return {"id": model_id, "object": "model", "created": CREATED, "owned_by": "speech-endpoints"}

    async def list_models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_card(m) for m in st.model_ids()]})

    async def get_model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id not in st.model_ids():
            raise ModelNotFound(f"model {model_id[:80]!r} does not exist here; use one of "
                                f"{', '.join(st.model_ids())}", param="model")
        return JSONResponse(_model_card(model_id))

    async def list_voices(request: Request) -> Response:
        engine = st.engine
        if engine is None or not engine.ready:
            raise ModelUnavailable(engine.load_error if engine is not None and engine.load_error
                                   else "model is loading")
        return JSONResponse({"voices": list(st.voices), "default": st.default_voice,
                             "aliases": st.aliases(), "blends": st.blends})

    async def bidi(ws: WebSocket) -> None:
        await ws.accept()
        send_lock = asyncio.Lock()
        inbox: asyncio.Queue = asyncio.Queue()
        busy = False

        async def send_json(obj: dict) -> None:
            async with send_lock:
                await ws.send_text(json.dumps(obj))

        async def worker() -> None:
            nonlocal busy
            while True:
                item = await inbox.get()
                if item is None:
                    return
                seq, req = item
                busy = True
                job = None
                try:
                    if isinstance(req, ContainerError):
                        raise req
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
                    busy = False
                    if job is not None:
                        _engine(st).cancel(job)

        task = asyncio.create_task(worker())

        async def shut(code: int, reason: str) -> None:
            """Stop work for this session, then close with a code and a reason the client sees."""
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            log.info("websocket closed by server: %d %s", code, reason)
            with contextlib.suppress(Exception):
                await ws.close(code, reason)

        seq = 0
        invalid_in_a_row = 0
        try:
            while True:
                try:
                    msg = await asyncio.wait_for(ws.receive(), settings.ws_idle_timeout_s)
                except TimeoutError:
                    if busy or not inbox.empty():
                        continue  # quiet client, but audio is still being made for it
                    await shut(1001, f"idle for {settings.ws_idle_timeout_s:g} s (WS_IDLE_TIMEOUT_S)")
                    return
                if msg["type"] == "websocket.disconnect":
                    break
                raw = msg.get("bytes") if msg.get("bytes") is not None else msg.get("text")
                if raw is None:
                    continue
                kind = _control_type(raw, settings.max_json_depth)
                if kind == "ping":
                    await send_json({"type": "pong"})
                    continue
                if kind == "close":
                    await inbox.put(None)
                    await task  # finish what was asked before closing
                    await ws.close(1000)
                    return
                seq += 1
                try:
                    item = validate_request(raw, SpeechRequest, st)
                    invalid_in_a_row = 0
                except ContainerError as e:
                    item = e
                    invalid_in_a_row += 1
                if inbox.qsize() >= settings.ws_max_pending:
                    await shut(1008, f"more than {settings.ws_max_pending} messages pending (WS_MAX_PENDING)")
                    return
                await inbox.put((seq, item))
                if invalid_in_a_row >= settings.ws_max_invalid_messages:
                    await shut(1008, f"{invalid_in_a_row} invalid messages in a row "
                                     f"(WS_MAX_INVALID_MESSAGES); last: {item.code}")
                    return
        except WebSocketDisconnect:
            pass
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _is_openai(request: Request) -> bool:
        return request.url.path.startswith("/v1/")

    def _error_response(request: Request, exc: ContainerError) -> Response:
        headers = dict(exc.headers)
        if exc.status == 503 and exc.code in ("queue_saturated", "shed_deadline"):
            headers.setdefault("Retry-After", "1")
        body = exc.openai_body() if _is_openai(request) else exc.body()
        return JSONResponse(body, status_code=exc.status, headers=headers)

    async def container_error(request: Request, exc: ContainerError) -> Response:
        return _error_response(request, exc)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            err: ContainerError = NotFound(f"no route {request.url.path[:200]!r}")
        elif exc.status_code == 405:
            err = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path[:200]!r}",
                                   headers=dict(exc.headers or {}))
        else:
            err = ContainerError(str(exc.detail))
            err.status, err.code = exc.status_code, "http_error"
        return _error_response(request, err)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return _error_response(request, ContainerError("internal error; see the server log"))

    app = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/v1/audio/speech", openai_speech, methods=["POST"]),
            Route("/v1/audio/voices", list_voices, methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidi),
        ],
        lifespan=lifespan,
        exception_handlers={ContainerError: container_error, HTTPException: http_error,
                            Exception: unexpected_error},
    )
    app.state.container = st
    return app


def _control_type(raw: bytes | str, max_depth: int) -> str | None:
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
