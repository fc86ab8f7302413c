"""Word timestamps from the model's own predicted durations.

Kokoro predicts, for every input token (phoneme, space, punctuation, and the pad at each end),
how many frames of audio it lasts; the decoder then renders exactly those frames (600 samples,
25 ms, per frame at 24 kHz for Kokoro-82M). A word's start and end are the frame counts summed
up to its first and past its last phoneme, so the timestamps describe the audio the request got,
not an estimate from the text.

Word <-> phoneme alignment: the segment is phonemized as a whole (the same phonemes the speech
routes use) and espeak separates words with spaces; when the number of phoneme words matches the
number of text words they pair up one to one. When it does not (numbers, abbreviations: "42" is
two phoneme words), each text word is phonemized on its own and those phonemes are what the
model speaks, so the pairing is exact by construction. Punctuation next to a word (a comma's
pause) is not part of the word's span."""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

# Characters that are pauses or marks, never part of a spoken word's span.
PUNCT = frozenset(';:,.!?¡¿—…"«»“”()[]{}-–\'‘’')
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


def word_of(chunk: str) -> str:
    """The word in a whitespace-separated chunk: surrounding punctuation stripped."""
    return _EDGE.sub("", chunk)


def timed_phonemes(text: str, g2p: Callable[[str], str], vocab, max_tokens: int
                   ) -> tuple[str, list[tuple[str, int, int]]]:
    """(phoneme string of vocabulary characters only, [(word, first, past_last)]) where the
    indices are positions in that string (one token each)."""
    chunks = text.split()
    whole = [g for g in g2p(text).split(" ") if g]
    pieces = whole if len(whole) == len(chunks) else [g2p(c) for c in chunks]
    ps = ""
    spans: list[tuple[str, int, int]] = []
    for i, (chunk, piece) in enumerate(zip(chunks, pieces, strict=True)):
        if i and " " in vocab:
            ps += " "
        kept = "".join(c for c in piece if c in vocab)
        start = len(ps)
        ps += kept
        spoken = [j for j, c in enumerate(kept) if c not in PUNCT and not c.isspace()]
        word = word_of(chunk)
        if word and spoken:
            spans.append((word, start + spoken[0], start + spoken[-1] + 1))
    ps = ps[:max_tokens]
    return ps, [s for s in spans if s[2] <= len(ps)]


def word_times(spans: list[tuple[str, int, int]], durations: np.ndarray, n_samples: int,
               sample_rate: int) -> list[tuple[str, float, float]]:
    """Seconds from the segment's start for each word. `durations` holds the frames of every
    model input token: the leading pad, the phoneme tokens, the trailing pad."""
    d = np.asarray(durations, dtype=np.int64).ravel()
    total = int(d.sum())
    if not spans or total <= 0 or n_samples <= 0:
        return []
    cum = np.concatenate([[0], np.cumsum(d)])
    s_per_frame = n_samples / total / sample_rate  # 600 / 24000 for Kokoro-82M; measured, not assumed
    out = []
    for word, a, b in spans:
        if b + 1 >= len(cum):
            break
        out.append((word, round(float(cum[a + 1] * s_per_frame), 3), round(float(cum[b + 1] * s_per_frame), 3)))
    return out
