"""The OpenAI speech API (/v1/audio/speech, /v1/models, /v1/audio/voices) and Kokoro-FastAPI's
captioned speech (/dev/captioned_speech: audio plus word timestamps as JSON)."""
from __future__ import annotations

import asyncio
import base64
import json
import time

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import ssml as ssml_mod
from .. import voices as voices_mod
from ..backends.g2p import resolve_lang
from ..encode import MEDIA_TYPES, encode_all, make_encoder
from ..errors import BadRequest, ContainerError, ModelNotFound, ModelUnavailable, NotFound
from ..protocol import (
    CaptionedSpeechRequest,
    DialogueRequest,
    GenerateFromPhonemesRequest,
    OpenAISpeechRequest,
    PhonemizeRequest,
    SpeechRequest,
    SsmlRequest,
    VoiceCombineRequest,
)
from .common import (
    cancel_on_disconnect,
    check_speed,
    check_text,
    engine_of,
    first_chunk,
    log,
    parse_json,
    parse_model,
    read_json_body,
    resolve,
    respond,
    speak,
    state,
    submit,
    validate_request,
    warning_header,
)

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
                        "timestamps": [{"word": w, "start_time": a, "end_time": b, **({"voice": v[0]} if v else {})}
                                       for w, a, b, *v in words]})
            + "\n").encode()


async def captioned_speech(request: Request) -> Response:
    """Audio and word timestamps as JSON: one object (stream=false), or one line per segment
    (stream=true, NDJSON) whose audio continues the previous line's bytes."""
    st = state(request)
    req = validate_request(await read_json_body(request), CaptionedSpeechRequest, st)
    engine = engine_of(st)
    job = submit(engine, req, timestamps=req._timestamps)
    media = MEDIA_TYPES[req.response_format]
    headers = {"X-Request-Id": job.id, **warning_header(req._warnings)}
    download = st.downloads.reserve(req._download_format) if req._download_format else None
    if download is not None:
        headers["X-Download-Path"] = download.path
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
        if download is not None:
            await download.write(pcm)
        return Response(_line(audio, media, words), media_type="application/json", headers=headers)
    encoder = make_encoder(req.response_format, streaming=True)

    async def gen():
        kept: list[bytes] = []
        try:
            item = first
            while True:
                pcm, words = split(item)
                kept.append(pcm)
                out = await asyncio.to_thread(encoder.feed, pcm)
                yield _line(out, media, words)
                try:
                    item = await chunks.__anext__()
                except StopAsyncIteration:
                    break
            out = await asyncio.to_thread(encoder.finish)
            if download is not None:
                await download.write(b"".join(kept))
            if out:
                yield _line(out, media, [])
        except ContainerError as e:
            log.warning("request %s ended early: %s", job.id, e.code)
        finally:
            watcher.cancel()
            engine.cancel(job)
            asyncio.get_running_loop().run_in_executor(None, encoder.close)

    return StreamingResponse(gen(), media_type="application/x-ndjson", headers=headers)


def _combine_spec(obj) -> str:
    """Kokoro-FastAPI's combine body: a bare string ('a+b', 'a-b', weights allowed), a bare list
    of voices mixed equally, or {"voices": either}."""
    if isinstance(obj, dict):
        try:
            obj = VoiceCombineRequest.model_validate(obj).voices
        except ValueError:
            raise BadRequest("body must be a string like 'a+b', a list of voices, or {\"voices\": ...}",
                             param="voices") from None
    if isinstance(obj, list):
        if not obj or not all(isinstance(v, str) and v.strip() for v in obj):
            raise BadRequest("a list of voices must hold one or more voice names", param="voices")
        return "+".join(v.strip() for v in obj)
    if isinstance(obj, str) and obj.strip():
        return obj.strip()
    raise BadRequest("body must be a string like 'a+b', a list of voices, or {\"voices\": ...}", param="voices")


async def combine_voices(request: Request) -> Response:
    """The mixed style table as a file, and its id (X-Voice-Id) to use as `voice` here. On the
    torch backend the file is a torch .pt as Kokoro-FastAPI's; the CPU image has no torch, so it
    answers the same tensor as NumPy .npy (and says so in a Warning header)."""
    st = state(request)
    obj = parse_json(await read_json_body(request), st)
    engine = st.engine
    if engine is None or not engine.ready:
        raise ModelUnavailable(engine.load_error if engine is not None and engine.load_error
                               else "model is loading")
    spec = _combine_spec(obj)
    if not st.blends:
        raise BadRequest(f"BACKEND={st.settings.backend} does not blend voices (BACKEND=onnx does)", param="voices")
    backend = st.backend
    assert backend is not None  # a ready engine has its backend (lifespan)
    voice = resolve(spec, st)
    assert voice is not None  # resolve answers a voice for a non-empty spec (or raises)
    table = await asyncio.to_thread(backend.voice_table, voice)
    safe = "".join(c if c.isalnum() or c in "_.()+-" else "_" for c in voice)[:120]
    headers: dict[str, str] = {"X-Voice-Id": voice, "Cache-Control": "no-cache"}
    if backend.name == "torch":
        import io

        import torch  # the GPU image's, already loaded by the backend
        buf = io.BytesIO()
        torch.save(torch.from_numpy(table), buf)
        body, name = buf.getvalue(), f"{safe}.pt"
    else:
        import io

        import numpy as np
        buf = io.BytesIO()
        np.save(buf, table)
        body, name = buf.getvalue(), f"{safe}.npy"
        headers.update(warning_header([
            "the combined voice is a NumPy .npy (this image has no torch; Kokoro-FastAPI answers a .pt): "
            "torch.from_numpy(numpy.load(f)) is the same tensor; to speak it here send X-Voice-Id as voice"]))
    headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return Response(body, media_type="application/octet-stream", headers=headers)


async def phonemize(request: Request) -> Response:
    """What the speech routes would say for `text`: normalized the same way, then G2P."""
    st = state(request)
    req = parse_model(await read_json_body(request), PhonemizeRequest, st)
    check_text(req.text, "text", st.settings)
    lang, warning = resolve_lang(req.language)
    said, phonemes, tokens = await engine_of(st).phonemize(req.text, lang, req.normalization_options)
    return JSONResponse({"phonemes": phonemes, "tokens": tokens, "normalized_text": said},
                        headers=warning_header([warning] if warning else []))


async def generate_from_phonemes(request: Request) -> Response:
    """Phonemes spoken as given (no normalization, no G2P), one whole file: WAV by default as
    Kokoro-FastAPI's. Admitted through the gate like any speech request."""
    st = state(request)
    req = parse_model(await read_json_body(request), GenerateFromPhonemesRequest, st)
    check_text(req.phonemes, "phonemes", st.settings)
    check_speed(req.speed, st.settings)
    notes: list[str] = []
    voice = resolve(req.voice, st, notes)
    speech = SpeechRequest(text=req.phonemes, voice=voice, speed=req.speed, response_format=req.response_format,
                           stream=False, volume_multiplier=req.volume_multiplier)
    speech._warnings = notes
    engine = engine_of(st)
    job = engine.submit(speech.text, voice, req.speed, stream=False, phonemes=True,
                        volume=1.0 if req.volume_multiplier is None else req.volume_multiplier)
    return await respond(job, speech, engine, request)


async def download(request: Request) -> Response:
    st = state(request)
    name = request.path_params["filename"]
    path = st.downloads.find(name)
    if path is None:
        raise NotFound(f"no download {name[:80]!r}: never made, or removed (kept DOWNLOAD_TTL_S="
                       f"{st.settings.download_ttl_s:.0f} s, at most DOWNLOAD_MAX_FILES="
                       f"{st.settings.download_max_files}); ask for it again with return_download_link=true",
                       param="filename")
    fmt = name.rsplit(".", 1)[1]
    media = "application/json" if fmt == "json" else MEDIA_TYPES[fmt]
    # Kokoro-FastAPI's ?name=: the save-as name, sanitised, with the stored file's extension.
    save_as = st.downloads.save_as(request.query_params.get("name"), name)
    return FileResponse(path, media_type=media, filename=save_as, headers={"Cache-Control": "no-cache"})


async def health(request: Request) -> Response:
    """Kokoro-FastAPI's liveness route: the process answers (readiness is /ping)."""
    return JSONResponse({"status": "healthy"})


async def test_route(request: Request) -> Response:
    """Kokoro-FastAPI's routing check."""
    return JSONResponse({"status": "ok"})


async def dialogue(request: Request) -> Response:
    """Kokoro-FastAPI's multi-speaker route: the turns become one tagged input
    ([voice:a] text [pause:Ns] [voice:b] text) spoken as /v1/audio/speech speaks it."""
    st = state(request)
    turns = parse_model(await read_json_body(request), DialogueRequest, st)
    as_json = turns.to_openai().model_dump(exclude_none=True, mode="json")
    req = validate_request(json.dumps(as_json), OpenAISpeechRequest, st)
    engine = engine_of(st)
    return await respond(submit(engine, req), req, engine, request)


async def ssml_capabilities(request: Request) -> Response:
    """The SSML subset ssml=true and POST /dev/ssml translate, and what the rest does."""
    return JSONResponse({"elements": ssml_mod.ELEMENTS, "ignored": list(ssml_mod.IGNORED),
                         "break_strengths": ssml_mod.BREAK_STRENGTH_S, "prosody_rates": ssml_mod.PROSODY_RATE,
                         "rate_range": [ssml_mod.RATE_MIN, ssml_mod.RATE_MAX]})


async def ssml_translate(request: Request) -> Response:
    """SSML -> the inline tags the speech routes read with allow_voice_tags=true."""
    st = state(request)
    req = parse_model(await read_json_body(request), SsmlRequest, st)
    check_text(req.text, "text", st.settings)
    return JSONResponse({"text": ssml_mod.translate(req.text, req.voice.strip())})


routes = [
    Route("/v1/audio/speech", speech, methods=["POST"]),
    Route("/v1/audio/voices", list_voices, methods=["GET"]),
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
    Route("/dev/captioned_speech", captioned_speech, methods=["POST"]),
    Route("/v1/audio/voices/combine", combine_voices, methods=["POST"]),
    Route("/dev/phonemize", phonemize, methods=["POST"]),
    Route("/dev/generate_from_phonemes", generate_from_phonemes, methods=["POST"]),
    Route("/v1/download/{filename}", download, methods=["GET"]),
    Route("/health", health, methods=["GET"]),
    Route("/v1/test", test_route, methods=["GET"]),
    Route("/dev/dialogue", dialogue, methods=["POST"]),
    Route("/dev/ssml", ssml_capabilities, methods=["GET"]),
    Route("/dev/ssml", ssml_translate, methods=["POST"]),
]
