"""Conformance: the request shapes Kokoro-FastAPI v0.8's clients send (its README, its schemas'
fields and routes) and the official openai client's, against the container. Two tiers run the
same tests: `sine` in process (no model, no socket: the fast tier) and `onnx` on the real weights
through one real server for the whole session (slow). A few checks need G2P and run on onnx only;
a few are the engine's or the route's alone (pause and SSML silence, headers from the voice, the
timing file, a script's warning) and run on sine only (`sine_api`): on onnx they ran the same code
around the model's synthesis, which the other tests and tests/container/routes exercise."""
from __future__ import annotations

import base64
import json
import time

import httpx
import numpy as np
import openai
import pytest
from starlette.testclient import TestClient

from container.app import build_app
from container.settings import Settings


def _ready(client) -> None:
    for _ in range(600):
        if client.get("/ping").status_code == 200:
            return
        time.sleep(0.05)
    raise TimeoutError("server not ready")


@pytest.fixture(scope="module", params=["sine", pytest.param("onnx", marks=pytest.mark.slow)])
def api(request):
    """(an httpx-compatible client on the container, the backend's name)."""
    if request.param == "sine":
        yield request.getfixturevalue("sine_api")
    else:
        srv = request.getfixturevalue("onnx_server")
        with httpx.Client(base_url=srv.url, timeout=180) as c:
            yield c, "onnx"


@pytest.fixture(scope="module")
def sine_api():
    """The sine tier alone, for checks that do not depend on the backend."""
    with TestClient(build_app(Settings(backend="sine"))) as c:
        _ready(c)
        yield c, "sine"


def _oai(client) -> openai.OpenAI:
    base = str(client.base_url).rstrip("/") + "/v1"
    return openai.OpenAI(base_url=base, api_key="unused", http_client=client, max_retries=0)


def _pcm(r) -> np.ndarray:
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


def _longest_zero_run(pcm: np.ndarray) -> int:
    nz = np.flatnonzero(np.concatenate(([1], pcm, [1])))
    return int(np.max(np.diff(nz)) - 1)


# ---- Kokoro-FastAPI's request shapes ----------------------------------------------------------

def test_kfa_readme_request_with_its_default_voice(api):
    """KFA's README: model kokoro, voice af_heart (KFA's default). This image's weights lack it:
    audio in the closest voice, and a Warning that names both and how to get the full set."""
    client, _ = api
    r = client.post("/v1/audio/speech", json={"model": "kokoro", "input": "Hello world!", "voice": "af_heart",
                                              "response_format": "mp3", "speed": 1.0, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg" and len(r.content) > 500
    warning = r.headers["warning"]
    assert "'af_heart' is not in this image, spoke " in warning and "voices-v1.0.bin" in warning
    assert r.headers["content-language"] == "en-us"  # lang_code from the voice's first letter


def test_lang_code_follows_the_voice_and_lang_code_wins(sine_api):
    client, _ = sine_api
    heads = {v: client.post("/v1/audio/speech", json={"input": "Hi.", "voice": v, "response_format": "pcm"})
             .headers["content-language"] for v in ("bf_emma", "am_adam", "fable")}
    assert heads == {"bf_emma": "en-gb", "am_adam": "en-us", "fable": "en-gb"}  # fable = bm_fable upstream
    r = client.post("/v1/audio/speech", json={"input": "Hi.", "voice": "bf_emma", "lang_code": "a",
                                              "response_format": "pcm"})
    assert r.headers["content-language"] == "en-us"


def test_v08_fields_are_accepted_and_do_what_they_say(api):
    client, backend = api
    voice = "jf_alpha" if backend == "onnx" else "sine_a4"
    other = "jm_kumo" if backend == "onnx" else "sine_c5"
    plain = _pcm(client.post("/v1/audio/speech", json={"input": "One two. Three four.", "voice": voice,
                                                       "response_format": "pcm", "stream": False}))
    # allow_voice_tags + voice_aliases (object form with a rate): the second sentence is slower
    tagged = _pcm(client.post("/v1/audio/speech", json={
        "input": "One two. [voice:Slow] Three four.", "voice": voice, "response_format": "pcm", "stream": False,
        "allow_voice_tags": True, "voice_aliases": {"slow": {"voice": other, "rate": 0.5}}}))
    assert len(tagged) > 1.3 * len(plain)
    # off (the default): the tag is not a switch, and not read as a voice change either
    r = client.post("/v1/audio/speech", json={"input": "One two. [voice:nobody] Three.", "voice": voice,
                                              "response_format": "pcm"})
    assert r.status_code == 200
    # with tags on, an unknown voice in a tag is this request's 400, before any audio
    r = client.post("/v1/audio/speech", json={"input": "One. [voice:nobody_x] Two.", "voice": voice,
                                              "allow_voice_tags": True})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_voice"


def test_pause_tags_are_silence_and_ssml_breaks_too(sine_api):
    client, _ = sine_api
    body = {"voice": "alloy", "response_format": "pcm", "stream": False}
    paused = _pcm(client.post("/v1/audio/speech", json=body | {"input": "Hello there. [pause:1.5s] Bye now."}))
    assert _longest_zero_run(paused) >= 36000  # 1.5 s of exact silence at 24 kHz
    ssml = _pcm(client.post("/v1/audio/speech", json=body | {
        "input": '<speak>Hello there. <break time="1500ms"/> Bye now.</speak>', "ssml": True,
        "allow_voice_tags": True}))
    assert _longest_zero_run(ssml) >= 36000
    # ssml off: the markup is dropped, its text spoken (never "less than speak greater than")
    stripped = client.post("/v1/audio/speech", json=body | {"input": "<speak>Hello <break time='1s'/></speak>"})
    assert stripped.status_code == 200 and _longest_zero_run(_pcm(stripped)) < 24000


def test_ssml_route_and_capabilities(api):
    client, _ = api
    caps = client.get("/dev/ssml").json()
    assert {"break", "prosody", "say-as", "phoneme", "sub", "voice"} <= set(caps["elements"])
    r = client.post("/dev/ssml", json={"voice": "af_heart", "text": (
        '<speak>Hi <break strength="strong"/><prosody rate="slow">slow</prosody> '
        '<say-as interpret-as="characters">abc</say-as> <sub alias="World Wide Web">WWW</sub> '
        '<phoneme alphabet="ipa" ph="kˈOkəɹO">Kokoro</phoneme> <voice name="bf_emma">cheers</voice></speak>')})
    assert r.status_code == 200
    assert r.json()["text"] == ("Hi [pause:1s] [rate:0.75] slow [rate:1] a b c World Wide Web [Kokoro](/kˈOkəɹO/) "
                                "[voice:bf_emma] cheers [voice:af_heart]")
    bad = client.post("/dev/ssml", json={"text": "<speak><break></speak>"})
    assert bad.status_code == 400 and "malformed SSML" in bad.json()["error"]["message"]
    entity = client.post("/dev/ssml", json={"text": '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><speak>&a;</speak>'})
    assert entity.status_code == 400


def test_kfa_routes_health_test_dialogue(api):
    client, backend = api
    assert client.get("/health").json() == {"status": "healthy"}
    assert client.get("/v1/test").json() == {"status": "ok"}
    a, b = ("jf_alpha", "jm_kumo") if backend == "onnx" else ("sine_a4", "sine_c5")
    r = client.post("/dev/dialogue", json={"inputs": [{"voice": a, "text": "Hi there."},
                                                      {"voice_id": b, "text": "Hello."}],
                                           "pause_between_turns": 1.0, "response_format": "pcm", "stream": False})
    assert _longest_zero_run(_pcm(r)) >= 24000


def test_download_name_and_kfa_return_timing(sine_api):
    client, _ = sine_api
    r = client.post("/v1/audio/speech", json={"input": "First part. [pause:0.5s] Second part.", "voice": "nova",
                                              "response_format": "mp3", "return_download_link": True,
                                              "download_format": "wav", "return_timing": True})
    assert r.status_code == 200
    link, timing = r.headers["x-download-path"], r.headers["x-timing-path"]
    assert timing == link + ".json"
    chunks = client.get(timing).json()["chunks"]
    assert [c["text"] for c in chunks] == ["First part.", "", "Second part."]
    assert chunks[1]["end"] - chunks[1]["start"] == pytest.approx(0.5, abs=0.001)
    assert all(x["end"] == y["start"] for x, y in zip(chunks, chunks[1:], strict=False))
    got = client.get(link, params={"name": "../My Story!.mp3"})
    assert got.status_code == 200 and got.content[:4] == b"RIFF"
    assert got.headers["content-disposition"] == 'attachment; filename="My_Story.wav"'
    # ours, under its own name: timing headers on a whole body
    r = client.post("/v1/audio/speech", json={"input": "Hi.", "stream": False, "response_format": "pcm",
                                              "timing_headers": True})
    assert float(r.headers["x-audio-seconds"]) == pytest.approx(len(r.content) / 48000, abs=0.002)


def test_foreign_script_warns_with_the_language_and_voice(sine_api):
    client, _ = sine_api
    r = client.post("/v1/audio/speech", json={"input": "Hello 你好，世界。", "voice": "alloy", "response_format": "pcm"})
    assert r.status_code == 200 and "Chinese text" in r.headers["warning"] and "zf_" in r.headers["warning"]


# ---- the openai client -------------------------------------------------------------------------

def test_openai_client_dated_model_sse_and_instructions(api):
    client, _ = api
    oai = _oai(client)
    audio = oai.audio.speech.create(model="gpt-4o-mini-tts-2025-12-15", voice="coral", input="Hello there.",
                                    instructions="Speak cheerfully.", response_format="wav")
    assert audio.content[:4] == b"RIFF"
    with oai.audio.speech.with_streaming_response.create(model="gpt-4o-mini-tts", voice="alloy", input="Hi. Bye.",
                                                         response_format="pcm", stream_format="sse") as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: "):]) for line in r.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) >= 2
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    usage = events[-1]["usage"]
    assert len(pcm) > 4800 and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    with pytest.raises(openai.NotFoundError):
        oai.audio.speech.create(model="gpt-5-tts", voice="alloy", input="Hi.")


def test_refuse_instead_of_closest_voice():
    """VOICE_FALLBACK=refuse: a Kokoro name the weights lack is a 400 that lists the voices and
    says how to get the full set."""
    with TestClient(build_app(Settings(backend="sine", voice_fallback="refuse"))) as c:
        _ready(c)
        r = c.post("/v1/audio/speech", json={"input": "Hi.", "voice": "af_heart"})
    err = r.json()["error"]
    assert r.status_code == 400 and err["code"] == "unknown_voice" and "sine_a4" in err["message"]
    assert "voices-v1.0.bin" in err["message"]


@pytest.mark.slow
def test_ipa_is_spoken_as_given(onnx_server):
    r = httpx.post(onnx_server.url + "/dev/phonemize", json={"text": "Say [Kokoro](/kˈOkəɹO/) now."}, timeout=30)
    got = r.json()
    assert "kˈOkəɹO" in got["phonemes"] and "slash" not in got["normalized_text"]


@pytest.mark.slow
def test_captioned_words_name_their_voice_with_tags(onnx_server):
    """KFA v0.8: with allow_voice_tags each word timestamp carries the voice that spoke it;
    without tags the field is absent (responses as before)."""
    body = {"input": "Hello there. [voice:jm_kumo] Good night.", "voice": "jf_alpha", "stream": False,
            "response_format": "wav"}
    r = httpx.post(onnx_server.url + "/dev/captioned_speech", json=body | {"allow_voice_tags": True}, timeout=120)
    words = r.json()["timestamps"]
    assert [(w["word"], w["voice"]) for w in words] == [("Hello", "jf_alpha"), ("there", "jf_alpha"),
                                                        ("Good", "jm_kumo"), ("night", "jm_kumo")]
    plain = httpx.post(onnx_server.url + "/dev/captioned_speech", json=body | {"input": "Hello there."}, timeout=120)
    assert all("voice" not in w for w in plain.json()["timestamps"])
