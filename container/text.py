"""Text -> segments. Segments are what we synthesize and stream one by one.

Sentences come from pysbd (rule-based sentence boundary detection, the Golden Rules set), which
knows abbreviations, initials and decimals: "Dr. Smith met Mr. Jones at 3 p.m. today." is one
sentence, where a regex on ". " made four pieces, each synthesized alone with its own pause.
pysbd's cost grows faster than the text (measured: 2.6 ms for 212 characters, 115 ms for 4,240
in one call), so `sentences` feeds it a window at a time and yields as it goes: the first
segment is ready after one window, whatever the length of the text.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterator

_CLAUSE = re.compile(r"(?<=[,、，;:])\s*")
_LINES = re.compile(r"\n+")
# Characters pysbd looks at per call: a few sentences, so a window's cost stays in the
# milliseconds while the sentence before the window's last one has its full context.
WINDOW_CHARS = 400
_local = threading.local()


def _segmenter():
    seg = getattr(_local, "segmenter", None)
    if seg is None:
        import pysbd
        seg = _local.segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return seg


def sentences(text: str, window: int = WINDOW_CHARS) -> Iterator[str]:
    """Sentences of `text` in order, stripped; a line break always ends one (lists, headings)."""
    for line in _LINES.split(text):
        rest = line.strip()
        while rest:
            if len(rest) <= window:
                spans = _segmenter().segment(rest)
                yield from (s.sent.strip() for s in spans if s.sent.strip())
                break
            size = window
            while True:
                spans = _segmenter().segment(rest[:size])
                # The window's last sentence may be cut by the window: keep it for the next round.
                if len(spans) > 1 or size >= len(rest):
                    break
                size *= 2  # one sentence longer than the window: look further
            if size >= len(rest):
                yield from (s.sent.strip() for s in spans if s.sent.strip())
                break
            yield from (s.sent.strip() for s in spans[:-1] if s.sent.strip())
            rest = rest[spans[-1].start:].strip()


def iter_segments(text: str, max_chars: int = 300) -> Iterator[str]:
    """Sentences; one longer than max_chars is cut at clause marks, then at spaces, because the
    model takes at most ~510 phonemes and long segments delay the first byte."""
    for sent in sentences(text):
        if len(sent) <= max_chars:
            yield sent
            continue
        cur = ""
        for piece in _CLAUSE.split(sent):
            for word in _hard_wrap(piece, max_chars):
                if cur and len(cur) + 1 + len(word) > max_chars:
                    yield cur
                    cur = word
                else:
                    cur = f"{cur} {word}".strip()
        if cur:
            yield cur


def split_segments(text: str, max_chars: int = 300) -> list[str]:
    return list(iter_segments(text, max_chars))


def pack_segments(segments: list[str], max_chars: int = 300) -> list[str]:
    """Join consecutive segments (in order, with one space) while the result stays within
    max_chars; a segment already longer than max_chars stays on its own."""
    out: list[str] = []
    for seg in segments:
        if out and len(out[-1]) + 1 + len(seg) <= max_chars:
            out[-1] = f"{out[-1]} {seg}"
        else:
            out.append(seg)
    return out


def _hard_wrap(piece: str, max_chars: int) -> list[str]:
    if len(piece) <= max_chars:
        return [piece] if piece.strip() else []
    words, out, cur = piece.split(), [], ""
    for w in words:
        while len(w) > max_chars:
            if cur:
                out.append(cur)
                cur = ""
            out.append(w[:max_chars])
            w = w[max_chars:]
        if cur and len(cur) + 1 + len(w) > max_chars:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        out.append(cur)
    return out


_PHONEME_STOP = re.compile(r"(?<=[.!?;:])\s+")


def split_phonemes(phonemes: str, max_chars: int = 300) -> list[str]:
    """Kokoro phonemes cut after sentence punctuation, then at spaces within max_chars (the
    model's context is 510 tokens; phonemes are one token per character)."""
    out: list[str] = []
    for piece in _PHONEME_STOP.split(phonemes.replace("\n", " ").strip()):
        out.extend(_hard_wrap(piece.strip(), max_chars))
    return out
