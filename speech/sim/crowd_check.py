"""The tuned plan's promise checked on the training days with their crowds moved (speech.sim.crowds),
and the crowd knobs raised until it holds there (docs/design.md §10.12).

Why: the search (speech.sim.tune) judges candidates on the training draws. Where those draws carry
flash crowds at hours nobody can foresee, the bound it keeps reads how much the crowds cost at the
hours they happened to fall; the next day has them elsewhere. Two-peak's tuned plan promised
99.51 % from seeds 1..5 and fell below 99.5 % on 6 of 30 unseen draws. Here the winner is judged
again on the training draws together with the same draws with their crowds moved
(:func:`speech.sim.crowds.move_crowds`, never a judged draw): when its share bound there keeps the
target the promise stands; else the busy-hour headroom (a scheduled surge ratio over the forecast
floors) climbs in :data:`HEADROOM_STEP` steps up to the largest crowd the training days show, and
only when none keeps it does the plan fall back to the fixed fleet of the busiest minute seen.

Pure: arrays in (through the tuner, which simulates), no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from speech.schema.units import EPS
from speech.sim.crowds import find_crowds, move_crowds

MOVED_DAY_ID = 10_000
"""Ids of moved draws in the tuner's cache: apart from the training draws' ids (0, 1, ...)."""
HEADROOM_STEP = 0.1
"""The busy-hour headroom ladder's step, from the winner's headroom up to the largest crowd."""
MOVE_SEED = 45
"""The generator seed new crowd hours are drawn with (any fixed value: the check is reproducible)."""
MOVES_PER_DAY = 3
"""Moved copies of each training day (each with its own draw of hours): with one, where five
moves happen to land (three of five on two-peak's 10:00 peak with seed 45) decides the promise."""


@dataclass
class CrowdCheck:
    """What the check found: the crowds it moved, the winner judged with them, and the plan kept."""

    crowds: int
    """Crowds found in the training draws (speech.sim.crowds.find_crowds)."""
    moved_draws: int
    winner: object
    """The search's winner (a speech.sim.tune.Candidate) judged on the training and moved draws."""
    chosen: object
    """What is kept: the winner when its bound keeps the target there, else the cheapest raise that
    does, else the fixed fleet, else the highest bound."""
    tried: list = field(default_factory=list)
    """(label, candidate) of every raise judged, in order."""

    @property
    def raised(self) -> bool:
        return self.chosen is not self.winner


def headroom_ladder(current: float | None, top: float, step: float = HEADROOM_STEP) -> list[float]:
    """Busy-hour headrooms above ``current`` (None: 1) in ``step`` steps, ending at ``top`` (the
    largest crowd the training days show); empty when ``top`` is not above ``current``."""
    start = 1.0 if current is None else current
    if top <= start + EPS:
        return []
    n = int(math.ceil((top - start) / step - EPS))
    return [round(min(top, start + step * i), 4) for i in range(1, n + 1)]


def check_on_moved_crowds(tuner, winner, days: Sequence[tuple[int, np.ndarray]], seed: int = MOVE_SEED,
                          moves: int = MOVES_PER_DAY) -> CrowdCheck | None:
    """``winner`` (the search's, a speech.sim.tune.Candidate) on ``days`` plus ``moves`` copies of
    them with their crowds moved (seeds ``seed``, ``seed + 1``, ...); None when the days show no crowds (or are not whole days of one length).
    Raises, in order, each busy-hour headroom of :func:`headroom_ladder` (forecast floors at the
    winner's quantile, or the tuner's default), then the fixed-peak floor without forecast floors;
    keeps the first whose share bound on all the draws keeps the target."""
    arrays = [a for _, a in days]
    if len(arrays) < 3 or len({a.size for a in arrays}) != 1 or arrays[0].size % 60:
        return None
    crowds = find_crowds(arrays)
    if not crowds:
        return None
    moved = [(MOVED_DAY_ID + i, a) for i, a in
             enumerate(a for m in range(moves) for a in move_crowds(arrays, seed + m, crowds))]
    judged = [*days, *moved]
    first = tuner.candidate(winner.knobs, judged)
    check = CrowdCheck(crowds=len(crowds), moved_draws=len(moved), winner=first, chosen=first)
    if first.share_bound.bound >= tuner.slo_share:
        return check
    k = winner.knobs
    raises = []
    if tuner.forecast_history is not None:
        top = max([1.0, *tuner.headrooms()])
        raises += [(f"busy headroom x{h:g}", replace(k, busy_headroom=h, scheduled_floors=False))
                   for h in headroom_ladder(k.busy_headroom, top)]
    fixed = tuner.fixed_peak_instances()
    if fixed is not None and fixed > k.min_instances:
        raises.append((f"fixed fleet of {fixed}", replace(k, min_instances=fixed, scheduled_floors=False,
                                                           forecast_quantile=None, busy_headroom=None)))
    best = first
    for label, knobs in raises:
        c = tuner.candidate(knobs, judged)
        if c is None:
            continue
        check.tried.append((label, c))
        if c.share_bound.bound >= tuner.slo_share:
            check.chosen = c
            return check
        if c.share_bound.bound > best.share_bound.bound + EPS:
            best = c
    check.chosen = best
    return check
