"""The WAV header, streamed and sized (container/audio.py)."""
import struct

from container.audio import wav_header


def test_wav_header_streaming_and_sized():
    h = wav_header(None)
    assert len(h) == 44 and h[:4] == b"RIFF" and h[8:12] == b"WAVE"
    assert struct.unpack("<I", h[40:44])[0] == 0xFFFFFFFF
    h = wav_header(480)
    assert struct.unpack("<I", h[4:8])[0] == 36 + 480
    assert struct.unpack("<I", h[24:28])[0] == 24000
    assert struct.unpack("<I", h[40:44])[0] == 480
