"""Word spans and times from durations, on a stand-in G2P (one letter = one phoneme)."""
from __future__ import annotations

import numpy as np

from container.timing import timed_phonemes, word_of, word_times

VOCAB = set("abcdefghijklmnopqrstuvwxyz ,.?!—")


def g2p(text: str) -> str:
    return text.lower()


def test_spans_skip_punctuation_and_pair_words():
    ps, spans = timed_phonemes("Hi, you — there!", g2p, VOCAB, 510)
    assert ps == "hi, you — there!"
    assert [(w, ps[a:b]) for w, a, b in spans] == [("Hi", "hi"), ("you", "you"), ("there", "there")]


def test_mismatched_word_count_falls_back_to_word_by_word():
    calls = []

    def split_numbers(text):
        calls.append(text)
        return "forty two" if text == "42" else text.replace("42", "forty two").lower()

    ps, spans = timed_phonemes("It is 42.", split_numbers, VOCAB, 510)
    assert calls[0] == "It is 42." and calls[1:] == ["It", "is", "42."]  # whole first, then per word
    assert [(w, ps[a:b]) for w, a, b in spans] == [("It", "it"), ("is", "is"), ("42", "forty two")]


def test_truncation_drops_words_past_the_limit():
    ps, spans = timed_phonemes("aaa bbb ccc", g2p, VOCAB, 6)
    assert ps == "aaa bb" and [w for w, _, _ in spans] == ["aaa"]


def test_times_from_durations():
    spans = [("ab", 0, 2), ("c", 3, 4)]  # tokens: a b ' ' c
    durations = np.array([4, 2, 3, 1, 5, 6])  # pad, a, b, space, c, pad (frames)
    n = int(durations.sum()) * 600
    got = word_times(spans, durations, n, 24000)
    assert got == [("ab", 0.1, 0.225), ("c", 0.25, 0.375)]
    assert word_times(spans, durations, 0, 24000) == []
    assert word_of('"Hello,"') == "Hello" and word_of("—") == ""
