"""Requests shaped as Kokoro-FastAPI's clients send them, over real HTTP (httpx) to the real
server on the real int8 weights: every field it defines is honoured (or accepted with a Warning
header), and its routes (/v1/audio/voices/combine, /dev/phonemize, /dev/generate_from_phonemes,
/v1/download/{file}) answer. Also: the normalization table and the segmentation case through
the server, and Swagger UI at /docs served from the wheel."""
from __future__ import annotations

import base64
import io
import json

import av
import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.container.normalization_cases import CASES

# Starts servers on the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

TEXT = "Dr. Smith paid $5.50 on 12/01/2025. Visit https://example.com for details."
FULL_OPTIONS = {"normalize": True, "unit_normalization": True, "url_normalization": True,
                "email_normalization": True, "optional_pluralization_normalization": True,
                "phone_normalization": True, "replace_remaining_symbols": True}


def _decode(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as c:
        frames = list(c.decode(audio=0))
    pcm = np.concatenate([f.to_ndarray().astype(np.float32).ravel() for f in frames])
    if frames[0].format.name.startswith("s16"):
        pcm /= 32767
    return pcm, frames[0].sample_rate


def _pcm(url: str, **body) -> np.ndarray:
    r = httpx.post(url + "/v1/audio/speech", timeout=120,
                   json={"input": "Good morning.", "voice": "jf_alpha", "response_format": "pcm",
                         "stream": False} | body)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2").astype(np.float32) / 32767


def test_every_kokoro_fastapi_field_in_one_request_gets_audio_and_a_download(onnx_server):
    body = {"model": "kokoro", "input": TEXT, "voice": "jf_alpha(1)-jm_kumo(0.3)", "response_format": "mp3",
            "download_format": "wav", "speed": 1.25, "stream": True, "return_download_link": True,
            "lang_code": "a", "volume_multiplier": 0.8, "normalization_options": FULL_OPTIONS,
            "return_timing": False}
    with httpx.Client(base_url=onnx_server.url, timeout=120) as client:
        with client.stream("POST", "/v1/audio/speech", json=body) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"] == "audio/mpeg"
            assert "warning" not in r.headers  # every field honoured
            link = r.headers["x-download-path"]
            mp3 = r.read()
        audio, rate = _decode(mp3)
        assert rate == 24000 and 3.0 < len(audio) / rate < 15.0
        assert 0.01 < float(np.sqrt(np.mean(audio ** 2))) < 0.5
        assert link.startswith("/v1/download/speech-") and link.endswith(".wav")
        got = client.get(link)
        assert got.status_code == 200 and got.headers["content-type"] == "audio/wav"
        wav, sr = sf.read(io.BytesIO(got.content))
        assert sr == 24000 and abs(len(wav) / sr - len(audio) / rate) < 0.2  # the same speech


def test_volume_multiplier_scales_the_audio(sine_server):
    # The engine scales whatever audio the backend made (container/engine.py), so the sine
    # backend shows it exactly and cheaply; the real model's runs are kept for what the model does.
    url = sine_server.url
    loud, quiet = _pcm(url, voice="sine_a4"), _pcm(url, voice="sine_a4", volume_multiplier=0.5)
    assert len(loud) == len(quiet)
    assert float(np.abs(quiet).max()) == pytest.approx(0.5 * float(np.abs(loud).max()), rel=0.02)
    assert np.array_equal(_pcm(url, voice="sine_a4", volume_multiplier=None), loud)  # Kokoro-FastAPI's null: 1.0


def test_speed_and_normalization_switches_change_the_audio(onnx_server, sine_server):
    url = onnx_server.url
    loud = _pcm(url)
    # The model's work grows with the audio (about 0.9 s of CPU a second of it here): 0.5 and 2.0
    # show the field reaching the model both ways; the range's ends (0.25 and 4.0) are the same
    # field, accepted and applied, on the sine backend.
    slow, fast = _pcm(url, speed=0.5), _pcm(url, speed=2.0)
    assert len(slow) > 1.5 * len(loud) > 1.5 * 1.5 * len(fast) > 0
    ends = [_pcm(sine_server.url, voice="sine_a4", speed=s) for s in (0.25, 1.0, 4.0)]
    assert len(ends[0]) > 3 * len(ends[1]) > 3 * len(ends[2]) > 0
    said = _pcm(url, input="It costs $5.50.")
    as_written = _pcm(url, input="It costs $5.50.", normalization_options={"normalize": False})
    assert len(said) > 1.1 * len(as_written)  # "five dollars and fifty cents" vs "dollar five fifty"


def test_lang_code_instructions_and_timing_headers(onnx_server):
    url = onnx_server.url
    us = httpx.post(url + "/dev/phonemize", json={"text": "tomato", "language": "a"}, timeout=30).json()
    gb = httpx.post(url + "/dev/phonemize", json={"text": "tomato", "language": "b"}, timeout=30).json()
    assert us["phonemes"] != gb["phonemes"]
    r = httpx.post(url + "/v1/audio/speech", timeout=120,
                   json={"input": "Hola, buenos días.", "lang_code": "e", "voice": "jf_alpha", "stream": False})
    assert r.status_code == 200 and "warning" not in r.headers
    # Japanese G2P is not in this image: audio anyway, and a warning that says what was done
    r = httpx.post(url + "/v1/audio/speech", timeout=120,
                   json={"input": "Hello.", "lang_code": "j", "instructions": "cheerful", "stream": False})
    assert r.status_code == 200 and len(r.content) > 1000
    warning = r.headers["warning"]
    assert warning.startswith('299 speech-endpoints "') and "misaki[ja]" in warning and "instructions" in warning
    assert "a (en-us)" in warning  # the languages it does speak
    r = httpx.post(url + "/v1/audio/speech", json={"input": "Hi.", "lang_code": "xx"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "lang_code"
    assert "a (en-us)" in r.json()["error"]["message"]
    # One request for both: our timing headers, and Kokoro-FastAPI's return_timing and
    # download_format without a download link (accepted, each named in the Warning).
    r = httpx.post(url + "/v1/audio/speech", timeout=120,
                   json={"input": "Hello there.", "response_format": "pcm", "stream": False, "timing_headers": True,
                         "return_timing": True, "download_format": "wav"})
    assert float(r.headers["x-audio-seconds"]) == pytest.approx(len(r.content) / 2 / 24000, abs=0.002)
    assert float(r.headers["x-ttfab-ms"]) > 0 and float(r.headers["x-total-ms"]) >= float(r.headers["x-ttfab-ms"])
    assert r.status_code == 200 and "return_timing" in r.headers["warning"] and "download_format" in r.headers["warning"]


def test_limits_and_unknown_fields(onnx_server):
    url = onnx_server.url
    r = httpx.post(url + "/v1/audio/speech", json={"input": "a" * 4097}, timeout=30)
    assert r.status_code == 413
    msg = r.json()["error"]["message"]
    assert "4096" in msg and "split" in msg  # says what to do
    r = httpx.post(url + "/v1/audio/speech", json={"input": "Hi.", "temperature": 0.2}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = httpx.post(url + "/v1/audio/speech", json={"input": "Hi.", "normalization_options": {"bogus": True}},
                   timeout=30)
    assert r.status_code == 400 and "bogus" in r.json()["error"]["message"]
    for speed in (0.2, 4.1):
        r = httpx.post(url + "/v1/audio/speech", json={"input": "Hi.", "speed": speed}, timeout=30)
        assert r.status_code == 400 and "0.25 and 4.0" in r.json()["error"]["message"]


def test_captioned_speech_takes_the_same_fields(onnx_server):
    r = httpx.post(onnx_server.url + "/dev/captioned_speech", timeout=120,
                   json={"input": "It costs $5.50.", "voice": "jf_alpha", "response_format": "wav", "stream": False,
                         "lang_code": "a", "volume_multiplier": 0.9, "normalization_options": {"normalize": True},
                         "return_download_link": True})
    assert r.status_code == 200, r.text
    words = [t["word"] for t in r.json()["timestamps"]]
    assert words == ["It", "costs", "five", "dollars", "and", "fifty", "cents"]
    assert httpx.get(onnx_server.url + r.headers["x-download-path"], timeout=30).status_code == 200


def test_voices_combine_string_list_and_object(onnx_server):
    url = onnx_server.url
    with httpx.Client(base_url=url, timeout=60) as client:
        for body in ("jf_alpha+jm_kumo", ["jf_alpha", "jm_kumo"], {"voices": "jf_alpha+jm_kumo"}):
            r = client.post("/v1/audio/voices/combine", json=body)
            assert r.status_code == 200, r.text
            assert r.headers["x-voice-id"] == "jf_alpha(0.5000)+jm_kumo(0.5000)"
            assert ".npy" in r.headers["content-disposition"] and "torch" in r.headers["warning"]
            table = np.load(io.BytesIO(r.content))
            assert table.shape == (510, 1, 256) and table.dtype == np.float32
        sub = client.post("/v1/audio/voices/combine", json="alloy-jm_kumo")  # an OpenAI name and '-'
        assert sub.status_code == 200 and sub.headers["x-voice-id"] == "jf_alpha(0.5000)-jm_kumo(0.5000)"
        diff = np.load(io.BytesIO(sub.content))
        assert not np.allclose(diff, table)
        speech = client.post("/v1/audio/speech", json={"input": "Hello.", "voice": sub.headers["x-voice-id"],
                                                        "response_format": "pcm", "stream": False})
        assert speech.status_code == 200 and len(speech.content) > 10000
        bad = client.post("/v1/audio/voices/combine", json=["jf_alpha", "nobody"])
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "unknown_voice"
        assert client.post("/v1/audio/voices/combine", json=[]).status_code == 400


def test_phonemize_and_generate_from_phonemes(onnx_server):
    url = onnx_server.url
    r = httpx.post(url + "/dev/phonemize", json={"text": "Dr. Smith paid $5.50."}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["normalized_text"] == "Doctor Smith paid five dollars and fifty cents."
    assert body["phonemes"] and len(body["tokens"]) == len(body["phonemes"])
    r = httpx.post(url + "/dev/generate_from_phonemes", timeout=120,
                   json={"phonemes": body["phonemes"], "voice": "jf_alpha"})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    from_ps, sr = sf.read(io.BytesIO(r.content))
    from_text = _pcm(url, input="Dr. Smith paid $5.50.")
    assert sr == 24000 and abs(len(from_ps) - len(from_text)) < 0.05 * len(from_text)
    r = httpx.post(url + "/dev/generate_from_phonemes", json={"phonemes": "  ", "voice": "jf_alpha"}, timeout=30)
    assert r.status_code == 400
    r = httpx.post(url + "/dev/phonemize", json={"text": "hi", "lang": "a"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "lang"


@pytest.mark.parametrize("path", ["/v1/download/../../etc/passwd", "/v1/download/%2e%2e%2fetc%2fpasswd",
                                  "/v1/download/speech-" + "0" * 32 + ".wav", "/v1/download/.hidden",
                                  "/v1/download/speech-" + "0" * 32 + ".wav%00.txt"])
def test_download_serves_only_its_own_files(onnx_server, path):
    r = httpx.get(onnx_server.url + path, timeout=10)
    assert r.status_code == 404 and "root:" not in r.text


def test_normalization_table_through_the_server(onnx_server):
    """What /dev/phonemize says it speaks is the table's text, and its phonemes are those of that
    text (the speech routes use the same engine path)."""
    with httpx.Client(base_url=onnx_server.url, timeout=30) as client:
        for options, text, spoken in CASES:
            got = client.post("/dev/phonemize", json={"text": text, "normalization_options": options}).json()
            assert got["normalized_text"] == spoken, (text, options)
            ref = client.post("/dev/phonemize", json={"text": spoken,
                                                      "normalization_options": {"normalize": False}}).json()
            assert got["phonemes"] == ref["phonemes"], (text, options)


def test_abbreviations_and_times_are_one_segment_without_gaps(onnx_server):
    """'Dr. Smith met Mr. Jones at 3 p.m. today.' was four pieces with 0.55-0.65 s of silence at
    each false break; now one segment (one NDJSON line) and no gap between words over 0.3 s.
    With normalization off, where the periods reach the segmenter: normalized, the text has none
    left ('Doctor ... Mister ... PM'), and that default path's words and gaps are checked on the
    torch server (test_torch_backend.py), the segmenter being the engine's for every backend."""
    options = {"normalize": False}
    lines = []
    with httpx.stream("POST", onnx_server.url + "/dev/captioned_speech", timeout=120,
                      json={"input": "Dr. Smith met Mr. Jones at 3 p.m. today.", "voice": "jf_alpha",
                            "response_format": "pcm", "normalization_options": options}) as r:
        assert r.status_code == 200
        lines = [json.loads(ln) for ln in r.iter_lines() if ln]
    assert len(lines) == 1
    stamps = lines[0]["timestamps"]
    assert len(stamps) >= 8
    gaps = [b["start_time"] - a["end_time"] for a, b in zip(stamps, stamps[1:], strict=False)]
    assert max(gaps) <= 0.3, list(zip([t["word"] for t in stamps], gaps, strict=False))
    assert len(base64.b64decode(lines[0]["audio"])) / 2 / 24000 > stamps[-1]["end_time"]


def test_docs_is_swagger_ui_from_the_wheel(onnx_server):
    url = onnx_server.url
    page = httpx.get(url + "/docs", timeout=10)
    assert page.status_code == 200 and "swagger-ui" in page.text
    assert "https://" not in page.text and "http://" not in page.text  # nothing from outside
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/docs/init.js"):
        r = httpx.get(url + asset, timeout=10)
        assert r.status_code == 200 and len(r.content) > 100, asset
    assert "/openapi.json" in httpx.get(url + "/docs/init.js", timeout=10).text
    assert httpx.get(url + "/docs/assets/LICENSE", timeout=10).status_code == 404  # only the page's assets
    # "Try it out" sends what the document describes: the example body for the speech route works
    doc = httpx.get(url + "/openapi.json", timeout=10).json()
    props = doc["components"]["schemas"]["OpenAISpeechRequest"]["properties"]
    for field in ("lang_code", "normalization_options", "volume_multiplier", "return_download_link",
                  "download_format", "return_timing"):
        assert field in props


# Issue 47's table, checked on the phonemes the model is given (not only the text): each input,
# a phoneme sequence its right reading has, and one its old wrong reading had.
ISSUE_47_PHONEMES = [
    ("Open at 10:30 a.m.", "ˌAˈɛm", "ɐ ˈɛm"),               # "A M", not "uh em"
    ("Wake at 9am.", "ˌAˈɛm", "ɐ ˈɛm"),
    ("Henry VIII ruled.", "ðɪ ˈAtθ", "ɹˈOmən"),             # "the eighth", not "roman ..."
    ("We have 2048 files.", "θˈWzənd", "twˈɛnti"),          # a count, not "twenty forty-eight"
    ("Call 911 now.", "nˈIn wˈʌn wˈʌn", "hˈʌndɹɪd"),        # digits, not "nine hundred eleven"
    ("Pizza 🍕 and coffee ☕ now.", "kˈɔfi", "bˈɛvəɹɪʤ"),   # no "hot beverage"
    ("Hello 你好，世界。", "həlˈO", "ʧˈIniːz"),               # no "Chinese letter"
]


@pytest.mark.parametrize(("text", "has", "lacks"), ISSUE_47_PHONEMES, ids=[c[0] for c in ISSUE_47_PHONEMES])
def test_issue_47_readings_in_the_phonemes(onnx_server, text, has, lacks):
    got = httpx.post(onnx_server.url + "/dev/phonemize", json={"text": text}, timeout=30).json()
    assert has in got["phonemes"] and lacks not in got["phonemes"], got
