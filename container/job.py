"""One request inside the engine: its text and settings, where its segments stand, and the queue
its audio leaves by (container/engine.py schedules it; container/stage.py says what it speaks)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .normalize import Options as NormalizationOptions

END = object()
"""Put on a job's queue after its last chunk."""


@dataclass(eq=False)
class Job:
    id: str
    segments: list[str]
    voice: str
    speed: float
    arrival: float
    seq: int
    stream: bool
    timestamps: bool = False
    """Word timestamps wanted: each item chunks() yields is (pcm, [(word, start s, end s)])."""
    text: str = ""
    lang: str | None = None
    """espeak language for G2P; None: G2P_LANGUAGE."""
    normalization: NormalizationOptions | None = None
    """normalize.normalize's switches (None: the defaults); English G2P only."""
    volume: float = 1.0
    phonemes: bool = False
    """text is Kokoro phonemes (/dev/generate_from_phonemes): no segmentation, no G2P."""
    tags: bool = False
    """[voice:]/[rate:] tags apply (allow_voice_tags, ssml); [pause:] always does."""
    voice_map: dict = field(default_factory=dict)
    """[voice:name] tag name (lower case) -> (voice id, rate), resolved by the route."""
    released: list = field(default_factory=list)
    """Samples of each segment in order, as released (the timing sidecar's chunks)."""
    voice_rate: float = 1.0
    """The request voice's own rate (a voice_aliases entry with `rate`)."""
    input_tokens: int = 0
    """Model input tokens of every segment so far (OpenAI's usage in speech.audio.done)."""
    listed: bool = False
    """Every segment is known (the G2P stage has reached the end of the text)."""
    out: asyncio.Queue = field(default_factory=asyncio.Queue)
    started: bool = False
    finished: bool = False
    cancelled: bool = False
    first_byte_at: float | None = None
    service_started_at: float | None = None
    """When the first of this job's segments began inference (monotonic s): service time starts."""
    service_alone: bool = False
    """The run that produced the first audio had no other inference in flight from start to end:
    its service time is the uncontended one, comparable with the measured c=1 p95."""
    audio_samples: int = 0
    _results: dict = field(default_factory=dict)
    _words: dict = field(default_factory=dict)
    _next: int = 0
    _released_samples: int = 0

    @property
    def ttfab_ms(self) -> float | None:
        return None if self.first_byte_at is None else (self.first_byte_at - self.arrival) * 1000

    async def chunks(self):
        """PCM16 chunks in order ((pcm, words) pairs with timestamps); raises the ContainerError
        that ended the job, if any."""
        while True:
            item = await self.out.get()
            if item is END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
