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
from typing import TYPE_CHECKING

import numpy as np

from speech.schema.units import EPS
from speech.sim.artifact import CrowdCheckRecord
from speech.sim.crowds import find_crowds, move_crowds
from speech.sim.knobs import FORECAST_QUANTILES, Candidate

if TYPE_CHECKING:
    from speech.sim.tune import Tuner

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
    winner: Candidate
    """The search's winner (a speech.sim.tune.Candidate) judged on the training and moved draws."""
    chosen: Candidate
    """What is kept: the winner when its bound keeps the target there, else the first raise that
    does, else the winner (its promise then below the target: :attr:`kept` False)."""
    tried: list[tuple[str, Candidate | None]] = field(default_factory=list)
    """(label, candidate or None where it fell below the target on a draw) of every raise judged,
    and the descent from the kept raise when it found a cheaper plan (Tuner.search)."""
    slo_share: float = 0.0
    draws: list[tuple[int, np.ndarray]] = field(default_factory=list, repr=False)
    """The draws every candidate here is judged on: the training draws, then their moved copies."""

    @property
    def raised(self) -> bool:
        return self.chosen is not self.winner

    @property
    def kept(self) -> bool:
        """The chosen plan's share bound on the training and moved draws keeps the target."""
        return self.chosen.share_bound.bound >= self.slo_share


def check_record(c: CrowdCheck) -> CrowdCheckRecord:
    """The check as ``bench tune``'s artifact records it."""
    label = next((lab for lab, x in c.tried if x is c.chosen), "the search's winner")
    return CrowdCheckRecord(
        crowds=c.crowds, moved_draws=c.moved_draws, winner_bound=round(c.winner.share_bound.bound, 6),
        tried=[f"{lab}: " + ("below the target on a draw" if x is None else f"bound {100 * x.share_bound.bound:.3f}%")
               for lab, x in c.tried],
        chosen=label, kept=c.kept)


def headroom_ladder(current: float | None, top: float, step: float = HEADROOM_STEP) -> list[float]:
    """Busy-hour headrooms above ``current`` (None: 1) in ``step`` steps, ending at ``top`` (the
    largest crowd the training days show); empty when ``top`` is not above ``current``."""
    start = 1.0 if current is None else current
    if top <= start + EPS:
        return []
    n = int(math.ceil((top - start) / step - EPS))
    return [round(min(top, start + step * i), 4) for i in range(1, n + 1)]


def check_on_moved_crowds(tuner: Tuner, winner: Candidate, days: Sequence[tuple[int, np.ndarray]], seed: int = MOVE_SEED,
                          moves: int = MOVES_PER_DAY) -> CrowdCheck | None:
    """``winner`` (the search's, a speech.sim.tune.Candidate) on ``days`` plus ``moves`` copies of
    them with their crowds moved (seeds ``seed``, ``seed + 1``, ...); None when the days show no
    crowds (or are not whole days of one length).
    Raises, in order, each busy-hour headroom of :func:`headroom_ladder` (forecast floors at the
    winner's quantile, or the tuner's default; from a winner that is the fixed fleet, on the seed's
    floor with forecast floors at the lowest quantile), then the fixed-peak floor without forecast floors;
    keeps the first whose share bound on all the draws keeps the target; none: the winner, its
    bound on these draws (below the target) what the promise states."""
    arrays = [a for _, a in days]
    if len(arrays) < 3 or len({a.size for a in arrays}) != 1 or arrays[0].size % 60:
        return None
    # a crowd rises beyond the surge ratio the plan's target already absorbs (the seed's: the
    # user's); diurnal's x1.2 spikes under a 1.25 surge ratio are not crowds, two-peak's x1.5 are
    crowds = find_crowds(arrays, core_ratio=tuner.inputs.surge_ratio)
    if not crowds:
        return None
    moved = [(MOVED_DAY_ID + i, a) for i, a in
             enumerate(a for m in range(moves) for a in move_crowds(arrays, seed + m, crowds))]
    judged = [*days, *moved]
    first = tuner.candidate(winner.knobs, judged)
    if first is None:  # the winner's plan was built by the search: not reached
        return None
    check = CrowdCheck(crowds=len(crowds), moved_draws=len(moved), winner=first, chosen=first, slo_share=tuner.slo_share,
                       draws=judged)
    if first.share_bound.bound >= tuner.slo_share:
        return check
    k = winner.knobs
    raises = []
    fixed = tuner.fixed_peak_instances()
    if tuner.forecast_history is not None:
        top = max([1.0, *tuner.headrooms()])
        base, start = k, k.busy_headroom
        if fixed is not None and k.min_instances >= fixed:
            # the winner is the fixed fleet of the busiest minute seen: the crowd knobs are tried on
            # the reactive plan under it (the seed's floor, forecast floors at the cheapest quantile),
            # which is what "a fixed fleet only when nothing reactive keeps the promise" asks
            base = replace(k, min_instances=tuner.seed_knobs().min_instances,
                           forecast_quantile=k.forecast_quantile or FORECAST_QUANTILES[0])
            start = None
        raises += [(f"busy headroom x{h:g}", replace(base, busy_headroom=h, scheduled_floors=False))
                   for h in headroom_ladder(start, top)]
    if fixed is not None and fixed > k.min_instances:
        raises.append((f"fixed fleet of {fixed}", replace(k, min_instances=fixed, scheduled_floors=False,
                                                           forecast_quantile=None, busy_headroom=None)))
    # each raise stops at its first draw below the target (its bound is at most its lowest draw),
    # the winner's lowest draws first
    order = sorted(range(len(judged)), key=lambda j: first.days[j].within_slo_share)
    for label, knobs in raises:
        if tuner.plan_for(knobs) is None:
            continue
        c, _ = tuner._judge(knobs, judged, order, math.inf, stop_on_miss=True)
        check.tried.append((label, c))
        if c is not None and c.share_bound.bound >= tuner.slo_share:
            check.chosen = c
            return check
    return check
