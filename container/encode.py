"""PCM16 mono 24 kHz -> the response formats OpenAI's speech API offers, chunk by chunk.

pcm and wav are written here (a header and the samples). mp3, opus, aac and flac go through FFmpeg's
encoders (LAME, libopus, FFmpeg's native AAC, FLAC) in the PyAV wheels. libsndfile (soundfile) was
tried first: it has no AAC at all, its MP3 writer patches the first frame at close by seeking back
to byte 0 (a streamed copy keeps a zeroed placeholder and libsndfile's own reader then decodes
0.6 s of a 3 s file), and its Ogg/Opus writer cannot flush a page when a segment ends. FFmpeg's
muxers write to a non-seekable sink as they go (Ogg pages every OPUS_PAGE_US, ADTS frames, FLAC
frames with "unknown length" in STREAMINFO), which is what streaming needs. Without streaming the
sink is seekable, so headers carry the real length (FLAC STREAMINFO, the MP3 Xing frame).

Each encoder is used by one request at a time, from worker threads (encoding is CPU work that
must not run on the event loop); `close` may come from another thread and waits for a running call.
"""
from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from .audio import SAMPLE_RATE, wav_header

if TYPE_CHECKING:
    from av.audio.stream import AudioStream

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
FORMATS: tuple[str, ...] = ("mp3", "opus", "aac", "flac", "wav", "pcm")

MEDIA_TYPES: dict[ResponseFormat, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg; codecs=opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}

# muxer, codec, bit rate (bits/s; None = lossless), muxer options when streaming
_FFMPEG = {
    "mp3": ("mp3", "libmp3lame", 64_000, {"write_xing": "0"}),
    "opus": ("ogg", "libopus", 32_000, {}),
    "aac": ("adts", "aac", 64_000, {}),
    "flac": ("flac", "flac", None, {}),
}
# An Ogg page leaves once it holds this much audio, so a segment's tail waits at most this long
# for the next segment (FFmpeg's default is a full second).
OPUS_PAGE_US = 100_000


class Encoder:
    media_type: str

    def feed(self, pcm16: bytes) -> bytes:
        """Encode more samples; returns the bytes ready to send (may be empty)."""
        raise NotImplementedError

    def finish(self) -> bytes:
        """Flush and return the rest; the encoder is closed afterwards."""
        raise NotImplementedError

    def close(self) -> None:
        """Release without output (client went away)."""


class PcmEncoder(Encoder):
    media_type = MEDIA_TYPES["pcm"]

    def feed(self, pcm16: bytes) -> bytes:
        return pcm16

    def finish(self) -> bytes:
        return b""


class WavEncoder(Encoder):
    """Streaming: a header with 'unknown length' sizes, then samples as they come. Otherwise the
    samples are held and the header carries their real size."""

    media_type = MEDIA_TYPES["wav"]

    def __init__(self, streaming: bool):
        self.streaming = streaming
        self._started = False
        self._held: list[bytes] = []

    def feed(self, pcm16: bytes) -> bytes:
        if not self.streaming:
            self._held.append(pcm16)
            return b""
        if not self._started:
            self._started = True
            return wav_header(None) + pcm16
        return pcm16

    def finish(self) -> bytes:
        if self.streaming:
            return b"" if self._started else wav_header(None)
        data = b"".join(self._held)
        self._held = []
        return wav_header(len(data)) + data


class _AppendSink:
    """Write-only, non-seekable: what FFmpeg writes is taken out and sent as it comes."""

    def __init__(self):
        self._buf = bytearray()

    def write(self, b) -> int:
        self._buf += b
        return len(b)

    def take(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


class FFmpegEncoder(Encoder):
    def __init__(self, fmt: ResponseFormat, streaming: bool, sample_rate: int = SAMPLE_RATE):
        import av  # imported on first use: pcm/wav-only deployments never load FFmpeg

        muxer, codec, bit_rate, stream_opts = _FFMPEG[fmt]
        self.media_type = MEDIA_TYPES[fmt]
        self.streaming = streaming
        self.sample_rate = sample_rate
        self._sink = _AppendSink() if streaming else io.BytesIO()
        options = dict(stream_opts) if streaming else {}
        if fmt == "opus":
            options["page_duration"] = str(OPUS_PAGE_US)
        self._lock = threading.Lock()
        self._closed = False
        self._container = av.open(self._sink, mode="w", format=muxer, options=options)
        try:
            # Every codec in _FFMPEG is an audio codec, so the stream is an audio stream.
            self._stream = cast("AudioStream", self._container.add_stream(codec, rate=sample_rate, layout="mono"))
            if bit_rate:
                self._stream.bit_rate = bit_rate
        except Exception:
            self._container.close()
            raise
        self._av = av

    def _take(self) -> bytes:
        return self._streamed().take() if self.streaming else b""

    def _streamed(self) -> _AppendSink:
        # A streaming encoder writes into an _AppendSink, a whole-file one into a BytesIO (__init__).
        return cast(_AppendSink, self._sink)

    def feed(self, pcm16: bytes) -> bytes:
        if not pcm16:
            return b""
        with self._lock:
            if self._closed:
                return b""
            samples = np.frombuffer(pcm16, dtype="<i2").reshape(1, -1)
            frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = self.sample_rate
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
            return self._take()

    def finish(self) -> bytes:
        with self._lock:
            if self._closed:
                return b""
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            self._closed = True
            return self._streamed().take() if self.streaming else cast(io.BytesIO, self._sink).getvalue()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._container.close()
                except Exception:  # half-written output we are throwing away anyway
                    pass


def make_encoder(fmt: str, streaming: bool) -> Encoder:
    if fmt == "pcm":
        return PcmEncoder()
    if fmt == "wav":
        return WavEncoder(streaming)
    if fmt in _FFMPEG:
        return FFmpegEncoder(cast(ResponseFormat, fmt), streaming)  # _FFMPEG's keys are response formats
    raise ValueError(f"unknown response format {fmt!r}; one of {', '.join(FORMATS)}")


def encode_all(fmt: str, pcm16: bytes) -> bytes:
    """A whole utterance in one piece, headers complete (non-streaming responses)."""
    enc = make_encoder(fmt, streaming=False)
    try:
        return enc.feed(pcm16) + enc.finish()
    finally:
        enc.close()
