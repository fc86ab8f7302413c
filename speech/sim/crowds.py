"""Crowds the training days show, moved to other hours: what a promise is checked on when nobody
can foresee where the next day's crowds fall (docs/design.md §10.12).

A tuned plan's promise (speech.sim.tune.unseen_share_bound) is estimated from the training draws.
When those draws carry flash crowds at random hours (a live stream, an operator's push), five
draws rarely put one on a peak, where it costs the most; the bound then reads a spread the next
days do not keep (two-peak: 0.07 points from seeds 1..5, 0.17 over 30 draws). Resampling what the
training days themselves show fixes that without looking at a judged day:

* :func:`find_crowds`: per minute, each day's rate against the median of the days at that minute
  (the tide; with crowds at random hours the median of three or more days is a day without
  them), divided by the day's own level (:func:`day_levels`); a run of at least
  :data:`MIN_CROWD_MIN` minutes at least :data:`CROWD_RATIO` x the median, widened by a minute on
  each side, is a crowd, kept as its per-minute ratio profile (the promise check keeps only runs
  that also rise beyond the seed's surge ratio: ``core_ratio``).
* :func:`move_crowds`: each day with its own crowds taken out (each second thinned by the
  profile's ratio, a binomial draw: what the day would have had without them) and put back at
  other hours (each second gets Poisson(median rate x (ratio - 1)) more: the crowd as a ratio over
  the tide at its new hour, as the crowds multiply the tide they fall on), the new starts drawn
  uniformly over the hours where the training days had crowds, never overlapping each other.

Pure: arrays in, arrays out, a seeded generator; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.units import EPS

CROWD_RATIO = 1.15
"""A minute is in a crowd when its rate is at least this many times the days' median at that
minute (Poisson noise at 250 requests/s averaged over a minute is under 1 %)."""
MIN_CROWD_MIN = 3
"""Minutes a crowd lasts at least: shorter excursions are bursts the reactive plan answers, not
crowds that need capacity the tide does not."""
MIN_RATE_RPS = 5.0
"""Minutes where the median is below this rate are never a crowd: at a few requests a second the
ratio of two Poisson minutes is noise."""
PLACE_TRIES = 200
"""Draws of a new start before a crowd that overlaps every one of them is put back where it was."""


@dataclass(frozen=True)
class Crowd:
    """One crowd of one training day: where it starts (minute of the day) and its ratio over the
    days' median, minute by minute (each >= 1)."""

    day: int
    start_min: int
    ratios: tuple[float, ...]

    @property
    def minutes(self) -> int:
        return len(self.ratios)


def minute_rates(days: Sequence[np.ndarray]) -> np.ndarray:
    """Requests per second, minute by minute (days x minutes); the days must be whole minutes of
    one length."""
    sizes = {int(np.asarray(a).size) for a in days}
    if len(sizes) != 1 or next(iter(sizes)) % 60:
        raise SimulationInputError(f"crowds are moved between days of one length in whole minutes; got lengths {sorted(sizes)} s")
    return np.stack([np.asarray(a, dtype=float).reshape(-1, 60).mean(axis=1) for a in days])


def find_crowds(days: Sequence[np.ndarray], ratio: float = CROWD_RATIO, min_minutes: int = MIN_CROWD_MIN,
                core_ratio: float | None = None) -> list[Crowd]:
    """The crowds of ``days`` (per-second arrivals, all starting at the same time of day): runs of
    at least ``min_minutes`` minutes at ``ratio`` x the days' median or more, widened by one minute
    each side; with ``core_ratio``, only runs with at least ``min_minutes`` minutes at that ratio or
    more (a rise the plan's surge ratio absorbs is no crowd; the run keeps its ramps). Fewer than
    three days: none (a median of two is their mean, and a crowd raises it)."""
    if len(days) < 3:
        return []
    m = minute_rates(days)
    median = np.median(m, axis=0)
    rel = np.where(median >= MIN_RATE_RPS, m / np.maximum(median, EPS), 1.0)
    # each day against its own level: a day whose whole tide runs higher (diurnal's days are
    # rescaled to one peak, so a day whose spike missed the peak runs ~1.2x above one whose spike
    # hit it) is not hours of crowd
    rel = rel / day_levels(rel, median)[:, None]
    found: list[Crowd] = []
    for d in range(m.shape[0]):
        hot = np.concatenate([[False], rel[d] >= ratio, [False]])
        edges = np.flatnonzero(hot[1:] != hot[:-1])
        for start, end in zip(edges[::2], edges[1::2], strict=True):
            if end - start < min_minutes:
                continue
            if core_ratio is not None and int((rel[d, start:end] >= core_ratio).sum()) < min_minutes:
                continue
            lo, hi = max(0, int(start) - 1), min(m.shape[1], int(end) + 1)
            found.append(Crowd(day=d, start_min=lo, ratios=tuple(float(max(1.0, r)) for r in rel[d, lo:hi])))
    return found


def day_levels(rel: np.ndarray, median: np.ndarray) -> np.ndarray:
    """Each day's level against the days' median: the median of its minutes' ratios where the
    median rate is at least :data:`MIN_RATE_RPS` (1 where none is)."""
    busy = median >= MIN_RATE_RPS
    if not busy.any():
        return np.ones(rel.shape[0])
    return np.median(rel[:, busy], axis=1)


def crowd_hours(crowds: Sequence[Crowd]) -> tuple[int, int] | None:
    """(first minute, last minute + 1) the crowds covered: the hours new starts are drawn from."""
    if not crowds:
        return None
    return min(c.start_min for c in crowds), max(c.start_min + c.minutes for c in crowds)


def move_crowds(days: Sequence[np.ndarray], seed: int, crowds: Sequence[Crowd] | None = None) -> list[np.ndarray]:
    """Each day of ``days`` with its crowds (:func:`find_crowds` unless given) at other hours drawn
    with ``seed``: taken out by binomial thinning, put back as Poisson arrivals over the days'
    median at the new hour. A day without crowds comes back unchanged; the total a crowd adds
    changes only with the tide under its new hour."""
    crowds = find_crowds(days) if crowds is None else list(crowds)
    span = crowd_hours(crowds)
    if span is None:
        return [np.asarray(a, dtype=float).copy() for a in days]
    median_rps = np.median(minute_rates(days), axis=0)
    rng = np.random.default_rng(seed)
    out = []
    for d, a in enumerate(days):
        day = np.asarray(a, dtype=float).copy()
        own = [c for c in crowds if c.day == d]
        for c in own:  # out: each second keeps 1 / ratio of its arrivals
            keep = 1.0 / np.repeat(np.asarray(c.ratios), 60)
            sl = slice(c.start_min * 60, (c.start_min + c.minutes) * 60)
            day[sl] = rng.binomial(day[sl].astype(np.int64), keep)
        taken: list[tuple[int, int]] = []
        for c in own:  # back in: at a start drawn over the crowd hours, clear of the crowds already placed
            start = c.start_min
            latest = max(span[0], span[1] - c.minutes)
            for _ in range(PLACE_TRIES):
                s = int(rng.integers(span[0], latest + 1))
                if all(s + c.minutes <= lo or s >= hi for lo, hi in taken):
                    start = s
                    break
            taken.append((start, start + c.minutes))
            extra = np.repeat(median_rps[start : start + c.minutes] * (np.asarray(c.ratios) - 1.0), 60)
            day[start * 60 : (start + c.minutes) * 60] += rng.poisson(extra)
        out.append(day)
    return out
