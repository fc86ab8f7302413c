"""The official `openai` package against the real server and the real int8 model: every response
format, streamed and not, decoded with decoders independent of the encoder where one exists."""
import io

import av
import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from container.encode import FORMATS
from tests.container.conftest import counter

SHORT = "Good morning to you."  # ~1.5 s of audio: keeps the per-format calls cheap on 2 cores
PARAGRAPH = ("Streaming speech starts playing before the whole text is spoken. "
             "Each sentence is synthesized on its own and sent as soon as it is ready. "
             "The listener hears the first words while the rest is still being computed.")


@pytest.fixture(scope="module")
def client(onnx_server):
    # max_retries=0: an error must surface as the exception, not be retried away.
    return openai.OpenAI(base_url=onnx_server.url + "/v1", api_key="not-checked", max_retries=0, timeout=120)


def decode(fmt: str, data: bytes) -> tuple[np.ndarray, int]:
    """float mono samples and rate. libsndfile (mpg123, libopus, libsndfile's WAV) for what it
    reads; PyAV for AAC (libsndfile has none) and FLAC (a streamed FLAC says 'length unknown',
    which the FLAC format allows and libsndfile's reader refuses)."""
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32767, 24000
    if fmt in ("aac", "flac"):
        with av.open(io.BytesIO(data)) as c:
            frames = [f for f in c.decode(audio=0)]
        rate = frames[0].sample_rate
        pcm = np.concatenate([f.to_ndarray().astype(np.float32).ravel() for f in frames])
        if frames[0].format.name.startswith("s16"):
            pcm /= 32767
        return pcm, rate
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    return audio, rate


def assert_speech(fmt: str, data: bytes, min_s: float, max_s: float):
    audio, rate = decode(fmt, data)
    dur = len(audio) / rate
    assert min_s < dur < max_s, (fmt, dur)
    rms = float(np.sqrt(np.mean(np.square(audio.astype(np.float64)))))
    assert 0.02 < rms < 0.5, (fmt, rms)  # speech, not silence, not clipping noise
    return dur


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_streaming_call(client, fmt):
    # One call per format: the server streams by default whichever way the client reads, so a
    # second call read whole by `create` ran the same server path again (the non-streaming client
    # call is in test_whole_file_has_complete_headers and test_voice_blend_and_speed).
    with client.audio.speech.with_streaming_response.create(
            model="kokoro", voice="nova", input=SHORT, response_format=fmt) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith(f"audio/{ {'mp3': 'mpeg', 'opus': 'ogg'}.get(fmt, fmt)}")
        data = b"".join(r.iter_bytes())
    assert_speech(fmt, data, 0.6, 4.0)


@pytest.mark.parametrize("fmt", ["mp3", "flac", "wav"])
def test_whole_file_has_complete_headers(client, fmt):
    """stream=false (our extension): one body with a Content-Length and length-bearing headers."""
    r = client.audio.speech.create(model="tts-1", voice="echo", input=SHORT, response_format=fmt,
                                   extra_body={"stream": False})
    assert int(r.response.headers["content-length"]) == len(r.content)
    if fmt == "flac":  # libsndfile reads it now: STREAMINFO carries the real sample count
        info = sf.info(io.BytesIO(r.content))
        assert 0.6 < info.duration < 4.0
    if fmt == "wav":
        assert r.content[40:44] != b"\xff\xff\xff\xff"
    assert_speech(fmt, r.content, 0.6, 4.0)


def test_streaming_mp3_arrives_before_synthesis_ends(client, onnx_server):
    # An order, not a stopwatch: the client takes the first bytes and hangs up, and the server
    # counts the request cancelled. Had it sent the audio only once all three sentences were
    # synthesized, the whole response would have been complete (outcome ok) by the first byte.
    # (A complete streamed multi-sentence MP3 is decoded in test_kokoro_fastapi.py.)
    before = httpx.get(onnx_server.url + "/metrics", timeout=10).text
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=PARAGRAPH, response_format="mp3") as r:
        assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"
        assert next(r.iter_bytes())
    after = httpx.get(onnx_server.url + "/metrics", timeout=10).text
    assert counter(after, "speech_requests_total", "cancelled") - counter(
        before, "speech_requests_total", "cancelled") == 1
    assert counter(after, "speech_requests_total", "shed") == counter(before, "speech_requests_total", "shed")


def test_voice_blend_and_object_form(client):
    # SHORT: the checks compare voices with each other, so the three calls need no
    # longer text (a nine-word sentence cost twice the synthesis on 2 cores).
    def pcm(**kw):
        r = client.audio.speech.create(model="tts-1", input=SHORT, response_format="pcm", **kw)
        return np.frombuffer(r.content, "<i2").astype(np.float32) / 32767

    # jf_alpha in the OpenAI voice object form. Speed on this route is test_kokoro_fastapi.py's
    # (0.25 and 4.0 on the real model); a fourth call here checked it once more.
    a, b = pcm(voice={"id": "jf_alpha"}), pcm(voice="jm_kumo")
    blend = pcm(voice="jf_alpha(1)+jm_kumo(1)")
    assert 0.02 < float(np.sqrt(np.mean(blend ** 2)))
    n = min(len(a), len(b), len(blend))
    assert not np.array_equal(blend[:n], a[:n]) and not np.array_equal(blend[:n], b[:n])
    assert not np.array_equal(a[:n], b[:n])


def test_models_list_and_retrieve(client):
    ids = [m.id for m in client.models.list()]
    assert {"kokoro-82m", "tts-1", "tts-1-hd"} <= set(ids)
    assert client.models.retrieve("tts-1").id == "tts-1"
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("whisper-1")
    assert e.value.code == "model_not_found"


def test_voices_listing(onnx_server):
    body = httpx.get(onnx_server.url + "/v1/audio/voices", timeout=10).json()
    assert {"id": "jf_alpha", "name": "jf_alpha", "language": "ja", "gender": "female"} in body["voices"]
    assert {"id": "jm_kumo", "name": "jm_kumo", "language": "ja", "gender": "male"} in body["voices"]
    assert body["blends"] is True
    ids = [v["id"] for v in body["voices"]]
    # every OpenAI built-in name resolves to a voice this backend has
    for name in ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer",
                 "verse", "marin", "cedar"):
        assert body["aliases"][name] in ids
    # Kokoro-FastAPI's pre-0.3 shape for its older clients: bare names, same order
    legacy = httpx.get(onnx_server.url + "/v1/audio/voices?legacy=true", timeout=10).json()
    assert legacy["voices"] == ids
    bad = httpx.get(onnx_server.url + "/v1/audio/voices?legacy=perhaps", timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "legacy"


@pytest.mark.parametrize("path,body,field,hint", [
    ("/v1/audio/speech", {"input": "Hi.", "voice": "alloy", "temperature": 0.3}, "temperature", "input"),
    ("/v1/audio/speech", {"input": "Hi.", "voice": {"id": "alloy", "colour": "red"}}, "colour", "in voice"),
    # lang_code is Kokoro-FastAPI's (accepted since issue 35); a field nobody defines is still a 400
    ("/dev/captioned_speech", {"input": "Hi.", "pitch": 2}, "pitch", "return_timestamps"),
])
def test_unknown_fields_are_a_400_naming_the_field(onnx_server, path, body, field, hint):
    r = httpx.post(onnx_server.url + path, json=body, timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "bad_request"
    assert err["param"] == field and repr(field) in err["message"] and hint in err["message"]
    # the SageMaker route stays lenient: clients there predate the schema
    r = httpx.post(onnx_server.url + "/invocations", json={"text": "Hi.", "temperature": 0.3,
                                                             "stream": False}, timeout=60)
    assert r.status_code == 200


@pytest.mark.parametrize("kwargs,exc,code,param", [
    ({"voice": "nobody"}, openai.BadRequestError, "unknown_voice", "voice"),
    ({"model": "gpt-5"}, openai.NotFoundError, "model_not_found", "model"),
    ({"speed": 9.0}, openai.BadRequestError, "bad_request", "speed"),
    ({"input": ""}, openai.BadRequestError, "empty_text", "input"),
    ({"input": "a" * 4097}, openai.APIStatusError, "text_too_long", "input"),
    ({"stream_format": "ogg"}, openai.BadRequestError, "bad_request", "stream_format"),
    ({"voice": "jf_alpha+nobody"}, openai.BadRequestError, "unknown_voice", "voice"),
])
def test_errors_raise_the_clients_exceptions(client, kwargs, exc, code, param):
    args = {"model": "tts-1", "voice": "alloy", "input": "Hi."} | kwargs
    with pytest.raises(exc) as e:
        client.audio.speech.create(**args)
    assert e.value.code == code and e.value.param == param
    assert e.value.body["message"]  # a sentence the user can act on
    assert e.value.status_code < 500


def test_wrong_response_format_is_a_bad_request(onnx_server):
    # The client's type hints stop "ogg"; a raw request checks the server's answer.
    r = httpx.post(onnx_server.url + "/v1/audio/speech", timeout=10,
                   json={"model": "tts-1", "input": "hi", "voice": "alloy", "response_format": "ogg"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == "response_format"
