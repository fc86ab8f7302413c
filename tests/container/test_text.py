"""Splitting text into segments and packing them (container/text.py)."""
from container.text import pack_segments, split_segments


def test_split_segments():
    assert split_segments("One. Two! Three?") == ["One.", "Two!", "Three?"]
    long = ", ".join(["word " * 10] * 10)
    segs = split_segments(long, max_chars=120)
    assert all(len(s) <= 120 for s in segs) and len(segs) > 1
    assert " ".join(segs).split() == long.split()  # no word lost or cut
    assert all(s.endswith(",") for s in segs[:-1])  # cut at the clause marks first
    assert split_segments("x" * 250, max_chars=100) == ["x" * 100, "x" * 100, "x" * 50]
    assert split_segments("   ") == []


def test_pack_segments_joins_in_order_within_the_limit():
    segs = split_segments("One. Two! Three? " + "y" * 30)
    assert pack_segments(segs, max_chars=15) == ["One. Two!", "Three?", "y" * 30]
    assert pack_segments(segs, max_chars=16) == ["One. Two! Three?", "y" * 30]
    assert pack_segments(segs, max_chars=300) == ["One. Two! Three? " + "y" * 30]
    assert pack_segments([], 10) == []
    # A segment over the limit is never merged, nor split (split_segments already bounds it).
    assert pack_segments(["a" * 20, "b"], max_chars=10) == ["a" * 20, "b"]
