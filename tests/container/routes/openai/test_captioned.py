"""Word timestamps from the real int8 Kokoro-82M's predicted durations (/dev/captioned_speech)."""
from __future__ import annotations

import base64
import io
import json

import httpx
import pytest
import soundfile as sf

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

TEXT = "Hello there, how are you today? It costs 42 dollars, really."
# "42" is normalized to "forty-two" (container/normalize.py): the timestamps name the words spoken.
WORDS = ["Hello", "there", "how", "are", "you", "today", "It", "costs", "forty-two", "dollars", "really"]


def _check_times(stamps: list[dict], audio_s: float) -> None:
    assert [t["word"] for t in stamps] == WORDS
    prev_end = 0.0
    for t in stamps:
        assert prev_end <= t["start_time"] < t["end_time"] <= audio_s, (t, prev_end, audio_s)
        prev_end = t["end_time"]
    # a word is at least one 25 ms frame and at most a few seconds; the last one ends near the end
    assert all(0.025 <= t["end_time"] - t["start_time"] < 3 for t in stamps)
    assert audio_s - stamps[-1]["end_time"] < 1.0


def test_captioned_speech_whole(onnx_server):
    r = httpx.post(onnx_server.url + "/dev/captioned_speech", timeout=120,
                   json={"input": TEXT, "voice": "jf_alpha", "response_format": "wav", "stream": False})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["audio_format"] == "audio/wav"
    audio, sr = sf.read(io.BytesIO(base64.b64decode(body["audio"])))
    assert sr == 24000 and audio.size > 2 * sr
    _check_times(body["timestamps"], audio.size / sr)
    # the second sentence is its own segment: its words are offset by the first one's audio
    today, it = body["timestamps"][5], body["timestamps"][6]
    assert it["start_time"] - today["end_time"] > 0.05  # the '?' pause lies between them


def test_captioned_speech_streamed_as_ndjson(onnx_server):
    lines = []
    with httpx.stream("POST", onnx_server.url + "/dev/captioned_speech", timeout=120,
                      json={"input": TEXT, "voice": "alloy", "response_format": "pcm"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        for line in r.iter_lines():
            if line:
                lines.append(json.loads(line))
    assert len(lines) >= 2  # one per segment (two sentences)
    pcm = b"".join(base64.b64decode(ln["audio"]) for ln in lines)
    stamps = [t for ln in lines for t in ln["timestamps"]]
    _check_times(stamps, len(pcm) / 2 / 24000)
    assert lines[0]["timestamps"] and lines[0]["audio_format"] == "audio/pcm"


def test_return_timestamps_false_and_no_durations_backend(onnx_server, sine_server):
    r = httpx.post(onnx_server.url + "/dev/captioned_speech", timeout=120,
                   json={"input": "Hello.", "return_timestamps": False, "stream": False})
    assert r.status_code == 200 and r.json()["timestamps"] == []
    r = httpx.post(sine_server.url + "/dev/captioned_speech", json={"input": "Hello.", "voice": "sine_a4"}, timeout=10)
    assert r.status_code == 400
    assert "durations" in r.json()["error"]["message"] and "onnx" in r.json()["error"]["message"]
