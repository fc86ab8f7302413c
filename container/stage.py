"""The G2P stage's text side: what one job says, in order. Sentences (pysbd), cut at the tags the
request may carry ([pause:Ns] always; [voice:name] and [rate:x] with allow_voice_tags or ssml),
each normalized when the G2P language is English, then G2P on the job's current voice and speed.
Runs in the engine's single G2P thread (espeak is not thread-safe); the engine schedules what it
yields."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .backends.base import Backend, Prepared
from .job import Job
from .normalize import normalize
from .settings import Settings
from .tags import CONTROL_TAG, PAUSE_TAG
from .text import iter_segments, pack_segments, split_phonemes, split_segments

PAUSE_MAX_S = 10.0
"""The longest [pause:Ns] honoured; a longer one is cut to this (a request cannot hold a slot
of the gate for minutes with silence)."""


@dataclass(frozen=True)
class Pause:
    """A [pause:Ns] tag: seconds of silence between segments, made without the model."""

    seconds: float


@dataclass(frozen=True)
class Switch:
    """A [voice:name] or [rate:x] tag: the segments after it speak that voice / at that rate."""

    voice: str | None = None
    rate: float | None = None


@dataclass
class Voice:
    """The current voice and speed factors of one job (its tags change them)."""

    voice: str
    base: float = 1.0  # a voice alias's own rate
    rate: float = 1.0  # the last [rate:x]


def segments(job: Job, s: Settings, backend: Backend, english: bool) -> Iterator[str | Pause | Switch]:
    """The texts to synthesize, in order, as the G2P thread reaches them: sentences (pysbd),
    each normalized (English G2P), re-cut when normalization made it longer than
    MAX_SEGMENT_CHARS. Phonemes (/dev/generate_from_phonemes) are cut at spaces only."""
    text = job.text
    if job.phonemes:
        yield from split_phonemes(text, s.max_segment_chars)
        return
    whole = s.serialize and len(text) <= s.max_segment_chars
    raw = iter([text]) if whole else iter_segments(text, s.max_segment_chars)
    if backend.pack_segments and not s.serialize:
        raw = iter(pack_segments(list(raw), s.max_segment_chars))
    for seg in raw:
        if "[" in seg and (CONTROL_TAG if job.tags else PAUSE_TAG).search(seg):
            yield from _with_tags(seg, job, s, english)
            continue
        said = normalize(seg, job.normalization) if english else seg
        if len(said) > s.max_segment_chars and not whole:
            yield from split_segments(said, s.max_segment_chars)
        elif said.strip():
            yield said


def _with_tags(seg: str, job: Job, s: Settings, english: bool) -> Iterator[str | Pause | Switch]:
    """A segment holding tags: the text between them, and a Pause or Switch per tag."""
    pos = 0
    for m in (CONTROL_TAG if job.tags else PAUSE_TAG).finditer(seg):
        said = normalize(seg[pos:m.start()], job.normalization) if english else seg[pos:m.start()]
        if said.strip():
            yield from split_segments(said, s.max_segment_chars)
        pos = m.end()
        if not job.tags:
            yield Pause(min(float(m.group(1)), PAUSE_MAX_S))
        elif m.group("pause") is not None:
            yield Pause(min(float(m.group("pause")), PAUSE_MAX_S))
        elif m.group("voice") is not None:
            yield Switch(voice=m.group("voice").strip().lower())
        else:
            yield Switch(rate=float(m.group("rate")))
    said = normalize(seg[pos:], job.normalization) if english else seg[pos:]
    if said.strip():
        yield from split_segments(said, s.max_segment_chars)


def prepare_next(job: Job, items: Iterator, cur: Voice, s: Settings,
                 backend: Backend) -> tuple[str, Prepared] | Pause | None:
    """One G2P-thread step: the next segment and its G2P, a Pause, or None at the end. A Switch
    changes `cur` for the segments after it; the speed stays within SPEED_MIN..SPEED_MAX."""
    seg = next(items, None)
    while isinstance(seg, Switch):
        if seg.voice is not None:
            cur.voice, base = job.voice_map.get(seg.voice, (job.voice, None))
            cur.base = base or 1.0
        if seg.rate is not None:
            cur.rate = seg.rate
        seg = next(items, None)
    if seg is None or isinstance(seg, Pause):
        return seg
    speed = min(max(job.speed * cur.base * cur.rate, s.speed_min), s.speed_max)
    if job.phonemes:
        return seg, backend.prepare_phonemes(seg, cur.voice, speed)
    if job.timestamps:
        return seg, backend.prepare_timed(seg, cur.voice, speed, job.lang)
    return seg, backend.prepare(seg, cur.voice, speed, job.lang)
