"""Crowds found in training days and moved to other hours (speech.sim.crowds), and the headroom
ladder the promise check climbs (speech.sim.crowd_check)."""

from __future__ import annotations

import numpy as np
import pytest

from speech.errors import SimulationInputError
from speech.sim.crowd_check import headroom_ladder
from speech.sim.crowds import crowd_hours, find_crowds, minute_rates, move_crowds

HOURS = 6
TIDE_RPS = 400.0


def _days(crowd_starts_min: list[int | None], factor: float = 1.5, minutes: int = 10, seed: int = 3) -> list[np.ndarray]:
    """Days of HOURS hours at a flat TIDE_RPS (Poisson seconds), each with one crowd of ``factor``
    for ``minutes`` at its start minute (None: no crowd)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in crowd_starts_min:
        rate = np.full(HOURS * 3600, TIDE_RPS)
        if start is not None:
            rate[start * 60 : (start + minutes) * 60] *= factor
        out.append(rng.poisson(rate).astype(float))
    return out


def test_finds_each_days_crowd_where_it_was():
    days = _days([30, 120, 200, None])
    crowds = find_crowds(days)
    assert [(c.day, c.start_min) for c in crowds] == [(0, 29), (1, 119), (2, 199)]  # widened by a minute
    inside = [r for c in crowds for r in c.ratios[1:-1]]
    assert min(inside) > 1.4 and max(inside) < 1.6
    assert crowd_hours(crowds) == (29, 211)


def test_small_excursions_and_two_days_are_no_crowds():
    assert find_crowds(_days([30, 120, 200], factor=1.05)) == []  # under CROWD_RATIO
    assert find_crowds(_days([30, 120, 200], minutes=2)) == []  # shorter than MIN_CROWD_MIN
    assert find_crowds(_days([30, 120])) == []  # a median of two days is their mean


def test_moved_crowds_leave_their_hour_and_land_within_the_crowd_hours():
    days = _days([30, 120, 200, None])
    before = find_crowds(days)
    moved = move_crowds(days, seed=1, crowds=before)
    after = find_crowds(moved)
    lo, hi = crowd_hours(before)
    # each day with a crowd still has one, elsewhere, within the hours crowds were seen
    assert sorted(c.day for c in after) == [0, 1, 2]
    for c in after:
        old = next(b for b in before if b.day == c.day)
        assert c.start_min != old.start_min
        assert lo - 1 <= c.start_min and c.start_min + c.minutes <= hi + 1
    # where the crowd was, the day is back at the tide (within Poisson noise of a minute)
    m = minute_rates(moved)
    for b in before:
        if not any(abs(c.start_min - b.start_min) < b.minutes for c in after if c.day == b.day):
            assert abs(m[b.day, b.start_min + 2 : b.start_min + b.minutes - 2].mean() / TIDE_RPS - 1) < 0.02
    # the requests a crowd adds move with it: totals within a few standard deviations of Poisson noise
    for a, b in zip(days, moved, strict=True):
        assert abs(b.sum() - a.sum()) < 6 * np.sqrt(a.sum())
    np.testing.assert_array_equal(moved[3], days[3])  # no crowd: unchanged


def test_moves_are_reproducible_and_differ_by_seed():
    days = _days([30, 120, 200])
    a, b, c = move_crowds(days, seed=1), move_crowds(days, seed=1), move_crowds(days, seed=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_days_of_different_lengths_are_refused():
    with pytest.raises(SimulationInputError, match="one length"):
        move_crowds([np.ones(3600), np.ones(3600), np.ones(7200)], seed=1)


def test_headroom_ladder_climbs_to_the_largest_crowd():
    assert headroom_ladder(1.15, 1.55) == [1.25, 1.35, 1.45, 1.55]
    assert headroom_ladder(None, 1.3) == [1.1, 1.2, 1.3]
    assert headroom_ladder(1.55, 1.55) == []


def test_a_day_running_higher_all_day_is_no_crowd_and_a_rise_within_the_surge_ratio_neither():
    """diurnal's draws are rescaled to one peak, so whole days run ~1.2x above others: each day is
    read against its own level. With ``core_ratio`` (the seed's surge ratio), a x1.2 rise the plan's
    target already absorbs is no crowd; a x1.5 one is."""
    days = _days([None, None, None, None])
    days[0] = days[0] * 1.2
    assert find_crowds(days) == []
    low = _days([30, 120, 200], factor=1.2)
    assert len(find_crowds(low)) == 3 and find_crowds(low, core_ratio=1.25) == []
    assert len(find_crowds(_days([30, 120, 200]), core_ratio=1.25)) == 3
