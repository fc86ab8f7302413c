"""/openapi.json is a valid OpenAPI 3 document that lists every HTTP route the app serves, built
from the request models the routes validate with; /docs is Swagger UI from the wheel's assets
and /docs/plain renders the document without a script, neither loading anything from outside."""
from __future__ import annotations

import re

import httpx
import pytest
from openapi_spec_validator import validate
from starlette.routing import Route

from container.app import build_app
from container.settings import Settings

# Reads the session's sine server (a real server): not in the fast tier.
pytestmark = pytest.mark.slow


def test_openapi_document_validates_and_covers_every_route(sine_server):
    srv = sine_server
    r = httpx.get(srv.url + "/openapi.json", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    validate(doc)  # raises on any schema violation (OpenAPI 3.1 rules, JSON Schema 2020-12)
    assert doc["openapi"].startswith("3.")
    app = build_app(Settings(backend="sine"))
    served = {(re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", rt.path), m.lower()) for rt in app.routes
              if isinstance(rt, Route) for m in rt.methods if m != "HEAD"}
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    docs = {("/openapi.json", "get"), ("/docs", "get"), ("/docs/plain", "get"), ("/docs/init.js", "get"),
            ("/docs/assets/{name}", "get")}
    assert served - docs == documented
    speech = doc["components"]["schemas"]["OpenAISpeechRequest"]
    assert speech["additionalProperties"] is False and speech["required"] == ["input"]
    assert set(speech["properties"]["response_format"]["enum"]) == {"mp3", "opus", "aac", "flac", "wav", "pcm"}
    cap = doc["components"]["schemas"]["CaptionedSpeechResponse"]["properties"]
    assert cap["timestamps"]["items"] == {"$ref": "#/components/schemas/WordTimestamp"}
    # the schemas are the models the routes validate with, Kokoro-FastAPI's fields included
    from container.protocol import NormalizationOptions, OpenAISpeechRequest, PhonemizeRequest
    schemas = doc["components"]["schemas"]
    assert set(speech["properties"]) == set(OpenAISpeechRequest.model_fields)
    assert set(schemas["NormalizationOptions"]["properties"]) == set(NormalizationOptions.model_fields)
    assert set(schemas["PhonemizeRequest"]["properties"]) == set(PhonemizeRequest.model_fields)
    paths = doc["paths"]
    assert paths["/dev/phonemize"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PhonemizeRequest"}
    assert "X-Download-Path" in paths["/v1/audio/speech"]["post"]["responses"]["200"]["headers"]


def test_docs_is_swagger_ui_served_from_here(sine_server):
    srv = sine_server
    r = httpx.get(srv.url + "/docs", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    srcs = re.findall(r"(?:src|href)=['\"]([^'\"]+)", r.text)
    assert srcs and all(s.startswith("/docs/") for s in srcs), srcs  # same origin only
    for s in srcs:
        asset = httpx.get(srv.url + s, timeout=10)
        assert asset.status_code == 200 and asset.content, s
    init = httpx.get(srv.url + "/docs/init.js", timeout=10).text
    assert "SwaggerUIBundle" in init and "/openapi.json" in init and "tryItOutEnabled: true" in init
    # Swagger UI 5 (OpenAPI 3.1 support arrived in 5.0; 4.x refuses a 3.1 document)
    bundle = httpx.get(srv.url + "/docs/assets/swagger-ui-bundle.js", timeout=10).text
    assert "SwaggerUIBundle" in bundle


def test_plain_docs_page_is_self_contained(sine_server):
    srv = sine_server
    r = httpx.get(srv.url + "/docs/plain", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    for route in ("POST /v1/audio/speech", "POST /dev/captioned_speech", "GET /v1/audio/voices",
                  "POST /invocations", "GET /ping"):
        assert route in page
    assert "<code>input</code> *" in page  # the request fields, required ones marked
    assert "<script" not in page and not re.search(r"(src|href)=['\"]https?://", page)
