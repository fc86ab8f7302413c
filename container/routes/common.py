"""What the protocol routes share: reading and validating a body, answering with audio (whole
or streamed), and turning errors into each protocol's error shape."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .. import readings, ssml
from .. import voices as voices_mod
from ..audio import SAMPLE_RATE
from ..backends.g2p import LANG_CODES, resolve_lang
from ..encode import MEDIA_TYPES, ResponseFormat, encode_all, make_encoder
from ..engine import Engine, Job
from ..errors import (
    BadRequest,
    ClientGone,
    ContainerError,
    EmptyText,
    InvalidJSON,
    MethodNotAllowed,
    ModelNotFound,
    NotAcceptable,
    NotFound,
    TextTooLong,
    UnsupportedMediaType,
)
from ..limits import check_content_length, loads_bounded, read_limited
from ..protocol import OpenAISpeechRequest, SpeechRequest
from ..state import State

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("container.routes")

# Paths whose errors take OpenAI's shape ({"error": {"message", "type", "param", "code"}}).
OPENAI_PREFIXES = ("/v1/", "/dev/")


def state(conn: HTTPConnection) -> State:
    return conn.app.state.container


def engine_of(st: State) -> Engine:
    if st.engine is None:
        raise ContainerError("engine not started")
    return st.engine


def _validation_error(e: ValidationError, model: type[BaseModel]) -> BadRequest:
    errors = e.errors()
    unknown = [err["loc"] for err in errors if err.get("type") == "extra_forbidden" and err.get("loc")]
    if unknown:
        loc = unknown[0]
        name = str(loc[-1])[:60]
        if len(loc) == 1:
            names = ", ".join(repr(str(x[-1])[:60]) for x in unknown[:5])
            return BadRequest(f"unknown field{'s' if len(unknown) > 1 else ''} {names}; this route takes "
                              f"{', '.join(model.model_fields)}", param=name)
        # nested (OpenAI's voice object): loc is (field, union member, name)
        return BadRequest(f"unknown field {name!r} in {loc[0]}", param=name)
    parts = []
    for err in errors[:5]:
        where = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{where}: {err.get('msg')}")
    first = errors[0].get("loc", ()) if errors else ()
    return BadRequest("; ".join(parts), param=str(first[0]) if first else None)


def validate_request(raw: bytes | str, model: type[SpeechRequest] | type[OpenAISpeechRequest], st: State) -> SpeechRequest:
    """Bytes -> checked SpeechRequest with a canonical voice; every failure is a 4xx ContainerError."""
    s = st.settings
    parsed = parse_model(raw, model, st)
    openai = isinstance(parsed, OpenAISpeechRequest)
    text_field = "input" if openai else "text"
    if isinstance(parsed, OpenAISpeechRequest) and parsed.model is not None:
        check_model(parsed.model, st)
    req: SpeechRequest = parsed.to_speech() if isinstance(parsed, OpenAISpeechRequest) else parsed
    check_text(req.text, text_field, s)
    check_speed(req.speed, s)
    req._lang, warning = resolve_lang(req.lang_code)
    if warning:
        req._warnings.append(warning)
    asked, rate = aliased(req.voice, req._voice_aliases)
    req._voice_rate = rate or 1.0
    if req._ssml:
        req.text = ssml.translate(req.text, asked or st.default_voice or "")
        check_text(req.text, text_field, s)
    req.voice = resolve(asked, st, req._warnings)
    if req._tags:
        req._voice_map = tag_voices(req.text, req._voice_aliases, st, req._warnings)
    if req.lang_code is None:
        # Kokoro-FastAPI's rule: without lang_code the voice's first letter picks the language
        # (bf_emma speaks British English), where this image has that language's G2P. Letters
        # whose G2P the image lacks (j, z) keep G2P_LANGUAGE: the packaged Japanese voices are
        # there to speak English.
        req._lang = LANG_CODES.get(voices_mod.voice_letter(asked or req.voice, st.preferred_voices()) or "")
    check_scripts(req)
    return req


DATED_MODEL = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def check_model(model: str, st: State) -> None:
    """A model id this server answers to: MODEL_NAME, OPENAI_MODELS, or one of them with OpenAI's
    date suffix (gpt-4o-mini-tts-2025-12-15): the same model here, whatever the snapshot."""
    if model in st.model_ids() or DATED_MODEL.sub("", model) in st.model_ids():
        return
    raise ModelNotFound(f"model {model[:80]!r} does not exist here; use one of "
                        f"{', '.join(st.model_ids())} (a date suffix like -2025-12-15 is accepted)", param="model")


def aliased(voice: str | None, table: dict) -> tuple[str | None, float | None]:
    """A voice_aliases name (case-insensitive) -> (the voice it names, its rate); else as given."""
    if voice is None:
        return None, None
    hit = table.get(voice.strip().lower())
    return (hit[0], hit[1]) if hit else (voice, None)


def tag_voices(text: str, table: dict, st: State, notes: list[str]) -> dict[str, tuple[str, float | None]]:
    """Every [voice:name] in the text -> (voice id, rate): resolved before the job starts, so an
    unknown name is this request's 400 and not a failure halfway through the audio."""
    out: dict[str, tuple[str, float | None]] = {}
    for m in readings.CONTROL_TAG.finditer(text):
        name = m.group("voice")
        if name is None or name.strip().lower() in out:
            continue
        target, rate = aliased(name.strip(), table)
        voice = resolve(target, st, notes)
        assert voice is not None  # resolve answers a voice for a non-empty name (or raises)
        out[name.strip().lower()] = (voice, rate)
    return out


def check_scripts(req: SpeechRequest) -> None:
    """Characters an English voice cannot read (Chinese, Japanese, ...) are dropped by
    normalization; the Warning names the language and the voices that would read it."""
    if not (req._lang or "en").startswith("en"):
        return
    for script in readings.foreign_scripts(req.text):
        language, voice = readings.FOREIGN_SCRIPTS[script]
        note = f"{language} text ({script} script) skipped: an English voice cannot read it; use {voice}"
        if note not in req._warnings:
            req._warnings.append(note)


def check_text(text: str, field: str, s) -> None:
    if not text.strip():
        raise EmptyText(f"{field} is empty", param=field)
    if len(text) > s.max_text_chars:
        raise TextTooLong(f"{field} has {len(text)} characters and the limit is {s.max_text_chars} "
                          f"(MAX_TEXT_CHARS): split it at sentence ends into requests of at most "
                          f"{s.max_text_chars} characters, or raise MAX_TEXT_CHARS on the server",
                          param=field, extra={"limit_chars": s.max_text_chars})
    if "\x00" in text:
        raise BadRequest(f"{field} contains NUL characters", param=field)


def check_speed(speed: float, s) -> None:
    if not (s.speed_min <= speed <= s.speed_max) or speed != speed:
        raise BadRequest(f"speed must be between {s.speed_min} and {s.speed_max}", param="speed")


def resolve(voice: str | None, st: State, notes: list[str] | None = None) -> str | None:
    """The canonical voice for a request's `voice`; with `notes`, a Kokoro name the weights lack
    speaks the closest voice (VOICE_FALLBACK=closest) and notes gets the Warning's sentence."""
    return voices_mod.resolve_voice(voice, available=st.voices, aliases=st.aliases(),
                                    fallback=st.default_voice, blends=st.blends,
                                    substitute=notes is not None and st.settings.voice_fallback == "closest",
                                    notes=notes, preferred=st.preferred_voices())


def parse_json(raw: bytes | str, st: State):
    """Bytes -> the JSON value (bounded depth); invalid UTF-8 or JSON is a 400."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest("body is not valid UTF-8", extra={"position": e.start}) from None
    return loads_bounded(raw, st.settings.max_json_depth)


def parse_model(raw: bytes | str, model: type[M], st: State) -> M:
    """Bytes -> a validated `model` (any request model); every failure a 4xx ContainerError."""
    obj = parse_json(raw, st)
    if not isinstance(obj, dict):
        raise InvalidJSON("body must be a JSON object")
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise _validation_error(e, model) from None


def warning_header(warnings: list[str]) -> dict[str, str]:
    """RFC 9111's Warning field (code 299, "miscellaneous persistent warning"): what a request
    asked for that this server accepted but could not do as asked. Quotes and line breaks
    are replaced so the header stays one valid quoted string."""
    if not warnings:
        return {}
    text = "; ".join(w.replace('"', "'").replace("\\", "/").replace("\n", " ") for w in warnings)
    return {"Warning": f'299 speech-endpoints "{text[:1500]}"'}


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


async def read_json_body(request: Request) -> bytes:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise UnsupportedMediaType(f"Content-Type must be application/json, got {ctype or 'none'!r}")
    limit = cast(int, state(request).settings.max_body_bytes)  # Settings fills it from MAX_TEXT_CHARS when not set
    check_content_length(request.headers.get("content-length"), limit)
    try:
        return await read_limited(request.stream(), limit)
    except ClientDisconnect:
        log.info("client disconnected before its body was complete")
        raise ClientGone("client disconnected before the body was complete") from None


def submit(engine: Engine, req: SpeechRequest, stream: bool | None = None, timestamps: bool = False) -> Job:
    """The engine job for a validated request, with its language, normalization and volume."""
    return engine.submit(req.text, req.voice, req.speed, stream=req.stream if stream is None else stream,
                         timestamps=timestamps, lang=req._lang, normalization=req.normalization_options,
                         volume=1.0 if req.volume_multiplier is None else req.volume_multiplier,
                         tags=req._tags, voice_map=req._voice_map, voice_rate=req._voice_rate)


async def speak(request: Request, model: type[BaseModel]) -> Response:
    st = state(request)
    req = validate_request(await read_json_body(request), cast("type[SpeechRequest] | type[OpenAISpeechRequest]", model), st)
    engine = engine_of(st)
    job = submit(engine, req)
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


async def first_chunk(job: Job, engine: Engine, watcher: asyncio.Task):
    """The job's first item, before any header is sent, so a shed or failed request still gets
    its real status code instead of a truncated 200. None when the job yields nothing."""
    chunks = job.chunks()
    try:
        return chunks, await chunks.__anext__()
    except StopAsyncIteration:
        return chunks, None
    except BaseException:
        watcher.cancel()
        engine.cancel(job)
        raise


def timing_chunks(job: Job) -> list[dict]:
    """Kokoro-FastAPI's timing sidecar entries: each segment's text (a pause's is ""), start and
    end in seconds of the audio."""
    out, at = [], 0
    for text, n in zip(job.segments, job.released, strict=False):
        out.append({"text": text, "start": round(at / SAMPLE_RATE, 3), "end": round((at + n) / SAMPLE_RATE, 3)})
        at += n
    return out


def sse_event(kind: str, **fields: Any) -> bytes:
    """One server-sent event of OpenAI's speech stream (stream_format=sse)."""
    return f"data: {json.dumps({'type': kind, **fields})}\n\n".encode()


async def respond(job: Job, req: SpeechRequest, engine: Engine, request: Request) -> Response:
    headers = {"X-Sample-Rate": str(SAMPLE_RATE), "X-Request-Id": job.id, **warning_header(req._warnings),
               # the G2P language spoken (lang_code, else the voice's letter, else G2P_LANGUAGE)
               "Content-Language": req._lang or state(request).settings.g2p_language}
    media = MEDIA_TYPES[req.response_format]
    downloads = state(request).downloads if req._download_format else None
    download = downloads.reserve(req._download_format) if downloads is not None and req._download_format else None
    if download is not None:
        # Kokoro-FastAPI's header: where the whole file will be once this response has ended
        # (a response that fails or is abandoned writes nothing, and the path stays a 404).
        headers["X-Download-Path"] = download.path
        if req._timing_sidecar:
            headers["X-Timing-Path"] = download.timing_path
    watcher = asyncio.create_task(cancel_on_disconnect(request, engine, job))
    chunks, first = await first_chunk(job, engine, watcher)
    first = first or b""

    async def keep(pcm: bytes) -> None:
        if download is not None:
            await download.write(pcm)
            if req._timing_sidecar:
                await download.write_timing(timing_chunks(job))

    if not job.stream and not req._sse:
        watcher.cancel()
        body = await asyncio.to_thread(encode_all, req.response_format, first)
        headers["X-TTFAB-Ms"] = f"{job.ttfab_ms or 0:.1f}"
        if req._timing:
            headers["X-Audio-Seconds"] = f"{len(first) / 2 / SAMPLE_RATE:.3f}"
            headers["X-Total-Ms"] = f"{(time.monotonic() - job.arrival) * 1000:.1f}"
        await keep(first)
        return Response(body, media_type=media, headers=headers)
    encoder = make_encoder(req.response_format, streaming=True)
    sse = req._sse

    def wrap(out: bytes) -> bytes:
        return sse_event("speech.audio.delta", audio=base64.b64encode(out).decode("ascii")) if sse else out

    async def gen():
        kept = [first] if download is not None else None
        try:
            out = await asyncio.to_thread(encoder.feed, first)
            if out:
                yield wrap(out)
            async for pcm in chunks:
                if kept is not None:
                    kept.append(pcm)
                out = await asyncio.to_thread(encoder.feed, pcm)
                if out:
                    yield wrap(out)
            out = await asyncio.to_thread(encoder.finish)
            if kept is not None:
                # Written before the response ends, so a client that fetches the link as soon
                # as its stream ends finds the file.
                await keep(b"".join(kept))
                kept = None
            if out:
                yield wrap(out)
            if sse:
                frames = job.audio_samples // 600  # the model's 25 ms frames
                yield sse_event("speech.audio.done", usage={"input_tokens": job.input_tokens, "output_tokens": frames,
                                                             "total_tokens": job.input_tokens + frames})
        except ContainerError as e:
            # Headers are gone; all we can do is end the stream early and say why in the log.
            log.warning("request %s ended early: %s", job.id, e.code)
        finally:
            watcher.cancel()
            engine.cancel(job)
            # close waits for an encode still running in its thread; never on the event loop.
            asyncio.get_running_loop().run_in_executor(None, encoder.close)

    if sse:
        headers["Cache-Control"] = "no-cache"
    return StreamingResponse(gen(), media_type="text/event-stream" if sse else media, headers=headers)


# ---- errors ---------------------------------------------------------------------------------

def error_response(request: HTTPConnection, exc: ContainerError) -> Response:
    headers = dict(exc.headers)
    if exc.status == 503 and exc.code in ("queue_saturated", "shed_deadline"):
        headers.setdefault("Retry-After", "1")
    openai = request.url.path.startswith(OPENAI_PREFIXES)
    body = exc.openai_body() if openai else exc.body()
    return JSONResponse(body, status_code=exc.status, headers=headers)


async def container_error(request: Request, exc: ContainerError) -> Response:
    return error_response(request, exc)


async def http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        err: ContainerError = NotFound(f"no route {request.url.path[:200]!r}")
    elif exc.status_code == 405:
        err = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path[:200]!r}",
                               headers=dict(exc.headers or {}))
    else:
        err = ContainerError(str(exc.detail))
        err.status, err.code = exc.status_code, "http_error"
    return error_response(request, err)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error")
    return error_response(request, ContainerError("internal error; see the server log"))


# Each handler takes the exception type it is registered for, which Starlette's mapping type cannot say.
EXCEPTION_HANDLERS: dict[Any, Callable[..., Any]] = {
    ContainerError: container_error, HTTPException: http_error, Exception: unexpected_error}
