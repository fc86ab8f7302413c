"""Segment deadlines (container/engine.py)."""
from container.engine import segment_deadline


def test_deadline_orders_first_segments_before_tails():
    # A request arriving 1 s later still has its first segment due before an earlier one's 3rd.
    early_third = segment_deadline(0.0, 3.0, audio_before_s=6.0)
    late_first = segment_deadline(1.0, 3.0, audio_before_s=0.0)
    assert late_first < early_third
