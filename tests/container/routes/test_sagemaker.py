"""ASYNC_INFERENCE (asynchronous endpoints): /invocations answers with one complete file, as
SageMaker stores the response body in S3. A real server on the sine backend: the whole file, its
sizes and the Accept negotiation are the route's, whatever made the audio (the real model on
/invocations is tests/container/backends/test_onnx.py's, streamed and whole)."""

from __future__ import annotations

import io
import struct

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.container.conftest import ServerProc

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def async_server():
    srv = ServerProc({"BACKEND": "sine", "ASYNC_INFERENCE": "true"})
    try:
        srv.wait_ready(timeout=120)
        yield srv
    finally:
        srv.stop()


def _post(srv, body, **headers) -> httpx.Response:
    # What SageMaker does with the S3 payload: one POST with the client's ContentType and Accept.
    return httpx.post(srv.url + "/invocations", json=body, headers=headers, timeout=120)


def test_default_is_one_complete_wav(async_server):
    # A request written for the streaming endpoint (stream defaults to true) still gets a whole file.
    r = _post(async_server, {"text": SENTENCE, "stream": True})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert "transfer-encoding" not in r.headers and int(r.headers["content-length"]) == len(r.content)
    body = r.content
    # RIFF sizes are the real ones (a streamed WAV cannot know them): RIFF = file - 8, data = rest.
    assert body[:4] == b"RIFF" and body[8:12] == b"WAVE"
    assert struct.unpack("<I", body[4:8])[0] == len(body) - 8
    data_at = body.index(b"data")
    assert struct.unpack("<I", body[data_at + 4:data_at + 8])[0] == len(body) - data_at - 8
    audio, sr = sf.read(io.BytesIO(body), dtype="float32")
    assert sr == 24000 and 1.5 < len(audio) / sr < 6.0
    assert float(np.sqrt(np.mean(np.square(audio)))) > 0.02


def test_accept_selects_the_format(async_server):
    r = _post(async_server, {"text": SENTENCE}, accept="audio/flac")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/flac"
    audio, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert sr == 24000 and len(audio) / sr > 1.5
    # The body's own response_format wins over Accept.
    r = _post(async_server, {"text": SENTENCE, "response_format": "pcm"}, accept="audio/flac")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/pcm"
    assert len(r.content) / 2 / 24000 > 1.5


def test_unproducible_accept_is_406_not_500(async_server):
    r = _post(async_server, {"text": SENTENCE}, accept="application/json")
    assert r.status_code == 406
    assert r.json()["error"] == "not_acceptable" and "application/json" in r.json()["detail"]
    # Bad payloads keep their 4xx on the asynchronous path too.
    r = _post(async_server, {"text": "  "})
    assert r.status_code == 400 and r.json()["error"] == "empty_text"
