"""Fleet simulator: a traffic trace against a fleet of the measured instance, under a scaling policy.

Pure and vectorized where it can be: numpy tables built once per instance, one scalar loop over
1 s steps per policy (no per-request work), no I/O, no clock. docs/design.md §10 says what is
modelled and what is not.

**Instance model (from the measurement only).** The qmax ladder gives X(n), completions per second
with n requests in the instance (``speech.plan.survival.service_rates``, the plan's own interpolation),
and TTFAB p50/p95/p99 at each concurrency. An instance is the plan's birth-death chain with the
admission gate at Q_max (an arrival finding Q_max in the instance is refused with 503). Over time,
the fleet's mean occupancy per in-service instance m follows the pointwise-stationary fluid
approximation: dm/dt = lambda (1 - P_block(m)) - D(m), where P_block and D (completions/s) are those
of the stationary gated chain whose mean occupancy is m. It is integrated with an implicit 1 s
step (stable for any rate). Routing is least-outstanding, so in-service instances share the load
evenly (m is one number); a new instance takes its share at once. A request admitted while the
mean is m finds n requests ahead with the chain's probability at that mean (arrivals see time
averages) and then has the ladder's TTFAB distribution at concurrency n + 1.

**Fleet.** A new instance serves after the ttotal artifact's measured provisioning phases
(:func:`startup_s`); it is billed from the moment it is asked for. A removed instance stops
receiving requests, finishes the ones it holds and is billed until then.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.instance import InstanceModel, build_instance
from speech.sim.peers import DEFAULT_SLO_SHARE
from speech.sim.policies import POLICY_NAMES, AwsReadings, make_policy
from speech.sim.scaler import History, Policy, Scaler

SLO_SHARE = 0.95
"""A minute violates the SLO when fewer than 95 % of its requests got their first audio byte within
the SLO (its p95 TTFAB, counting a rejected request as never answered, is above the SLO)."""
SHARE_BLOCKS = 24
"""Equal runs of whole minutes a run's requests are also counted in (a day's hours): a draw's share
is the request-weighted mean of its blocks', so the spread of the blocks across draws estimates the
spread of the share from every block's own draws (speech.sim.tune.unseen_share_bound)."""


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Action:
    t_s: int
    before: int
    after: int
    reason: str


@dataclass
class Run:
    """Per-second arrays of one policy's run."""

    policy: str
    occupancy: np.ndarray
    grid_pos: np.ndarray
    """Fractional index into the instance model's occupancy grid, per second."""
    arrivals: np.ndarray
    admitted: np.ndarray
    rejected: np.ndarray
    serving: np.ndarray
    billed: np.ndarray
    """Instances paid for in each second: in service, starting and draining."""
    actions: list[Action] = field(default_factory=list)
    refused: list[Action] = field(default_factory=list)
    """Changes the policy asked for while the endpoint was Updating: SageMaker refuses them ("Cannot
    update in-progress endpoint") and Application Auto Scaling records a not-scaled activity
    (TargetServicePutResourceAsUnscalable); ``after`` is the capacity asked for."""


def fluid_step(occ_grid: list, dep: list, blk: list, m: float, lam: float) -> tuple[float, float, int, float]:
    """One implicit 1 s step of dm/dt = lam (1 - P_block(m)) - D(m) for one serving unit, on the
    instance model's grid (lists, for speed): find m' with m' + D(m') + lam (P_block(m') - 1) = m
    (increasing in m'). Returns (m', P_block(m'), grid index k, weight w of k + 1)."""
    kmax = len(occ_grid) - 1
    lo, hi = 0, kmax
    if occ_grid[hi] + dep[hi] + lam * (blk[hi] - 1.0) <= m:
        k, w = hi, 0.0
    elif occ_grid[0] + dep[0] + lam * (blk[0] - 1.0) >= m:
        k, w = 0, 0.0
    else:
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if occ_grid[mid] + dep[mid] + lam * (blk[mid] - 1.0) <= m:
                lo = mid
            else:
                hi = mid
        g_lo = occ_grid[lo] + dep[lo] + lam * (blk[lo] - 1.0)
        g_hi = occ_grid[hi] + dep[hi] + lam * (blk[hi] - 1.0)
        w = (m - g_lo) / (g_hi - g_lo) if g_hi > g_lo else 0.0
        k = lo
    if w > 0.0:
        return occ_grid[k] + w * (occ_grid[k + 1] - occ_grid[k]), blk[k] + w * (blk[k + 1] - blk[k]), k, w
    return occ_grid[k], blk[k], k, 0.0


class FluidGrid:
    """:func:`fluid_step` on one instance model's grid, searched from the grid index of the step
    before (the fleet's occupancy moves a few grid points a second) instead of bisecting the whole
    grid: the same (m', P_block, k, w), bit for bit.

    Why the same: ``g(k) = (occ[k] + dep[k]) + lam (blk[k] - 1)`` is evaluated with the same
    operations in the same order, and with ``occ + dep`` and ``blk`` nondecreasing along the grid
    (``monotone``) and ``lam >= 0``, g computed in floating point is nondecreasing in k (rounding
    is monotone), so "g(k) <= m" holds on a prefix of the grid and its last index, which the
    bisection finds, is unique: any search for it finds the same k. Where the grid is not
    monotone (no instance model built here, but a guard costs nothing) or lam < 0, the bisection
    itself runs."""

    __slots__ = ("occ", "dep", "blk", "monotone", "step")

    def __init__(self, model: InstanceModel) -> None:
        self.occ, self.dep, self.blk = model.occupancy.tolist(), model.depart_rps.tolist(), model.block.tolist()
        u = [o + d for o, d in zip(self.occ, self.dep, strict=True)]
        v = [b - 1.0 for b in self.blk]
        self.monotone = len(u) >= 2 and all(x <= y for x, y in itertools.pairwise(u)) \
            and all(x <= y for x, y in itertools.pairwise(v))
        self.step = self._searched(u, v) if self.monotone else self._bisected
        """step(m, lam, hint) -> (m', P_block(m'), k, w): :func:`fluid_step` (m, lam), looking first
        at grid index ``hint`` (the last step's k)."""

    def _bisected(self, m: float, lam: float, hint: int) -> tuple[float, float, int, float]:
        return fluid_step(self.occ, self.dep, self.blk, m, lam)

    def _searched(self, u: list, v: list) -> Callable[[float, float, int], tuple[float, float, int, float]]:
        """The step as a closure over the grid (local lookups: it runs once per simulated second)."""
        occ, blk, dep, bisected = self.occ, self.blk, self.dep, fluid_step
        kmax = len(u) - 1
        u0, v0, u_top, v_top = u[0], v[0], u[kmax], v[kmax]
        occ0, blk0, occ_top, blk_top = occ[0], blk[0], occ[kmax], blk[kmax]

        def step(m: float, lam: float, hint: int) -> tuple[float, float, int, float]:
            if not lam >= 0.0:  # never from a fleet (arrivals / instances), but g is monotone only for lam >= 0
                return bisected(occ, dep, blk, m, lam)
            if u_top + lam * v_top <= m:
                return occ_top, blk_top, kmax, 0.0
            if u0 + lam * v0 >= m:
                return occ0, blk0, 0, 0.0
            # the last k with g(k) <= m, in [0, kmax - 1] (g(0) < m < g(kmax)): gallop from the hint
            # to a bracket g(lo) <= m < g(hi), then bisect it
            k = hint if hint < kmax else kmax - 1
            jump = 1
            if u[k] + lam * v[k] <= m:
                lo, hi = k, k + 1
                while u[hi] + lam * v[hi] <= m:
                    lo, jump = hi, jump * 2
                    hi = hi + jump if hi + jump < kmax else kmax
            else:
                hi, lo = k, k - 1  # k >= 1: g(0) < m < g(k)
                while u[lo] + lam * v[lo] > m:
                    hi, jump = lo, jump * 2
                    lo = lo - jump if lo > jump else 0
            while hi - lo > 1:
                mid = (lo + hi) >> 1
                if u[mid] + lam * v[mid] <= m:
                    lo = mid
                else:
                    hi = mid
            g_lo = u[lo] + lam * v[lo]
            g_hi = u[lo + 1] + lam * v[lo + 1]
            w = (m - g_lo) / (g_hi - g_lo) if g_hi > g_lo else 0.0
            if w > 0.0:
                return occ[lo] + w * (occ[lo + 1] - occ[lo]), blk[lo] + w * (blk[lo + 1] - blk[lo]), lo, w
            return occ[lo], blk[lo], lo, 0.0

        return step


WARM_WINDOW_S = 60


def run_policy(model: InstanceModel, arrivals: np.ndarray, policy: Policy, readings: AwsReadings | None = None,
               warm_x_rps: float | None = None) -> Run:
    """Step the fleet through the trace one second at a time under ``policy``.

    The endpoint applies one capacity change at a time (UpdateEndpointWeightsAndCapacities sets it
    to Updating until the change is done): after a scale-out until the new instances are in
    service, after a removal for ``readings.removal_updating_s``. A change asked for meanwhile is
    refused and recorded in ``Run.refused``; the policy asks again at its next evaluation.

    ``warm_x_rps``: a scaling fleet starts sized for the trace's opening minute at this throughput
    per instance (the plan's X(C_scale_max)), within the policy's bounds, as if it had been running:
    a trace's first second is not a cold endpoint. None: the policy's own initial count."""
    readings = readings or AwsReadings()
    grid = FluidGrid(model)
    dep = grid.dep
    arr = np.asarray(arrivals, dtype=float).tolist()
    T = len(arr)
    hist = History(occupancy=[0.0] * T, arrivals=arr, rejected=[0.0] * T, serving=[0] * T)
    occ_out, rej_out, serving_out = hist.occupancy, hist.rejected, hist.serving
    pos_out, adm_out, billed_out = [0.0] * T, [0.0] * T, [0] * T
    actions: list[Action] = []
    scaler = Scaler(policy)
    n = scaler.initial()
    if warm_x_rps and not scaler.instant and T:
        opening = sum(arr[:WARM_WINDOW_S]) / min(T, WARM_WINDOW_S)
        n = max(n, scaler.bound(math.ceil(opening / warm_x_rps - EPS)))
    desired = n
    pending: deque = deque()
    draining: list = []
    startup = model.startup_s
    instant = scaler.instant
    one_at_a_time = readings.one_change_at_a_time and not instant and policy.one_change_at_a_time
    updating_until = -1.0
    refused: list[Action] = []
    m = 0.0
    k = 0
    step = grid.step
    tick = scaler.tick_s
    drained_at = math.inf  # the earliest end among the draining instances
    for t in range(T):
        while pending and pending[0] <= t:
            pending.popleft()
            m = m * n / (n + 1)
            n += 1
        a = arr[t]
        m, pb, k, w = step(m, a / n, k)
        rej = a * pb
        occ_out[t] = m
        rej_out[t] = rej
        serving_out[t] = n
        pos_out[t] = k + w
        adm_out[t] = a - rej
        if drained_at <= t:
            draining = [e for e in draining if e > t]
            drained_at = min(draining, default=math.inf)
        billed_out[t] = n + len(pending) + len(draining)
        if (t + 1) % tick or t + 1 >= T:  # Scaler.due
            continue
        out = scaler.step(t, desired, hist, updating=one_at_a_time and t + 1 < updating_until)
        if out is None:
            continue
        new, why = out.new, out.reason
        if out.refused:
            refused.append(Action(t_s=t + 1, before=desired, after=new, reason=why))
            continue
        if instant:
            # A scheduled fleet's changes (the floor's) are not scaling actions anyone would run.
            m = m * n / new
            n = desired = new
            continue
        actions.append(Action(t_s=t + 1, before=desired, after=new, reason=why))
        if new > desired:
            pending.extend([t + 1 + startup] * (new - desired))
            updating_until = t + 1 + startup
        else:
            updating_until = t + 1 + readings.removal_updating_s
            for _ in range(desired - new):
                if pending:
                    pending.pop()
                elif n > 1:
                    # The instance leaves routing and drains what it holds.
                    rate = dep[k] if dep[k] > 0 else model.saturation_rps
                    draining.append(t + 1 + math.ceil(m / rate) if m > 0 else t + 1)
                    drained_at = min(drained_at, draining[-1])
                    n -= 1
        desired = new
    return Run(
        policy=policy.name,
        occupancy=np.array(hist.occupancy),
        grid_pos=np.array(pos_out),
        arrivals=np.asarray(arrivals, dtype=float),
        admitted=np.array(adm_out),
        rejected=np.array(hist.rejected),
        serving=np.array(hist.serving),
        billed=np.array(billed_out),
        actions=actions,
        refused=refused,
    )


# --- summaries ---------------------------------------------------------------------------------


def _grid_weights(grid_pos: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Spread per-second weights onto the two grid points around each fractional position."""
    k = np.floor(grid_pos).astype(int)
    frac = grid_pos - k
    out = np.bincount(k, weights * (1 - frac), minlength=size)
    nxt = np.minimum(k + 1, size - 1)
    out += np.bincount(nxt, weights * frac, minlength=size)
    return out[:size]


def _quantile(cdf: np.ndarray, bins_ms: np.ndarray, q: float) -> float:
    if cdf[-1] <= 0:
        return float("nan")
    c = cdf / cdf[-1]
    i = int(np.searchsorted(c, q))
    if i <= 0:
        return float(bins_ms[0])
    if i >= c.size:
        return float(bins_ms[-1])
    return float(np.interp(q, [c[i - 1], c[i]], [bins_ms[i - 1], bins_ms[i]]))


@dataclass(frozen=True)
class Summary:
    policy: str
    requests: float
    within_slo_share: float
    rejected_share: float
    ttfab_p95_ms: float
    """Of answered requests."""
    ttfab_p99_ms: float
    violation_minutes: int
    instance_hours: float
    scale_out_actions: int
    scale_in_actions: int
    flaps: int
    peak_instances: int
    """Most instances in service at once."""
    refused_changes: int = 0
    """Capacity changes asked for while the endpoint was Updating (refused by SageMaker)."""
    block_requests: tuple[float, ...] = ()
    """Requests in each of :data:`SHARE_BLOCKS` equal runs of whole minutes (a day's hours)."""
    block_within: tuple[float, ...] = ()
    """Of those, answered within the SLO: what speech.sim.tune.unseen_share_bound reads a draw's
    spread from block by block."""


def count_flaps(actions: Sequence[Action], window_s: float) -> int:
    """Scale-ins followed by a scale-out within ``window_s`` (the planning T_total)."""
    flaps = 0
    next_out: int | None = None
    for a in reversed(actions):
        if a.after > a.before:
            next_out = a.t_s
        elif a.after < a.before and next_out is not None and next_out - a.t_s <= window_s:
            flaps += 1
    return flaps


def minute_within(run: Run, model: InstanceModel, slo_ms: float) -> tuple[np.ndarray, np.ndarray]:
    """Per minute: (requests answered within the SLO, requests); a rejected request never is."""
    at_slo = model.ttfab_cdf_at(slo_ms)
    k = np.floor(run.grid_pos).astype(int)
    frac = run.grid_pos - k
    nxt = np.minimum(k + 1, at_slo.size - 1)
    ok = run.admitted * (at_slo[k] * (1 - frac) + at_slo[nxt] * frac)
    minutes = math.ceil(run.arrivals.size / 60)
    idx = np.arange(run.arrivals.size) // 60
    return np.bincount(idx, ok, minlength=minutes), np.bincount(idx, run.arrivals, minlength=minutes)


def minute_within_share(run: Run, model: InstanceModel, slo_ms: float) -> np.ndarray:
    """Per minute: share of requests answered within the SLO (a rejected request never is)."""
    return _shares(*minute_within(run, model, slo_ms))


def _shares(ok: np.ndarray, all_: np.ndarray) -> np.ndarray:
    """ok / all where there were requests, 1 where there were none."""
    return np.where(all_ > 0, ok / np.where(all_ > 0, all_, 1), 1.0)


def block_sums(per_minute: np.ndarray, blocks: int = SHARE_BLOCKS) -> tuple[float, ...]:
    """``per_minute`` summed over ``blocks`` equal runs of whole minutes (the first ones a minute
    longer when they do not divide); fewer blocks when there are fewer minutes."""
    return tuple(float(b.sum()) for b in np.array_split(per_minute, max(1, min(blocks, per_minute.size))) if b.size)


def minute_p95_ms(run: Run, model: InstanceModel) -> np.ndarray:
    """Per minute: p95 TTFAB of answered requests (for timelines)."""
    minutes = math.ceil(run.arrivals.size / 60)
    size = model.occupancy.size
    idx = np.arange(run.arrivals.size) // 60
    k = np.floor(run.grid_pos).astype(int)
    frac = run.grid_pos - k
    w = np.zeros((minutes, size))
    np.add.at(w, (idx, k), run.admitted * (1 - frac))
    np.add.at(w, (idx, np.minimum(k + 1, size - 1)), run.admitted * frac)
    cdfs = w @ model.cdf
    return np.array([_quantile(c, model.bins_ms, 0.95) for c in cdfs])


def summarize(run: Run, model: InstanceModel, slo_ms: float, planning_total_s: float) -> Summary:
    total = float(run.arrivals.sum())
    weights = _grid_weights(run.grid_pos, run.admitted, model.occupancy.size)
    cdf = weights @ model.cdf
    within = float(weights @ model.ttfab_cdf_at(slo_ms))
    ok_m, all_m = minute_within(run, model, slo_ms)
    share = _shares(ok_m, all_m)
    return Summary(
        policy=run.policy,
        requests=total,
        within_slo_share=within / total if total > 0 else 1.0,
        rejected_share=float(run.rejected.sum()) / total if total > 0 else 0.0,
        ttfab_p95_ms=_quantile(cdf, model.bins_ms, 0.95),
        ttfab_p99_ms=_quantile(cdf, model.bins_ms, 0.99),
        violation_minutes=int((share < SLO_SHARE - 1e-12).sum()),
        instance_hours=float(run.billed.sum()) / 3600.0,
        scale_out_actions=sum(1 for a in run.actions if a.after > a.before),
        scale_in_actions=sum(1 for a in run.actions if a.after < a.before),
        flaps=count_flaps(run.actions, planning_total_s),
        peak_instances=int(run.serving.max()) if run.serving.size else 0,
        refused_changes=len(run.refused),
        block_requests=block_sums(all_m),
        block_within=block_sums(ok_m),
    )


def simulate(
    plan: PlanArtifact,
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    arrivals: np.ndarray,
    *,
    policies: Sequence[str] = POLICY_NAMES,
    peak_rps: float | None = None,
    model: InstanceModel | None = None,
    readings: AwsReadings | None = None,
    slo_share: float = DEFAULT_SLO_SHARE,
    on_policy: Callable[[str, int, int], None] | None = None,
    history: np.ndarray | None = None,
) -> tuple[InstanceModel, list[Run], list[Summary]]:
    """Run every named policy on the same arrivals; summaries in the order asked. ``on_policy(name,
    done, total)`` is called after each policy's run (a progress display; it may not change anything).
    ``history``: arrivals per second before the trace (what ``predictive`` forecasts from)."""
    from speech.sim.traces import peak_rps as trace_peak

    model = model or build_instance(qmax, ttotal, slo_ms=plan.inputs.slo_ms)
    peak = trace_peak(arrivals) if peak_rps is None else peak_rps
    runs, sums = [], []
    for name in policies:
        pol = make_policy(name, plan=plan, qmax=qmax, model=model, arrivals=arrivals, peak_rps=peak, readings=readings,
                          slo_share=slo_share, history=history)
        run = run_policy(model, arrivals, pol, readings, warm_x_rps=plan.capacity.throughput_at_target_rps)
        runs.append(run)
        sums.append(summarize(run, model, plan.inputs.slo_ms, plan.t_total.planning_s))
        if on_policy is not None:
            on_policy(name, len(runs), len(policies))
    return model, runs, sums


