"""24 kHz mono 16-bit audio helpers."""
from __future__ import annotations

import struct

import numpy as np

SAMPLE_RATE = 24000
STREAMING_SIZE = 0xFFFFFFFF


def to_pcm16(audio: np.ndarray) -> bytes:
    a = np.clip(np.asarray(audio, dtype=np.float32).ravel(), -1.0, 1.0)
    return (a * 32767.0).astype("<i2").tobytes()


def wav_header(data_bytes: int | None, sample_rate: int = SAMPLE_RATE) -> bytes:
    """RIFF header for mono s16le. data_bytes=None writes the 0xFFFFFFFF 'unknown length' sizes
    that streaming players accept, because the length is not known when the header leaves."""
    if data_bytes is None:
        riff, data = STREAMING_SIZE, STREAMING_SIZE
    else:
        riff, data = 36 + data_bytes, data_bytes
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
            + b"data" + struct.pack("<I", data))
