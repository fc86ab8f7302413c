"""The audio encoders, streamed and whole (container/encode.py)."""
import io

import av
import numpy as np
import pytest
import soundfile as sf

from container.encode import FORMATS, encode_all, make_encoder


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
