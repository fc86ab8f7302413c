"""Pure pieces of the API layer: voice specs and aliases, JSON depth, body limits, encoders."""
import asyncio
import io

import av
import numpy as np
import pytest
import soundfile as sf

from container.encode import FORMATS, encode_all, make_encoder
from container.errors import BadRequest, InvalidJSON, PayloadTooLarge, UnknownVoice
from container.limits import check_content_length, json_depth_exceeds, loads_bounded, read_limited
from container.settings import Settings
from container.voices import DEFAULT_OPENAI_VOICES, parse_alias_table, parse_voice_spec, resolve_alias_table, resolve_voice

AVAILABLE = ("jf_alpha", "jm_kumo")


def test_voice_spec_canonical_form():
    assert parse_voice_spec("jf_alpha").canonical == "jf_alpha"
    assert parse_voice_spec("jf_alpha(3)+jm_kumo(1)").canonical == "jf_alpha(0.7500)+jm_kumo(0.2500)"
    assert parse_voice_spec(" jf_alpha + jm_kumo ").canonical == "jf_alpha(0.5000)+jm_kumo(0.5000)"
    assert parse_voice_spec("a(1)+b(1)+a(2)").parts == (("a", 0.75), ("b", 0.25))
    for bad in ("", "a+", "a(0)", "a(-1)", "a(x)", "(1)", "a b", "+".join("v" * 9)):
        with pytest.raises(BadRequest):
            parse_voice_spec(bad)


def test_resolve_voice():
    aliases = resolve_alias_table(DEFAULT_OPENAI_VOICES, AVAILABLE, "jf_alpha", blends=True)
    assert aliases["alloy"] == "jf_alpha" and aliases["onyx"] == "jm_kumo"
    kw = dict(available=AVAILABLE, aliases=aliases, fallback="jf_alpha", blends=True)
    assert resolve_voice(None, **kw) == "jf_alpha"
    assert resolve_voice("ALLOY", **kw) == "jf_alpha"
    assert resolve_voice("jm_kumo(1)+jf_alpha(1)", **kw) == "jm_kumo(0.5000)+jf_alpha(0.5000)"
    with pytest.raises(UnknownVoice) as e:
        resolve_voice("jf_alpha+nobody", **kw)
    assert "'nobody'" in e.value.detail and e.value.param == "voice"
    with pytest.raises(BadRequest, match="does not blend"):
        resolve_voice("jf_alpha+jm_kumo", **{**kw, "blends": False})


def test_alias_table_config_and_fallback():
    table = parse_alias_table("alloy=af_alloy|jm_kumo, narrator=jf_alpha(2)+jm_kumo(1)")
    assert table == {"alloy": ("af_alloy", "jm_kumo"), "narrator": ("jf_alpha(2)+jm_kumo(1)",)}
    assert parse_alias_table('{"Echo": ["x", "jf_alpha"]}') == {"echo": ("x", "jf_alpha")}
    resolved = resolve_alias_table({**DEFAULT_OPENAI_VOICES, **table}, AVAILABLE, "jf_alpha", blends=True)
    assert resolved["alloy"] == "jm_kumo"  # first candidate this backend has
    assert resolved["narrator"] == "jf_alpha(0.6667)+jm_kumo(0.3333)"
    # a backend that cannot blend, or has none of the candidates, speaks the default voice
    assert resolve_alias_table(table, AVAILABLE, "jf_alpha", blends=False)["narrator"] == "jf_alpha"
    with pytest.raises(ValueError):
        parse_alias_table("alloy")


def test_settings_read_the_tables_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_VOICES", "alloy=jm_kumo")
    monkeypatch.setenv("OPENAI_MODELS", "tts-1, my-model")
    monkeypatch.setenv("MAX_TEXT_CHARS", "10000")
    s = Settings()
    assert s.openai_voices == {"alloy": ("jm_kumo",)} and s.openai_models == ("tts-1", "my-model")
    assert s.max_body_bytes == 12 * 10000 + 4096  # derived from MAX_TEXT_CHARS
    monkeypatch.setenv("MAX_BODY_BYTES", "2048")
    assert Settings().max_body_bytes == 2048
    monkeypatch.setenv("OPENAI_VOICES", "nonsense")
    with pytest.raises(ValueError):
        Settings()


def test_json_depth():
    assert not json_depth_exceeds('{"a": [1, {"b": "[[[[[[[["}]}', 3)
    assert json_depth_exceeds("[" * 4, 3)
    assert not json_depth_exceeds('"\\"[[[[[["', 1)  # escaped quote keeps the string open
    with pytest.raises(InvalidJSON, match="MAX_JSON_DEPTH"):
        loads_bounded("[" * 10000 + "]" * 10000, 32)
    with pytest.raises(InvalidJSON):
        loads_bounded('{"a": ', 32)
    assert loads_bounded('{"a": [[1]]}', 3) == {"a": [[1]]}


def test_body_limits():
    check_content_length("100", 100)
    check_content_length(None, 100)
    with pytest.raises(PayloadTooLarge, match="100 bytes"):
        check_content_length("101", 100)
    with pytest.raises(BadRequest):
        check_content_length("ten", 100)

    seen = []

    async def chunks():
        for _ in range(1000):
            seen.append(1)
            yield b"x" * 40

    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_limited(chunks(), 100))
    assert len(seen) == 3  # stopped reading at the chunk that passed the limit


def _tone(seconds: float) -> bytes:
    t = np.arange(int(24000 * seconds)) / 24000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2").tobytes()


def _duration(fmt: str, data: bytes) -> float:
    if fmt == "pcm":
        return len(data) / 48000
    if fmt in ("aac", "flac"):
        with av.open(io.BytesIO(data)) as c:
            return sum(f.samples for f in c.decode(audio=0)) / 24000
    audio, rate = sf.read(io.BytesIO(data))
    return len(audio) / rate


@pytest.mark.parametrize("fmt", FORMATS)
def test_encoders_stream_in_pieces_and_whole(fmt):
    pcm = _tone(3.0)
    enc = make_encoder(fmt, streaming=True)
    pieces = [enc.feed(pcm[i:i + 48000]) for i in range(0, len(pcm), 48000)] + [enc.finish()]
    assert sum(map(len, pieces[:-1])) > 0.5 * sum(map(len, pieces))  # most bytes before the end
    assert abs(_duration(fmt, b"".join(pieces)) - 3.0) < 0.1
    assert abs(_duration(fmt, encode_all(fmt, pcm)) - 3.0) < 0.1


def test_encoder_close_is_safe_after_partial_output():
    enc = make_encoder("mp3", streaming=True)
    enc.feed(_tone(0.2))
    enc.close()
    enc.close()
    assert enc.finish() == b"" and enc.feed(_tone(0.1)) == b""
