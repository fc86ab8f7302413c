"""Text -> segments. Segments are what we synthesize and stream one by one."""
from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.!?。！？;:])\s+|\n+")
_CLAUSE = re.compile(r"(?<=[,、，])\s*")


def split_segments(text: str, max_chars: int = 300) -> list[str]:
    """Sentences first; a sentence longer than max_chars is cut at clause marks, then at spaces,
    because the model takes at most ~510 phonemes and long segments delay the first byte."""
    out: list[str] = []
    for sent in _SENTENCE.split(text.strip()):
        sent = sent.strip()
        if not sent:
            continue
        if len(sent) <= max_chars:
            out.append(sent)
            continue
        cur = ""
        for piece in _CLAUSE.split(sent):
            for word in _hard_wrap(piece, max_chars):
                if cur and len(cur) + 1 + len(word) > max_chars:
                    out.append(cur)
                    cur = word
                else:
                    cur = f"{cur} {word}".strip()
        if cur:
            out.append(cur)
    return out


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
