"""The OpenAI speech API (/v1/audio/speech, /v1/models, /v1/audio/voices) and Kokoro-FastAPI's
captioned speech (/dev/captioned_speech: audio plus word timestamps as JSON)."""
from __future__ import annotations

import asyncio
import base64
import json
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import voices as voices_mod
from ..encode import MEDIA_TYPES, encode_all, make_encoder
from ..errors import BadRequest, ContainerError, ModelNotFound, ModelUnavailable
from ..protocol import CaptionedSpeechRequest, OpenAISpeechRequest
from .common import (cancel_on_disconnect, engine_of, first_chunk, log, read_json_body, speak, state,
                     validate_request)

# /v1/models "created": when this process started (the models are not versioned by date here).
CREATED = int(time.time())


async def speech(request: Request) -> Response:
    return await speak(request, OpenAISpeechRequest)


def _model_card(model_id: str) -> dict:
    return {"id": model_id, "object": "model", "created": CREATED, "owned_by": "speech-endpoints"}


async def list_models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [_model_card(m) for m in state(request).model_ids()]})


async def get_model(request: Request) -> Response:
    st = state(request)
    model_id = request.path_params["model_id"]
    if model_id not in st.model_ids():
        raise ModelNotFound(f"model {model_id[:80]!r} does not exist here; use one of "
                            f"{', '.join(st.model_ids())}", param="model")
    return JSONResponse(_model_card(model_id))


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no", ""):
        return False
    raise BadRequest(f"query parameter {name}={value[:20]!r}: use true or false", param=name)


async def list_voices(request: Request) -> Response:
    """Objects by default (Open WebUI reads voice['id']); ?legacy=true gives bare names, the
    shape Kokoro-FastAPI answered before 0.3 and older clients of it still parse."""
    st = state(request)
    legacy = _flag(request, "legacy")
    engine = st.engine
    if engine is None or not engine.ready:
        raise ModelUnavailable(engine.load_error if engine is not None and engine.load_error
                               else "model is loading")
    voices = list(st.voices) if legacy else [voices_mod.voice_info(v) for v in st.voices]
    return JSONResponse({"voices": voices, "default": st.default_voice,
                         "aliases": st.aliases(), "blends": st.blends})


def _line(audio: bytes, media: str, words) -> bytes:
    return (json.dumps({"audio": base64.b64encode(audio).decode("ascii"), "audio_format": media,
                        "timestamps": [{"word": w, "start_time": a, "end_time": b} for w, a, b in words]})
            + "\n").encode()


async def captioned_speech(request: Request) -> Response:
    """Audio and word timestamps as JSON: one object (stream=false), or one line per segment
    (stream=true, NDJSON) whose audio continues the previous line's bytes."""
    st = state(request)
    req = validate_request(await read_json_body(request), CaptionedSpeechRequest, st)
    engine = engine_of(st)
    job = engine.submit(req.text, req.voice, req.speed, stream=req.stream, timestamps=req._timestamps)
    media = MEDIA_TYPES[req.response_format]
    headers = {"X-Request-Id": job.id}
    watcher = asyncio.create_task(cancel_on_disconnect(request, engine, job))
    chunks, first = await first_chunk(job, engine, watcher)

    def split(item):
        if item is None:
            return b"", []
        return item if isinstance(item, tuple) else (item, [])

    if not job.stream:
        watcher.cancel()
        pcm, words = split(first)
        audio = await asyncio.to_thread(encode_all, req.response_format, pcm)
        return Response(_line(audio, media, words), media_type="application/json", headers=headers)
    encoder = make_encoder(req.response_format, streaming=True)

    async def gen():
        try:
            item = first
            while True:
                pcm, words = split(item)
                out = await asyncio.to_thread(encoder.feed, pcm)
                yield _line(out, media, words)
                try:
                    item = await chunks.__anext__()
                except StopAsyncIteration:
                    break
            out = await asyncio.to_thread(encoder.finish)
            if out:
                yield _line(out, media, [])
        except ContainerError as e:
            log.warning("request %s ended early: %s", job.id, e.code)
        finally:
            watcher.cancel()
            engine.cancel(job)
            asyncio.get_running_loop().run_in_executor(None, encoder.close)

    return StreamingResponse(gen(), media_type="application/x-ndjson", headers=headers)


routes = [
    Route("/v1/audio/speech", speech, methods=["POST"]),
    Route("/v1/audio/voices", list_voices, methods=["GET"]),
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
    Route("/dev/captioned_speech", captioned_speech, methods=["POST"]),
]
