"""GET /openapi.json (OpenAPI 3.1, built from the pydantic models in protocol.py) and GET /docs
(the same document rendered as plain HTML on the server: no script, nothing loaded from the
internet, which the container does not have)."""
from __future__ import annotations

import html
from functools import lru_cache

from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..encode import MEDIA_TYPES
from ..protocol import (CaptionedSpeechRequest, CaptionedSpeechResponse, ContainerErrorBody, ModelCard,
                        ModelList, OpenAIError, OpenAISpeechRequest, PingBody, SpeechRequest, VoiceList)

_MODELS = (SpeechRequest, OpenAISpeechRequest, CaptionedSpeechRequest, CaptionedSpeechResponse,
           VoiceList, ModelCard, ModelList, OpenAIError, ContainerErrorBody, PingBody)
_REF = "#/components/schemas/{model}"


def _ref(model) -> dict:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(model, codes: dict[str, str]) -> dict:
    return {code: _json(model, text) for code, text in codes.items()}


_AUDIO = {media: {"schema": {"type": "string", "format": "binary"}} for media in dict.fromkeys(MEDIA_TYPES.values())}
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
            "responses": {"200": {"description": "audio in response_format", "content": _AUDIO},
                          **_errors(ContainerErrorBody, {**_SPEECH_ERRORS, "406": "Accept names no format "
                                                         "(asynchronous endpoints)"})}}},
        "/v1/audio/speech": {"post": {
            "tags": ["openai"], "summary": "OpenAI's speech API (client.audio.speech.create)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(OpenAISpeechRequest)}}},
            "responses": {"200": {"description": "audio in response_format, chunked", "content": _AUDIO},
                          **_errors(OpenAIError, _SPEECH_ERRORS)}}},
        "/dev/captioned_speech": {"post": {
            "tags": ["openai"], "summary": "Speech plus word timestamps (Kokoro-FastAPI's route)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(CaptionedSpeechRequest)}}},
            "responses": {"200": {"description": "stream=false: one object; stream=true: one object per line "
                                                 "per segment (NDJSON), audio continuing the previous line's",
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
                 "description": "SageMaker's container contract and the OpenAI speech API. Not listed "
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


async def docs_page(request: Request) -> Response:
    doc = openapi_document()
    parts = [f"<h1>{html.escape(doc['info']['title'])}</h1><p>{html.escape(doc['info']['description'])}</p>",
             '<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>']
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            parts.append(f"<h2><code>{method.upper()} {html.escape(path)}</code></h2><p>{html.escape(op['summary'])}</p>")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                parts.append(_schema_rows(doc, body["$ref"]))
            for p in op.get("parameters", []):
                parts.append(f"<p>parameter <code>{html.escape(p['name'])}</code> ({p['in']}): "
                             f"{html.escape(p.get('description', ''))}</p>")
            parts.append("<ul>" + "".join(f"<li>{code}: {html.escape(r['description'])}</li>"
                                          for code, r in op["responses"].items()) + "</ul>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}")
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>API</title>"
                        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


routes = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs_page, methods=["GET"]),
]
