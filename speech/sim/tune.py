"""``bench tune``'s search: the deployable scaling parameters with the fewest instance-hours that
keep the SLO share on simulated days (docs/design.md §10.10).

Pure: traces come in as arrays (a ``day(seed)`` callable makes them), no I/O, no clock. The seed
(the plan's own formulas) is where the search starts and what every tuned value is printed next to.

* The knobs (:class:`Knobs`) are plan inputs (speech.schema.config.PlanInputs): the surge ratio,
  the target as a share of Q_max, the scale-out alarm's datapoints, the floor, and the scale-in
  step share, window and cooldown. The plan checks each against its safety bound and refuses what
  lies outside; the search skips those.
* Choosing: coordinate descent from the seed over each knob's candidates, twice, on independent
  draws of the traffic (``bench tune --draws``): a candidate wins when the share it predicts for
  draws it has NOT seen (:func:`unseen_share_bound`: a one-sided prediction bound from the mean and
  spread of its draws, never above their lowest) keeps the target and it costs fewer mean
  instance-hours. From an incumbent that misses the target every one-knob move is judged and the
  cheapest that keeps it taken (none: the pass climbs by the highest bound). A challenger stops being simulated at the
  first draw that shows it cannot win (:meth:`Tuner.challenge`). Where one knob at a time moves
  nothing, pairs of the moves that were cheaper but missed are tried (:meth:`Tuner.pair_moves`).
* Checking: the winner and the seed on held-out days and on perturbed days (spikes raised by the
  surge ratio, the day shifted by an hour); the verdict says whether the promise held.
* Running: every simulated day is a pure function of (instance model, scaling numbers, arrivals)
  (:func:`simulate_day`). Where the search knows it will need several, it asks for them at once
  (:meth:`Tuner.prefetch`) through the ``map_fn`` it was given: the builtin ``map`` here, a process
  pool's map at the CLI (``bench tune --jobs``). With a ``width`` above 1 it also runs a
  challenger's next draws side by side before knowing it will need them. What the search reads, and
  so every result and the evaluation count, is the same whatever the map and width.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.bounds import SURGE_RATIO
from speech.schema.units import EPS
from speech.sim.crowd_check import CrowdCheck, check_on_moved_crowds
from speech.sim.evaluate import Evaluator
from speech.sim.fleet import Summary
from speech.sim.knobs import (
    AVERAGE_FORECAST_QUANTILES,
    DEFAULT_HEADROOM_QUANTILE,
    FORECAST_QUANTILES,
    HEADROOMS,
    HOT_LOAD_KNOBS,
    KNOBS,
    LOW_FORECAST_QUANTILES,
    MAX_HEADROOM,
    REASONS,
    SURGE_AVERAGE_SHARES,
    Candidate,
    Knobs,
    Mapper,
    describe_plan,
    floor_day_hours,
    knob_reasons,
    perturbations,
    simulate_day,
)
from speech.sim.policies import fixed_peak_size
from speech.sim.promise import SPREAD_TEST_LEVEL, ShareBound, block_share_sd, unseen_share_bound
from speech.sim.traces import peak_rps

__all__ = [
    "DEFAULT_HEADROOM_QUANTILE", "FORECAST_QUANTILES", "HEADROOMS", "HOT_LOAD_KNOBS", "KNOBS", "LOW_FORECAST_QUANTILES",
    "MAX_HEADROOM", "MAX_PAIR_MOVES", "REASONS",
    "SIMULATOR_VERSION", "SPREAD_TEST_LEVEL", "Candidate", "Evaluator", "Knobs", "Mapper", "ShareBound", "Tuner",
    "block_share_sd", "describe_plan", "floor_day_hours", "knob_reasons", "perturbations", "simulate_day", "unseen_share_bound",
]
"""The search's names with those of the modules it was split into (speech.sim.knobs, speech.sim.promise,
speech.sim.evaluate), so callers keep one import."""

MAX_PAIR_MOVES = 16
"""Two-knob moves :meth:`Tuner.search` tries at a one-knob local optimum (:meth:`Tuner.pair_moves`),
cheapest first. A pair that misses stops at its first draw below the target, so the step costs
between 16 and 16 x the draws simulated draws; it runs only where a pass moved nothing."""
SIMULATOR_VERSION = "speech.sim 3: one capacity change at a time, Erlang-k service, whole-trace floor, superposed traces"


class Tuner(Evaluator):
    """The search over the knobs (:meth:`search`) on an :class:`Evaluator`'s cached days."""

    simulated_plain: int | None = None
    """With a forecast history: the days :meth:`search` had simulated when its plain descent ended
    (the rest of :attr:`simulated` is the forecast descent's)."""

    plain_winner: Candidate | None = None
    """With a forecast history: the plain descent's winner, which the one :meth:`search` returns is
    never worse than (:meth:`better`)."""

    crowd_check: CrowdCheck | None = None
    """What the last :meth:`search` found on the training days with their crowds moved (None: not
    run, no forecast history, or no crowds)."""

    def headrooms(self) -> list[float]:
        """The busy-hour headroom candidates: :data:`HEADROOMS` and the largest crowd the training
        draws show over the forecast (rounded up to 0.05), at most :data:`MAX_HEADROOM`."""
        if self.forecast_history is None or not self.train_days:
            return []
        from speech.plan.forecast import crowd_ratio

        crowd = crowd_ratio(self.forecast(DEFAULT_HEADROOM_QUANTILE), self.train_days)
        top = min(MAX_HEADROOM, math.ceil(crowd * 20 - EPS) / 20)
        return sorted({h for h in (*HEADROOMS, top) if 1.0 < h <= max(top, HEADROOMS[0])})

    def challenge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]], incumbent: Candidate) -> Candidate | None:
        """``k`` judged on ``days`` against ``incumbent``, or None as soon as it cannot beat it: while
        the incumbent's share bound keeps the target, a challenger that misses it on one draw (its
        bound is at most its lowest draw), or whose instance-hours so far already reach the
        incumbent's mean, loses whatever the other draws say. Draws run in the order of the
        incumbent's lowest share first, where a miss is likeliest."""
        return self._challenge(k, days, incumbent)[0]

    def _challenge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]],
                   incumbent: Candidate) -> tuple[Candidate | None, float | None]:
        """:meth:`challenge`, and when ``k`` lost only because a draw missed the target while
        costing less so far: the mean instance-hours of the draws it ran (a near miss, what
        :meth:`pair_moves` combines); else None."""
        if self.plan_for(k) is None:
            return None, None
        feasible = incumbent.share_bound.bound >= self.slo_share
        order = sorted(range(len(days)), key=lambda j: incumbent.days[j].within_slo_share)
        return self._judge(k, days, order, incumbent.hours if feasible else math.inf, stop_on_miss=feasible)

    def _judge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]], order: Sequence[int], cap_hours: float,
               *, stop_on_miss: bool) -> tuple[Candidate | None, float | None]:
        """``k`` on ``days`` in ``order``: the candidate, or (None, None) once its instance-hours so
        far reach ``cap_hours`` (it can no longer be cheaper), or with ``stop_on_miss`` (None, the mean
        hours of the draws it ran) at its first draw below the target while it still cost less (a
        near miss; None instead of the mean when it did not)."""
        got: dict[int, Summary] = {}
        for i, j in enumerate(order):
            if self.width > 1:  # the next draws side by side: the stops below may leave some unread
                self.prefetch((k, days[jj]) for jj in order[i:i + self.width])
            got[j] = s = self.run(k, *days[j])
            if sum(x.instance_hours for x in got.values()) / len(days) >= cap_hours - EPS:
                return None, None
            if stop_on_miss and s.within_slo_share < self.slo_share:
                mean_so_far = sum(x.instance_hours for x in got.values()) / len(got)
                return None, (mean_so_far if mean_so_far < cap_hours - EPS else None)
        got_all = [got[j] for j in range(len(days))]
        return Candidate(k, got_all, self.floors_of(days), self.miss_chance), None

    def _prefetch_first(self, moves: Sequence[Knobs], days: Sequence[tuple[int, np.ndarray]], at: Candidate) -> None:
        """Each move on the draw where ``at`` has its lowest share: the first each challenge runs."""
        lowest = min(range(len(days)), key=lambda j: at.days[j].within_slo_share)
        self.prefetch((k, days[lowest]) for k in moves)

    def cheapest_keeping(self, at: Candidate, days: Sequence[tuple[int, np.ndarray]]) -> Candidate:
        """From an incumbent whose share bound misses the target: the cheapest one-knob move whose
        bound keeps it, or ``at`` when none does (the pass then climbs by the highest bound, as
        before). A move stops being simulated at its first draw below the target, or once it costs
        more than a move that keeps it.

        Why not the first move that helps: on two-peak days the seed misses, and the first knob in
        :data:`KNOBS` that keeps the target (a lower surge ratio) costs a third more than a later
        one (a higher floor). First-improvement descent would settle near the expensive one."""
        order = sorted(range(len(days)), key=lambda j: at.days[j].within_slo_share)
        moves = [k for name in self.knob_names() for v in self.choices(at.knobs)[name]
                 if v != getattr(at.knobs, name) and self.plan_for(k := move(at.knobs, name, v)) is not None]
        # screen on the draw where a miss is likeliest, then judge the cheapest there first, so the
        # first move that keeps the target caps what the rest may cost
        self.prefetch((k, days[order[0]]) for k in moves)
        first = {k: self.run(k, *days[order[0]]) for k in moves}
        live = sorted((k for k in moves if first[k].within_slo_share >= self.slo_share),
                      key=lambda k: first[k].instance_hours)
        best: Candidate | None = None
        for k in live:  # stop at a draw below the target, or once dearer than a move that keeps it
            c, _ = self._judge(k, days, order, math.inf if best is None else best.hours, stop_on_miss=True)
            if c is not None and c.share_bound.bound >= self.slo_share:
                best = c
        return best if best is not None else at

    def pair_moves(self, at: Candidate, near: Sequence[tuple[str, Any, float]],
                   limit: int = MAX_PAIR_MOVES) -> list[Knobs]:
        """Two-knob moves from ``at``: every pair of near misses (knob, value, mean instance-hours
        of the draws it ran) on different knobs, cheapest pair first, at most ``limit``.

        Why: one knob's saving can need another's safety, and the fleet's response to them is not
        additive. On azure-conv:peak=500 a floor of 21 alone and a 60 s scale-in window alone each
        cost less than the seed and miss the target; together they keep it at 1.22x the floor, where
        the seed costs 1.31x. Coordinate descent, one knob at a time, never sees that."""
        pairs = sorted(((h1 + h2, replace(at.knobs, **{n1: v1, n2: v2}))
                        for (n1, v1, h1), (n2, v2, h2) in itertools.combinations(near, 2) if n1 != n2),
                       key=lambda p: p[0])
        return [k for _, k in pairs[:limit]]

    def better(self, a: Candidate, b: Candidate) -> bool:
        """a beats b: a's share bound for unseen draws (:func:`unseen_share_bound`) keeps the target
        where b's does not, or both keep it and a is cheaper, or neither does and a's bound is higher."""
        bound_a, bound_b = a.share_bound.bound, b.share_bound.bound
        ok_a, ok_b = bound_a >= self.slo_share, bound_b >= self.slo_share
        if ok_a != ok_b:
            return ok_a
        if ok_a:
            return a.hours < b.hours - EPS
        return bound_a > bound_b + EPS

    def fixed_peak_instances(self) -> int | None:
        """The fleet bench simulate's fixed-peak policy (speech.sim.policies) keeps for the training
        draws: instances_for(their busiest minute, the seed plan's X at the target), at least the seed
        plan's floor, at most its max; None before :meth:`search` has seen the draws. As a floor it
        makes "the plan pinned where fixed-peak sits" a candidate, so the search's winner never
        costs more than a fixed fleet that keeps the share."""
        if self.train_peak_rps is None:
            return None
        return min(self.seed_numbers.max_instances, fixed_peak_size(self.seed_numbers, self.train_peak_rps))

    def knob_names(self) -> tuple[str, ...]:
        """The knobs the search moves: :data:`KNOBS`, and with a copy fleet :data:`HOT_LOAD_KNOBS`."""
        return KNOBS if self.copy_fleet is None else (*KNOBS, *HOT_LOAD_KNOBS)

    def choices(self, at: Knobs) -> dict[str, list]:
        """Each knob's candidates around ``at`` (the seed formula, None, always among them); the plan
        refuses the ones outside their bounds. ``min_instances``: the seed's, a quarter above the
        seed plan's, and the fixed-peak fleet (:meth:`fixed_peak_instances`)."""
        h = at.surge_ratio - 1.0
        bound = 1.0 - h
        planning = int(math.ceil(self.seed_numbers.planning_total_s))
        return {
            "surge_ratio": [r for r in dict.fromkeys((self.inputs.surge_ratio, 1.1, 1.05)) if SURGE_RATIO.holds(r)],
            "target_share": [None, round(bound, 4), round(0.9 * bound, 4), round(0.8 * bound, 4)],
            "datapoints_to_alarm": list(dict.fromkeys((self.inputs.reaction.datapoints_to_alarm, 1, 2))),
            "min_instances": [m for m in dict.fromkeys((self.inputs.min_instances, self.seed_numbers.min_instances * 5 // 4 + 1,
                                                        self.fixed_peak_instances())) if m is not None],
            "scale_in_step_share": [None, 0.05, 0.1, 0.2, 0.3],
            "scale_in_window_s": [None, 60, 120],
            "scale_in_cooldown_s": [None, 600, planning],
            "scheduled_floors": [False, True] if self.schedule_rate is not None else [False],
            "forecast_quantile": [None, *self.forecast_quantiles(at)] if self.forecast_history is not None else [None],
            "busy_headroom": [None, *self._headrooms] if self.forecast_history is not None else [None],
            # not in the plain descent: there, on diurnal:peak=5000, it led the greedy search to 1.17x the
            # floor where the descent from forecast floors with it (best_average_pair) found 1.05x
            "surge_average_share": [None, *SURGE_AVERAGE_SHARES] if self.forecast_history is not None else [None],
            **({} if self.copy_fleet is None else {"hot_load_headroom_copies": self.hot_load_choices()}),
        }

    @staticmethod
    def forecast_quantiles(at: Knobs) -> tuple[float, ...]:
        """The forecast floors' quantiles offered from ``at``: :data:`FORECAST_QUANTILES`, and under the
        surge on the Average (``at.surge_average_share`` set) :data:`AVERAGE_FORECAST_QUANTILES`."""
        return FORECAST_QUANTILES if at.surge_average_share is None else AVERAGE_FORECAST_QUANTILES

    def hot_load_choices(self) -> list[int | None]:
        """The hot-load knob's candidates (only with a copy fleet): off (one copy per instance), and
        copies into spare room with no headroom, an instance's worth and two instances' worth kept spare."""
        assert self.copy_fleet is not None
        per = self.copy_fleet.copies_fit
        return [None, 0, per, 2 * per]

    def see_training(self, days: Sequence[tuple[int, np.ndarray]]) -> None:
        """Record what the choices read from the training draws (their busiest minute, for the
        fixed-peak floor); :meth:`search` calls it, a caller sizing a progress bar may call it first."""
        self.train_peak_rps = max(peak_rps(a) for _, a in days) if days else None
        self.train_days = [a for _, a in days if a.size >= 86400]
        self._headrooms = self.headrooms()

    def search(self, days: Sequence[tuple[int, np.ndarray]], passes: int = 2,
               pairs: int = MAX_PAIR_MOVES) -> tuple[Candidate, Candidate]:
        """(seed, winner) on the training ``days`` ((id, arrivals) pairs): coordinate descent from
        the seed, each knob's candidates in turn. A pass that starts from an incumbent missing the
        target first takes :meth:`cheapest_keeping`; a pass that moves nothing then tries up to
        ``pairs`` two-knob moves of its near misses (:meth:`pair_moves`).

        With a forecast history the descent runs twice: without the forecast knobs (and the
        Average surge, which needs floors under it) from the seed, then with them from that plain
        winner (a forecast move replaces learned floors, :func:`move`), so the winner is never worse
        than the plain one (:meth:`better`); and a third time from the best pair of forecast floors
        and the Average surge (:meth:`best_average_pair`), the best of the three winning. Why not a
        second descent from the seed: descent is greedy (on diurnal:peak=5000 the cheapest first
        move that kept the target was forecast floors, and the descent from there ended at 1.29x the
        floor where the plain one found 1.16x), and it doubled the tuning time; from the plain
        winner every move that is not a forecast move is one the plain descent already simulated.

        Then, where the days show crowds, the winner is judged again on them together with copies
        whose crowds were moved to other hours (:func:`speech.sim.crowd_check.check_on_moved_crowds`),
        and the busy-hour headroom raised until its share bound there keeps the target; from a kept
        raise one more descent runs on those draws (:meth:`descend_from_raise`); the winner
        returned is then judged on all those draws (:attr:`crowd_check` says what was found)."""
        if self.forecast_history is None:
            return self._search(days, passes, pairs)
        history, self.forecast_history = self.forecast_history, None  # choices() then offer no forecast knobs
        try:
            seed, plain = self._search(days, passes, pairs)
        finally:
            self.forecast_history = history
        self.simulated_plain, self.plain_winner = self.simulated, plain
        _, forecast = self._search(days, passes, pairs, start=plain)
        best = forecast if self.better(forecast, plain) else plain
        pair = self.best_average_pair(plain.knobs, days)
        if pair is not None:
            _, averaged = self._search(days, passes, pairs, start=pair)
            best = averaged if self.better(averaged, best) else best
        # the promise on the same days with their crowds at other hours (speech.sim.crowd_check):
        # the crowds of the next day fall where no forecast places them
        self.crowd_check = check_on_moved_crowds(self, best, days)
        if self.crowd_check is None:
            return seed, best
        self.descend_from_raise(self.crowd_check, passes, pairs)
        return seed, self.crowd_check.chosen

    def descend_from_raise(self, check: CrowdCheck, passes: int = 2, pairs: int = MAX_PAIR_MOVES) -> Candidate:
        """When the crowd check kept a raise, one more descent from it on the check's draws (the
        training draws and their moved copies): the raise sets the busy-hour headroom on the
        winner's other knobs, or on the seed's when the winner was the fixed fleet, and those were
        tuned without the headroom under them. On two-peak:peak=5000 the raise on the seed's
        reactive knobs cost 1.57x the floor; the descent from it found the Average surge and a
        faster scale-in under the same headroom (docs/plan-cost.md). Every move is judged on the
        same draws by the same rule, so the promise the check kept still stands; the training
        draws' reading (the fixed-peak floor, the headroom ladder) stays that of the training
        draws. Returns the plan kept (``check.chosen``, replaced when the descent found better)."""
        if not (check.raised and check.kept):
            return check.chosen
        _, found = self._search(check.draws, passes, pairs, start=check.chosen, see=False)
        if found is not check.chosen and self.better(found, check.chosen):
            label = next((lab for lab, x in check.tried if x is check.chosen), "the raise")
            check.tried.append((f"descent from {label}", found))
            check.chosen = found
        return check.chosen

    def average_moves(self, at: Knobs) -> list[Knobs]:
        """Forecast floors with the Average surge over them, each quantile (:data:`FORECAST_QUANTILES`
        and :data:`LOW_FORECAST_QUANTILES` after them: :data:`AVERAGE_FORECAST_QUANTILES`) with
        each share, the surge alarm at one datapoint (a floor that undershoots is answered a
        start-up sooner)."""
        return [move(replace(at, surge_average_share=s, datapoints_to_alarm=1), "forecast_quantile", q)
                for q in AVERAGE_FORECAST_QUANTILES for s in SURGE_AVERAGE_SHARES]

    def best_average_pair(self, at: Knobs, days: Sequence[tuple[int, np.ndarray]]) -> Candidate | None:
        """The best of :meth:`average_moves` from ``at`` on ``days`` (:meth:`better`: the share
        bound kept and cheapest, else the highest bound), where a third descent starts: neither
        knob wins alone from learned floors (forecast floors under target tracking cost as much,
        the Average surge over floors sized at the days' mean misses the days above it), and the
        pair itself may miss the bound by what one more knob buys back (on diurnal:peak=5000 a
        smaller scale-in step: a pass from an incumbent that misses takes the cheapest move that
        keeps, :meth:`cheapest_keeping`). None: no pair within the bounds."""
        best: Candidate | None = None
        for k in self.average_moves(at):
            c = self.candidate(k, days)
            if c is not None and (best is None or self.better(c, best)):
                best = c
        return best

    def _search(self, days: Sequence[tuple[int, np.ndarray]], passes: int, pairs: int,
                start: Candidate | None = None, see: bool = True) -> tuple[Candidate, Candidate]:
        """One coordinate descent of :meth:`search` over the knobs :meth:`choices` offers now, from
        ``start`` (a candidate on the same ``days``) or the seed; ``see``: read the choices from
        these days (:meth:`see_training`), False where they are not the training draws."""
        if see:
            self.see_training(days)
        first = self.candidate(self.seed_knobs(), days)
        if first is None:
            raise SimulationInputError("the seed plan inputs are outside their bounds")
        seed = best = first if start is None else start
        for _ in range(passes):
            moved = False
            if best.share_bound.bound < self.slo_share:
                step = self.cheapest_keeping(best, days)
                if step is not best:
                    best, moved = step, True
            near: list[tuple[str, Any, float]] = []
            for name in self.knob_names():
                moves = [move(best.knobs, name, v) for v in self.choices(best.knobs)[name]
                         if getattr(best.knobs, name) != v]
                # every move of this knob is judged on the incumbent's lowest draw first (a new
                # incumbent within the loop differs only in this knob, so the moves stay the same)
                self._prefetch_first(moves, days, best)
                for k in moves:
                    c, cheaper_miss = self._challenge(k, days, best)
                    if c is not None and self.better(c, best):
                        best, moved = c, True
                    elif cheaper_miss is not None:
                        near.append((name, getattr(k, name), cheaper_miss))
            if not moved:
                # a local optimum one knob at a time: the near misses were all judged against this
                # incumbent, so their pairs are too
                paired = self.pair_moves(best, near, pairs)
                self._prefetch_first(paired, days, best)
                for k in paired:
                    c = self.challenge(k, days, best)
                    if c is not None and self.better(c, best):
                        best, moved = c, True
            if not moved:
                break
        return seed, best


FORECAST_KNOBS = ("forecast_quantile", "busy_headroom")


def move(k: Knobs, name: str, value: Any) -> Knobs:
    """``k`` with one knob set to ``value``; a forecast knob set (not None) takes the learned floors
    off, learned floors set take the forecast knobs off: a plan has one schedule, so without this a
    move from learned floors to forecast floors is refused (:meth:`Tuner.inputs_for`) and never judged."""
    if name in FORECAST_KNOBS and value is not None:
        return replace(k, scheduled_floors=False, **{name: value})
    if name == "scheduled_floors" and value:
        return replace(k, scheduled_floors=True, forecast_quantile=None, busy_headroom=None)
    return replace(k, **{name: value})
