"""The cost floor and what a perfect forecast could do on SageMaker (docs/design.md §10.4).

``floor``: the fewest instance-hours that keep the SLO share over the WHOLE trace, clairvoyant,
with no start-up, changing the fleet at most once a minute, judged on the instance model the fleet
simulator steps (:class:`speech.sim.instance.InstanceModel`). Each minute at its mean arrival rate
r: n instances answer ``A x ok(r / n)`` of its ``A`` requests within the SLO, ``ok`` the stationary
chain's share (:func:`speech.sim.peers.answered_within_slo`; the fluid model the simulator
integrates settles at that chain at a steady rate). Choosing ``n_m`` per minute to minimize
instance-seconds subject to the whole trace's missed requests staying within ``(1 - share) x
total`` is a knapsack over minutes; its Lagrangian relaxation ``min sum(n_m d_m) + lambda
sum(bad_m(n_m))`` splits by minute, and a bisection on lambda finds the smallest lambda whose
choice fits the budget. The slack left is spent by removing single instances where they cost the
fewest missed requests. The schedule is then judged whole, from its own queues: topped up where it
falls short, trimmed where the slack it leaves pays for an instance-minute. The Lagrangian dual at
the bisection's lambdas bounds the same problem from below, recorded beside the schedule
(``lower_bound_instance_hours``, at most the schedule's hours) so the gap is visible.

Why the minute's MEAN rate, not each second's: the simulator carries a burst second's queue into
the quiet seconds after it (its fluid state), so a second above saturation is not a lost second;
judging each second as its own stationary chain (the old per-minute oracle) treats every burst as
a lasting overload and overpays. The floor's schedule is then run through the fleet simulator, which
reports what it really keeps (``bench simulate``'s ``floor`` row).

``perfect-forecast``: a clairvoyant policy under the plan's own mechanics. It knows the floor's
schedule for the whole trace and asks for capacity the start-up ahead, one capacity change at a
time (the fleet refuses others while Updating), within the plan's floor and cap, never removing
what it will need again before a new instance could serve.

The schedule's judge is :mod:`speech.sim.floor_fluid`; both as simulator policies are in
:mod:`speech.sim.floor_policies`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speech.schema.units import EPS
from speech.sim.floor_fluid import fluid_steps, judged, missed_tolerance, queues_at_minute_starts
from speech.sim.instance import InstanceModel
from speech.sim.peers import answered_within_slo

FLOOR_STEP_S = 60
"""The floor changes its fleet at most once per this many seconds (a minute)."""
SATURATED_TOL = 1e-9
"""A per-instance rate whose share within the SLO is this close to an idle instance's counts as
unloaded: more instances than that cannot help, so the floor's search stops there."""
BISECTION_STEPS = 60
MAX_CELLS = 4_000_000
"""Minutes x candidate counts evaluated at once (memory); larger tables are solved in chunks."""


@dataclass(frozen=True)
class CostFloor:
    """The floor's fleet, one count per minute, and what the instance model says it keeps."""

    per_minute: np.ndarray
    """Instances in each minute (at least one)."""
    step_s: int
    duration_s: int
    model_share: float
    """Share within the SLO over the whole trace on the instance model at each minute's mean rate."""
    goal_share: float
    """The share the floor keeps: the target, or the most the instance reaches when that is lower."""
    lower_bound_instance_hours: float
    """The Lagrangian dual: no schedule of per-minute counts keeps ``goal_share`` on the same model
    for fewer instance-hours."""

    @property
    def per_second(self) -> np.ndarray:
        return np.repeat(self.per_minute, self.step_s)[: self.duration_s]

    @property
    def instance_hours(self) -> float:
        return float(self.per_second.sum()) / 3600.0


def _minutes(arrivals: np.ndarray, step_s: int) -> tuple[np.ndarray, np.ndarray]:
    """(requests per window, seconds per window): the last window may be short."""
    a = np.asarray(arrivals, dtype=float)
    windows = max(1, math.ceil(a.size / step_s))
    pad = np.zeros(windows * step_s)
    pad[: a.size] = a
    secs = np.full(windows, float(step_s))
    if a.size % step_s:
        secs[-1] = float(a.size % step_s)
    return pad.reshape(windows, step_s).sum(axis=1), secs


def _stationary_counts(model: InstanceModel, rate: np.ndarray, req: np.ndarray, secs: np.ndarray, budget: float,
                       slo_ms: float) -> np.ndarray:
    """First pass: the Lagrangian on each minute's stationary chain at its mean rate (no burst
    inside a minute), over every count from half the saturated one to an unloaded one. Where the
    second pass (the fluid over the minute's seconds) starts looking."""
    lam_grid = model.arrival_rps
    ok_grid = answered_within_slo(model, lam_grid, slo_ms)
    unloaded = lam_grid[ok_grid >= float(ok_grid[0]) - SATURATED_TOL]
    sat = max(model.saturation_rps, 1e-9)
    r_good = float(unloaded.max()) if unloaded.size and unloaded.max() > 0 else 0.5 * sat
    hi = np.maximum(1, np.ceil(rate / r_good - EPS)).astype(int)
    lo = np.clip(np.floor(0.5 * rate / sat).astype(int), 1, hi)
    width = int((hi - lo).max()) + 1 if hi.size else 1
    cells: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    chunk = max(1, MAX_CELLS // width)
    for start in range(0, rate.size, chunk):
        sl = slice(start, min(start + chunk, rate.size))
        n = np.minimum(lo[sl, None] + np.arange(width)[None, :], hi[sl, None]).astype(float)
        mins = np.repeat(np.arange(sl.start, sl.stop)[:, None], width, axis=1)
        bad = req[sl, None] * (1.0 - answered_within_slo(model, rate[sl, None] / n, slo_ms))
        cells.append((mins.ravel(), n.ravel(), bad.ravel()))
    m_all = np.concatenate([c[0] for c in cells])
    table = _Table(m_all, np.concatenate([c[1] for c in cells]), np.concatenate([c[2] for c in cells]), secs)
    counts, _, _ = table.solve(budget)
    return counts


class _Table:
    """Candidate (minute, count, missed requests) cells, sorted by minute then count; the
    Lagrangian over them."""

    def __init__(self, minute: np.ndarray, n: np.ndarray, bad: np.ndarray, secs: np.ndarray) -> None:
        order = np.lexsort((n, minute))
        self.minute, self.n, self.bad = minute[order], n[order], bad[order]
        keep = np.ones(self.n.size, bool)
        keep[1:] = (self.minute[1:] != self.minute[:-1]) | (self.n[1:] != self.n[:-1])
        self.minute, self.n, self.bad = self.minute[keep], self.n[keep], self.bad[keep]
        self.cost = self.n * secs[self.minute]
        self.starts = np.flatnonzero(np.r_[True, self.minute[1:] != self.minute[:-1]])

    def choose(self, lam: float) -> tuple[np.ndarray, float, float]:
        """Per minute the cell minimizing instance-seconds + lam x missed: (cell indices, missed,
        the Lagrangian's value)."""
        obj = self.cost + lam * self.bad
        best = np.minimum.reduceat(obj, self.starts)
        seg = np.repeat(np.arange(self.starts.size), np.diff(np.r_[self.starts, obj.size]))
        hit = np.flatnonzero(obj <= best[seg])
        _, first = np.unique(seg[hit], return_index=True)
        idx = hit[first]
        return idx, float(self.bad[idx].sum()), float(best.sum())

    def solve(self, budget: float) -> tuple[np.ndarray, float, float]:
        """(counts per minute, missed, best dual value): the smallest lambda (bisection) whose
        choice keeps the missed requests within ``budget``; the most it can keep when none does."""
        lam_lo, lam_hi = 0.0, 1.0
        idx, missed, value = self.choose(lam_hi)
        dual = value - lam_hi * budget
        while missed > budget + EPS and lam_hi < 1e18:
            lam_lo, lam_hi = lam_hi, lam_hi * 16
            idx, missed, value = self.choose(lam_hi)
            dual = max(dual, value - lam_hi * budget)
        if missed <= budget + EPS:
            for _ in range(BISECTION_STEPS):
                mid = math.sqrt(lam_lo * lam_hi) if lam_lo > 0 else lam_hi / 2
                i2, m2, v2 = self.choose(mid)
                dual = max(dual, v2 - mid * budget)
                if m2 <= budget + EPS:
                    lam_hi, idx, missed = mid, i2, m2
                else:
                    lam_lo = mid
                if lam_hi - lam_lo <= 1e-9 * lam_hi:
                    break
        return self.n[idx].copy(), missed, dual


BAND_BELOW, BAND_ABOVE, WIDEN_ROUNDS = 3, 4, 12
"""The fluid pass looks at counts from BAND_BELOW under the first pass's to BAND_ABOVE over it, and
widens a minute's band (doubling) while the choice sits on its edge, at most WIDEN_ROUNDS times."""


def floor_schedule(model: InstanceModel, arrivals: np.ndarray, slo_ms: float, slo_share: float,
                   step_s: int = FLOOR_STEP_S) -> CostFloor:
    """The floor (module docstring): per-minute counts minimizing instance-seconds subject to the
    whole trace's share within the SLO.

    Two passes. The first solves the Lagrangian on each minute's stationary chain at its mean rate.
    The second judges each candidate count of a minute by the fleet simulator's own fluid step over
    that minute's seconds (:func:`speech.sim.floor_fluid.fluid_steps`: a burst fills the instances'
    queues and the gate, and what the queue holds drains in the seconds after), starting from a
    band around the first pass's count and widening it where the choice sits on its edge; then the Lagrangian again, and
    the budget's slack spent one instance at a time."""
    a = np.asarray(arrivals, dtype=float)
    req, secs = _minutes(a, step_s)
    rate = req / secs
    total = float(req.sum())
    windows = req.size
    flat = np.zeros(windows * step_s)
    flat[: a.size] = a
    per_second = flat.reshape(windows, step_s)
    ok_idle = float(answered_within_slo(model, np.array([0.0]), slo_ms)[0])
    goal = min(slo_share, ok_idle - EPS) if total > 0 else slo_share
    budget = (1.0 - goal) * total
    counts = _stationary_counts(model, rate, req, secs, budget, slo_ms).astype(int)
    start_queue: np.ndarray | None = None
    dual = math.nan
    for _ in range(REFINE_ROUNDS):
        new, _, dual, _ = _fluid_pass(model, per_second, req, secs, counts, budget, ok_idle, slo_ms, start_queue)
        settled = start_queue is not None and np.array_equal(new, counts)
        counts = new
        if settled:
            break
        start_queue = queues_at_minute_starts(model, per_second, counts, slo_ms, start_queue)
    # The schedule judged from its own queues (what the simulator will run), repaired where it falls
    # short: one instance at a time where it saves the most missed requests per instance-second.
    counts, missed_final = _repair(model, per_second, req, secs, counts, budget, slo_ms, ok_idle)
    if missed_final <= budget + missed_tolerance(req):
        counts, missed_final = _trim(model, per_second, req, secs, counts, budget, slo_ms, missed_final)
    per_minute = np.maximum(1, counts).astype(int)
    share = 1.0 - missed_final / total if total > 0 else 1.0
    hours = float(np.repeat(per_minute, step_s)[: a.size].sum()) / 3600.0
    feasible = missed_final <= budget + 1e-6 * max(total, 1.0)
    # The dual bounds the problem only where the budget can be met; elsewhere there is no bound to give.
    bound = min(hours, max(0.0, dual) / 3600.0) if feasible and math.isfinite(dual) else hours
    return CostFloor(per_minute=per_minute, step_s=step_s, duration_s=int(a.size), model_share=share, goal_share=goal,
                         lower_bound_instance_hours=bound)


TRIM_CHECKS = 24
"""Most whole-schedule judgements :func:`_trim` makes (each ~0.01-0.1 s on a day)."""
TRIM_OVERSTATE = 2.0
"""How far a minute's own extra misses may exceed the slack and the removal still be judged whole:
fewer instances reject more in that minute and hand a shorter queue to the next, so the whole
trace can miss less than the minute alone says (a third less, seen on a bursty trace)."""


def _trim(model: InstanceModel, per_second: np.ndarray, req: np.ndarray, secs: np.ndarray, counts: np.ndarray,
          budget: float, slo_ms: float, missed: float) -> tuple[np.ndarray, float]:
    """The slack the schedule leaves judged from its own queues, spent: single instances removed
    where their minute's own extra misses per instance-second are fewest, as many at once as the
    slack allows by those estimates, each batch judged on the whole schedule and halved until it
    fits; a single removal that does not fit is not tried again.

    Why: the passes before judge each minute from the queues the previous schedule left, and the
    repair only adds. Where those queues were longer than the final schedule's, a minute keeps an
    instance the whole-trace share does not need (found on a 12-minute trace where removing one
    instance-minute from the floor still kept 99.55 % of 99.5 %)."""
    counts = counts.copy()
    tol = missed_tolerance(req)
    queue: np.ndarray | None = None
    tried = np.zeros(counts.size, bool)
    order: list[int] = []
    extra = np.zeros(counts.size)
    checks = 0
    fresh = False
    while checks < TRIM_CHECKS:
        slack = budget - missed
        if slack <= tol:
            break
        if not fresh:  # estimates for the current schedule, from its own queues
            _, bad, queue = judged(model, per_second, req, counts, slo_ms, queue)
            fewer = np.where(counts > 1, counts - 1, counts).astype(float)
            extra = np.maximum(req - fluid_steps(model, per_second, fewer, slo_ms, queue), 0.0) - bad
            order = [int(i) for i in np.argsort(extra / secs) if counts[i] > 1]
            fresh = True
        left = [i for i in order if not tried[i] and extra[i] <= TRIM_OVERSTATE * slack + tol]
        if not left:
            break
        k = max(1, int(np.searchsorted(np.cumsum(extra[left]), slack + tol, side="right")))
        while k >= 1 and checks < TRIM_CHECKS:
            trial = counts.copy()
            trial[left[:k]] -= 1
            checks += 1
            m_trial, _, _ = judged(model, per_second, req, trial, slo_ms, queue)
            if m_trial <= budget + tol:
                counts, missed, fresh = trial, m_trial, False
                break
            if k == 1:
                tried[left[0]] = True
            k //= 2
    return counts, missed


REFINE_ROUNDS = 4
"""Most fluid passes, each from the queues the previous schedule leaves at each minute's start (the
simulator's run of it: a minute the floor lets run hot hands its queue to the next one); they stop
when the schedule does."""
REPAIR_STEPS = 200


def _repair(model: InstanceModel, per_second: np.ndarray, req: np.ndarray, secs: np.ndarray, counts: np.ndarray,
            budget: float, slo_ms: float, ok_idle: float) -> tuple[np.ndarray, float]:
    """(counts, missed requests) of ``counts`` judged from its own minute-start queues; while the
    missed requests exceed ``budget``, one instance more where it saves the most per
    instance-second (and the queues judged again)."""
    counts = counts.astype(int).copy()
    missed = math.inf
    queue: np.ndarray | None = None
    for _ in range(REPAIR_STEPS):
        missed, bad, queue = judged(model, per_second, req, counts, slo_ms, queue)
        if missed <= budget + missed_tolerance(req):
            break
        more = req - fluid_steps(model, per_second, counts + 1.0, slo_ms, queue)
        gain = (bad - more) / secs
        gain[bad <= req * (1.0 - ok_idle) + 1e-12] = -np.inf  # nothing left to win there
        if not np.isfinite(gain.max()) or gain.max() <= 0:
            break
        counts[int(gain.argmax())] += 1
    return counts, missed


def _fluid_pass(model: InstanceModel, per_second: np.ndarray, req: np.ndarray, secs: np.ndarray, around: np.ndarray,
                budget: float, ok_idle: float, slo_ms: float,
                start_queue: np.ndarray | None) -> tuple[np.ndarray, float, float, dict[tuple[int, int], float]]:
    """The Lagrangian over counts judged by :func:`~speech.sim.floor_fluid.fluid_steps` (from
    ``start_queue``), in bands around ``around`` widened where the choice sits on an edge; then the
    slack spent. Returns (counts, missed, dual value, every (minute, count) -> missed requests
    judged)."""
    windows = req.size
    known: dict[tuple[int, int], float] = {}

    def ensure(minutes: np.ndarray, ns: np.ndarray) -> None:
        want = [(int(m), int(n)) for m, n in zip(minutes, ns, strict=True) if n >= 1 and (int(m), int(n)) not in known]
        want = list(dict.fromkeys(want))
        for start in range(0, len(want), 200_000):
            part = want[start : start + 200_000]
            mi = np.array([m for m, _ in part])
            ni = np.array([n for _, n in part], dtype=float)
            ok = fluid_steps(model, per_second[mi], ni, slo_ms, None if start_queue is None else start_queue[mi])
            for key, bad in zip(part, req[mi] - ok, strict=True):
                known[key] = max(0.0, float(bad))

    lo = np.maximum(1, around - BAND_BELOW)
    hi = around + BAND_ABOVE
    mins = np.arange(windows)
    for _ in range(WIDEN_ROUNDS):
        spans = hi - lo + 1
        ensure(np.repeat(mins, spans), np.concatenate([np.arange(x, y + 1) for x, y in zip(lo, hi, strict=True)]))
        keys = np.array(list(known.keys()), dtype=float).reshape(-1, 2)
        table = _Table(keys[:, 0].astype(int), keys[:, 1], np.array(list(known.values())), secs)
        counts, missed, dual = table.solve(budget)
        counts = counts.astype(int)
        at = np.array([known[(i, int(n))] for i, n in enumerate(counts)])
        up = (counts >= hi) & (at > req * (1.0 - ok_idle) + 1e-9 * req + 1e-12)  # more would still help
        down = (counts <= lo) & (lo > 1)
        if not up.any() and not down.any():
            break
        width = np.maximum(spans, 2)
        hi = np.where(up, hi + width, hi)
        lo = np.where(down, np.maximum(1, lo - width), lo)
    if missed <= budget + EPS:
        def bad(m: np.ndarray, n: np.ndarray) -> np.ndarray:
            ensure(m, n)
            return np.array([known[(int(i), int(k))] for i, k in zip(m, n, strict=True)])

        counts = _spend_slack(counts, secs, budget - missed, bad)
        missed = float(sum(known[(i, int(n))] for i, n in enumerate(counts)))
    return counts, missed, dual, known


def _spend_slack(counts: np.ndarray, secs: np.ndarray, slack: float, bad) -> np.ndarray:
    """Remove one instance from the minutes where it costs the fewest missed requests per
    instance-second, while the budget's slack lasts (the Lagrangian's choice leaves some unspent)."""
    counts = counts.copy()
    mins = np.arange(counts.size)
    for _ in range(4):
        can = counts > 1
        if slack <= 0 or not can.any():
            break
        extra = np.full(counts.size, np.inf)
        extra[can] = bad(mins[can], counts[can] - 1) - bad(mins[can], counts[can])
        order = np.argsort(extra / secs)
        moved = False
        for i in order:
            if not np.isfinite(extra[i]) or extra[i] > slack:
                break
            slack -= extra[i]
            counts[i] -= 1
            moved = True
        if not moved:
            break
    return counts


