"""/openapi.json is a valid OpenAPI 3 document that lists every HTTP route the app serves, and
/docs renders it without loading anything from the internet."""
from __future__ import annotations

import re

import httpx
from openapi_spec_validator import validate
from starlette.routing import Route

from container.app import build_app
from container.settings import Settings


def test_openapi_document_validates_and_covers_every_route(server_factory):
    srv = server_factory({"BACKEND": "sine"})
    r = httpx.get(srv.url + "/openapi.json", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    validate(doc)  # raises on any schema violation (OpenAPI 3.1 rules, JSON Schema 2020-12)
    assert doc["openapi"].startswith("3.")
    app = build_app(Settings(backend="sine"))
    served = {(re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", rt.path), m.lower()) for rt in app.routes
              if isinstance(rt, Route) for m in rt.methods if m != "HEAD"}
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert served - {("/openapi.json", "get"), ("/docs", "get")} == documented
    speech = doc["components"]["schemas"]["OpenAISpeechRequest"]
    assert speech["additionalProperties"] is False and speech["required"] == ["input"]
    assert set(speech["properties"]["response_format"]["enum"]) == {"mp3", "opus", "aac", "flac", "wav", "pcm"}
    cap = doc["components"]["schemas"]["CaptionedSpeechResponse"]["properties"]
    assert cap["timestamps"]["items"] == {"$ref": "#/components/schemas/WordTimestamp"}


def test_docs_page_is_self_contained(server_factory):
    srv = server_factory({"BACKEND": "sine"})
    r = httpx.get(srv.url + "/docs", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    for route in ("POST /v1/audio/speech", "POST /dev/captioned_speech", "GET /v1/audio/voices",
                  "POST /invocations", "GET /ping"):
        assert route in page
    assert "<code>input</code> *" in page  # the request fields, required ones marked
    assert "<script" not in page and not re.search(r"(src|href)=['\"]https?://", page)
