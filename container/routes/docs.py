"""GET /openapi.json (OpenAPI 3.1, built from the pydantic models in protocol.py, the same models
the routes validate with), GET /docs (Swagger UI with "Try it out", its assets served from the
swagger-ui-py wheel's static folder: nothing is fetched from the internet, which the container
does not have) and GET /docs/plain (the document as plain HTML rendered here, no script)."""
from __future__ import annotations

import html
import importlib.util
from functools import lru_cache
from pathlib import Path

from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..encode import MEDIA_TYPES
from ..errors import NotFound
from ..protocol import (
    CaptionedSpeechRequest,
    CaptionedSpeechResponse,
    ContainerErrorBody,
    DialogueRequest,
    GenerateFromPhonemesRequest,
    ModelCard,
    ModelList,
    OpenAIError,
    OpenAISpeechRequest,
    PhonemizeRequest,
    PhonemizeResponse,
    PingBody,
    SpeechRequest,
    SsmlRequest,
    VoiceCombineRequest,
    VoiceList,
)

_MODELS = (SpeechRequest, OpenAISpeechRequest, CaptionedSpeechRequest, CaptionedSpeechResponse,
           VoiceList, ModelCard, ModelList, OpenAIError, ContainerErrorBody, PingBody, PhonemizeRequest,
           PhonemizeResponse, GenerateFromPhonemesRequest, VoiceCombineRequest, DialogueRequest, SsmlRequest)
_REF = "#/components/schemas/{model}"


def _ref(model) -> dict:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(model, codes: dict[str, str]) -> dict:
    return {code: _json(model, text) for code, text in codes.items()}


_AUDIO = {media: {"schema": {"type": "string", "format": "binary"}} for media in dict.fromkeys(MEDIA_TYPES.values())}
_SPEECH_HEADERS = {
    "Warning": {"description": "299 speech-endpoints \"...\": a field accepted but not done as asked "
                               "(instructions, lang_code j/z, download_format without the link, ...)",
                "schema": {"type": "string"}},
    "X-Download-Path": {"description": "return_download_link: GET this path once the response has ended",
                        "schema": {"type": "string"}},
    "X-Timing-Path": {"description": "return_timing with return_download_link: GET this path for the "
                                     "segments' text, start and end (s) once the response has ended",
                      "schema": {"type": "string"}},
    "X-Request-Id": {"description": "This request's id in the server log", "schema": {"type": "string"}},
}
_STATUS = {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]}


def _audio_ok(description: str) -> dict:
    return {"description": description, "headers": _SPEECH_HEADERS, "content": _AUDIO}

_SPEECH_ERRORS = {"400": "bad request (empty text, unknown voice or field, invalid JSON, speed out of range)",
                  "404": "unknown model", "413": "body or text too long", "415": "not application/json",
                  "503": "queue saturated or shed (Retry-After: 1), draining, or the model is not loaded"}


@lru_cache(maxsize=1)
def openapi_document(version: str = "1") -> dict:
    _, defs = models_json_schema([(m, "validation") for m in _MODELS], ref_template=_REF)
    schemas = defs.get("$defs", {})
    paths = {
        "/ping": {"get": {
            "tags": ["sagemaker"], "summary": "Health: 200 once the model is loaded and warmed",
            "responses": {"200": _json(PingBody, "ready: backend, weights, footprint, cores"),
                          "503": _json(PingBody, "loading, load error, or draining")}}},
        "/metrics": {"get": {
            "tags": ["sagemaker"], "summary": "The container's counters and gauges, Prometheus text format 0.0.4",
            "responses": {"200": {"description": "speech_requests_total by outcome, in-flight, queue, pressure, p95s",
                                  "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/invocations": {"post": {
            "tags": ["sagemaker"], "summary": "Speech, streamed as it is synthesized (SageMaker InvokeEndpoint)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(SpeechRequest)}}},
            "responses": {"200": _audio_ok("audio in response_format"),
                          **_errors(ContainerErrorBody, {**_SPEECH_ERRORS, "406": "Accept names no format "
                                                         "(asynchronous endpoints)"})}}},
        "/v1/audio/speech": {"post": {
            "tags": ["openai"], "summary": "OpenAI's speech API (client.audio.speech.create)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(OpenAISpeechRequest)}}},
            "responses": {"200": {**_audio_ok("audio in response_format, chunked"),
                                  "content": {**_AUDIO, "text/event-stream": {"schema": {
                                      "type": "string", "description": "stream_format=sse: speech.audio.delta "
                                      "events (base64 audio), then speech.audio.done (usage)"}}}},
                          **_errors(OpenAIError, _SPEECH_ERRORS)}}},
        "/dev/dialogue": {"post": {
            "tags": ["kokoro-fastapi"], "summary": "Turns of several speakers, one audio stream",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(DialogueRequest)}}},
            "responses": {"200": _audio_ok("audio in response_format, chunked"),
                          **_errors(OpenAIError, _SPEECH_ERRORS)}}},
        "/dev/ssml": {
            "get": {"tags": ["kokoro-fastapi"], "summary": "The SSML subset ssml=true translates",
                    "responses": {"200": {"description": "elements, ignored elements, break strengths, "
                                                         "prosody rates, rate range",
                                          "content": {"application/json": {"schema": {"type": "object"}}}}}},
            "post": {"tags": ["kokoro-fastapi"], "summary": "SSML -> the inline tags the speech routes read",
                     "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(SsmlRequest)}}},
                     "responses": {"200": {"description": "the translated text", "content": {"application/json": {
                         "schema": {"type": "object", "properties": {"text": {"type": "string"}}}}}},
                         **_errors(OpenAIError, {"400": "malformed SSML, DOCTYPE/ENTITY, unknown field"})}}},
        "/health": {"get": {"tags": ["kokoro-fastapi"], "summary": "Liveness (readiness is /ping)",
                            "responses": {"200": {"description": '{"status": "healthy"}',
                                                  "content": {"application/json": {"schema": _STATUS}}}}}},
        "/v1/test": {"get": {"tags": ["kokoro-fastapi"], "summary": "Routing check",
                             "responses": {"200": {"description": '{"status": "ok"}',
                                                   "content": {"application/json": {"schema": _STATUS}}}}}},
        "/v1/audio/voices/combine": {"post": {
            "tags": ["kokoro-fastapi"], "summary": "Mix voices into one style table (a file) and its voice id",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": [
                {"type": "string", "examples": ["jf_alpha(2)+jm_kumo(1)"]},
                {"type": "array", "items": {"type": "string"}}, _ref(VoiceCombineRequest)]}}}},
            "responses": {"200": {"description": "the table: torch .pt (torch backend) or NumPy .npy (onnx; "
                                                 "Warning header); X-Voice-Id: the id to send as voice",
                                  "headers": {"X-Voice-Id": {"schema": {"type": "string"}},
                                              "Warning": _SPEECH_HEADERS["Warning"]},
                                  "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                      "format": "binary"}}}},
                          **_errors(OpenAIError, {"400": "unknown voice, bad blend, or a backend that does not "
                                                         "blend", "503": "model loading"})}}},
        "/v1/download/{filename}": {"get": {
            "tags": ["kokoro-fastapi"], "summary": "A file kept by return_download_link (X-Download-Path)",
            "parameters": [{"name": "filename", "in": "path", "required": True, "schema": {"type": "string"}},
                           {"name": "name", "in": "query", "required": False, "schema": {"type": "string"},
                            "description": "save-as name (sanitised; the stored extension is kept)"}],
            "responses": {"200": {"description": "the audio file (or its .json timing sidecar)",
                                  "content": {**_AUDIO, "application/json": {"schema": {"type": "object"}}}},
                          **_errors(OpenAIError, {"404": "never made, expired (DOWNLOAD_TTL_S) or evicted "
                                                         "(DOWNLOAD_MAX_FILES, DOWNLOAD_MAX_BYTES)"})}}},
        "/dev/phonemize": {"post": {
            "tags": ["kokoro-fastapi"], "summary": "Phonemes of the normalized text (what would be said)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(PhonemizeRequest)}}},
            "responses": {"200": _json(PhonemizeResponse, "phonemes, token ids and the normalized text"),
                          **_errors(OpenAIError, {"400": "empty text, unknown language or field, a backend "
                                                         "without G2P", "413": "text too long",
                                                  "503": "model loading"})}}},
        "/dev/generate_from_phonemes": {"post": {
            "tags": ["kokoro-fastapi"], "summary": "Speak phonemes as given (no normalization, no G2P)",
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": _ref(GenerateFromPhonemesRequest)}}},
            "responses": {"200": _audio_ok("the whole file in response_format (WAV by default)"),
                          **_errors(OpenAIError, _SPEECH_ERRORS)}}},
        "/dev/captioned_speech": {"post": {
            "tags": ["openai"], "summary": "Speech plus word timestamps (Kokoro-FastAPI's route)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(CaptionedSpeechRequest)}}},
            "responses": {"200": {"description": "stream=false: one object; stream=true: one object per line "
                                                 "per segment (NDJSON), audio continuing the previous line's",
                                  "headers": _SPEECH_HEADERS,
                                  "content": {"application/json": {"schema": _ref(CaptionedSpeechResponse)},
                                              "application/x-ndjson": {"schema": _ref(CaptionedSpeechResponse)}}},
                          **_errors(OpenAIError, {**_SPEECH_ERRORS, "400": _SPEECH_ERRORS["400"] +
                                                  "; the backend gives no durations"})}}},
        "/v1/audio/voices": {"get": {
            "tags": ["openai"], "summary": "Voices, the default voice, OpenAI aliases",
            "parameters": [{"name": "legacy", "in": "query", "required": False,
                            "description": "true: voices as bare names (Kokoro-FastAPI before 0.3)",
                            "schema": {"type": "boolean", "default": False}}],
            "responses": {"200": _json(VoiceList, "voices"),
                          **_errors(OpenAIError, {"400": "bad legacy value", "503": "model loading"})}}},
        "/v1/models": {"get": {"tags": ["openai"], "summary": "Model ids the speech route accepts",
                               "responses": {"200": _json(ModelList, "models")}}},
        "/v1/models/{model_id}": {"get": {
            "tags": ["openai"], "summary": "One model",
            "parameters": [{"name": "model_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": _json(ModelCard, "the model"), **_errors(OpenAIError, {"404": "unknown model"})}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Kokoro-82M speech container", "version": version,
                 "description": "SageMaker's container contract, the OpenAI speech API and Kokoro-FastAPI's "
                                "routes. Not listed "
                                "(OpenAPI has no WebSocket operations): the bidirectional stream at "
                                "ws://HOST:8080/invocations-bidirectional-stream, see container/README.md."},
        "paths": paths,
        "components": {"schemas": schemas},
    }


async def openapi_json(request: Request) -> Response:
    return JSONResponse(openapi_document())


def _kind(prop: dict) -> str:
    if "enum" in prop:
        return " | ".join(map(str, prop["enum"]))
    if "anyOf" in prop:
        return " | ".join(_kind(p) for p in prop["anyOf"])
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    return str(prop.get("type", ""))


def _schema_rows(doc: dict, ref: str) -> str:
    schema = doc["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {})
    required = set(schema.get("required", ()))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        kind = _kind(prop)
        default = "" if name in required else html.escape(repr(prop.get("default")))
        rows.append(f"<tr><td><code>{html.escape(name)}</code>{' *' if name in required else ''}</td>"
                    f"<td>{html.escape(kind)}</td><td>{default}</td>"
                    f"<td>{html.escape(prop.get('description', ''))}</td></tr>")
    if not rows:
        return ""
    return ("<table><tr><th>field</th><th>type</th><th>default</th><th></th></tr>" + "".join(rows) + "</table>")


async def plain_page(request: Request) -> Response:
    doc = openapi_document()
    parts = [f"<h1>{html.escape(doc['info']['title'])}</h1><p>{html.escape(doc['info']['description'])}</p>",
             '<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>']
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            parts.append(f"<h2><code>{method.upper()} {html.escape(path)}</code></h2><p>{html.escape(op['summary'])}</p>")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            refs = [body] if body and "$ref" in body else (body or {}).get("anyOf", [])
            for ref in refs:
                if "$ref" in ref:
                    parts.append(_schema_rows(doc, ref["$ref"]))
            for p in op.get("parameters", []):
                parts.append(f"<p>parameter <code>{html.escape(p['name'])}</code> ({p['in']}): "
                             f"{html.escape(p.get('description', ''))}</p>")
            parts.append("<ul>" + "".join(f"<li>{code}: {html.escape(r['description'])}</li>"
                                          for code, r in op["responses"].items()) + "</ul>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}")
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>API</title>"
                        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def swagger_static_dir() -> Path | None:
    """swagger-ui-py's static folder (Swagger UI 5, which reads OpenAPI 3.1), found without
    importing the package (its __init__ pulls in Jinja2 and PyYAML for handlers not used here)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "static"
    return d if (d / "swagger-ui-bundle.js").is_file() else None


# The assets the page loads; nothing else under the static folder is served.
_ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript",
           "favicon-32x32.png": "image/png", "favicon-16x16.png": "image/png"}
_INIT_JS = """window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, tryItOutEnabled: true,
    presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout"
  });
};
"""
_SWAGGER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png" sizes="32x32">
</head><body>
<div id="swagger-ui"></div>
<noscript><p>Swagger UI needs JavaScript; <a href="/docs/plain">/docs/plain</a> is the same document
as plain HTML.</p></noscript>
<script src="/docs/assets/swagger-ui-bundle.js" charset="UTF-8"></script>
<script src="/docs/init.js" charset="UTF-8"></script>
</body></html>
"""


async def docs_page(request: Request) -> Response:
    if swagger_static_dir() is None:  # an image without swagger-ui-py still documents itself
        return await plain_page(request)
    return HTMLResponse(_SWAGGER_PAGE.format(title=html.escape(openapi_document()["info"]["title"])))


async def docs_init(request: Request) -> Response:
    return Response(_INIT_JS, media_type="text/javascript")


async def docs_asset(request: Request) -> Response:
    name = request.path_params["name"]
    d = swagger_static_dir()
    if name not in _ASSETS or d is None:
        raise NotFound(f"no asset {name[:80]!r}")
    return FileResponse(d / name, media_type=_ASSETS[name], headers={"Cache-Control": "public, max-age=86400"})


routes = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs_page, methods=["GET"]),
    Route("/docs/plain", plain_page, methods=["GET"]),
    Route("/docs/init.js", docs_init, methods=["GET"]),
    Route("/docs/assets/{name}", docs_asset, methods=["GET"]),
]
