"""The policies the plan is compared with: pressure, qps-ewma, kpa, fixed and scheduled fleets
(docs/design.md §10.4); the floor and perfect-forecast are in :mod:`speech.sim.floor`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from speech.schema.units import EPS
from speech.sim.instance import PRESSURE_WINDOW_S, InstanceModel
from speech.sim.scaler import Ctx, Decision, Policy, ScalingNumbers

# --- the other policies ------------------------------------------------------------------------


@dataclass(frozen=True)
class PressureState:
    high: int = 0
    low: int = 0
    out_until: float = -1.0
    in_until: float = -1.0


class PressurePolicy(Policy):
    """Gateway pressure index: 100 x (0.4 arrival rate / capacity + 0.3 in-flight / Q_max + 0.3
    rejected share), each clipped to [0, 1], per 60 s window. >= 75 for 2 windows: +2 (cooldown
    300 s); <= 25 for 6 windows: -1 (cooldown 600 s). Capacity per instance is the plan's
    throughput at C_scale_max (what the program sets as PRESSURE_CAPACITY_RPS)."""

    name = "pressure"
    tick_s = PRESSURE_WINDOW_S
    WEIGHTS = (0.4, 0.3, 0.3)
    HIGH, LOW, HIGH_WINDOWS, LOW_WINDOWS, OUT_STEP, IN_STEP = 75.0, 25.0, 2, 6, 2, 1
    OUT_COOLDOWN_S, IN_COOLDOWN_S = 300, 600

    def __init__(self, numbers: ScalingNumbers, q_max: int) -> None:
        self.s, self.q_max = numbers, q_max
        self.min_instances, self.max_instances = numbers.min_instances, numbers.max_instances

    def initial(self) -> int:
        return self.s.min_instances

    def index(self, ctx: Ctx) -> float:
        h, w = ctx.history, self.tick_s
        arr = sum(ctx.window(h.arrivals, w))
        serving = sum(ctx.window(h.serving, w)) / w
        clip = lambda x: min(1.0, max(0.0, x))  # noqa: E731
        qps = clip(arr / w / (serving * self.s.x_target_rps))
        queue = clip(sum(ctx.window(h.occupancy, w)) / w / self.q_max)
        rej = clip(sum(ctx.window(h.rejected, w)) / arr) if arr > 0 else 0.0
        a, b, c = self.WEIGHTS
        return 100.0 * (a * qps + b * queue + c * rej)

    def decide(self, ctx: Ctx) -> Decision:
        st: PressureState = ctx.state or PressureState()
        index = self.index(ctx)
        st = replace(st, high=st.high + 1 if index >= self.HIGH else 0, low=st.low + 1 if index <= self.LOW else 0)
        now, desired = ctx.now, ctx.desired
        if st.high >= self.HIGH_WINDOWS and now >= st.out_until and desired < self.max_instances:
            return (desired + self.OUT_STEP, f"pressure {index:.0f} >= {self.HIGH:g}",
                    replace(st, high=0, out_until=now + self.OUT_COOLDOWN_S))
        if st.low >= self.LOW_WINDOWS and now >= st.in_until and desired > self.min_instances:
            return (desired - self.IN_STEP, f"pressure {index:.0f} <= {self.LOW:g}",
                    replace(st, low=0, in_until=now + self.IN_COOLDOWN_S))
        return desired, "", st


@dataclass(frozen=True)
class EwmaState:
    ewma: float | None = None
    high: int = 0
    low: int = 0


class QpsEwmaPolicy(Policy):
    """EWMA of the request rate against the fleet's limit (instances x the measured throughput at
    Q_max, the most an instance serves within the SLO), evaluated every 60 s cycle (weight 0.3 on
    the newest cycle). Utilization > 80 % for 2 cycles: scale out to ceil(EWMA / (0.8 x limit))
    (proportional to the gap); < 40 % for 4 cycles: -1. A cycle whose rate is more than 3x the EWMA
    (a >200 % jump) scales out at once, sized on that cycle's rate."""

    name = "qps-ewma"
    tick_s = 60
    ALPHA, HIGH, LOW, HIGH_CYCLES, LOW_CYCLES, JUMP = 0.3, 0.8, 0.4, 2, 4, 3.0

    def __init__(self, numbers: ScalingNumbers, limit_rps: float) -> None:
        self.s, self.limit = numbers, limit_rps
        self.min_instances, self.max_instances = numbers.min_instances, numbers.max_instances

    def initial(self) -> int:
        return self.s.min_instances

    def _size(self, rps: float) -> int:
        return math.ceil(rps / (self.HIGH * self.limit) - EPS)

    def decide(self, ctx: Ctx) -> Decision:
        st: EwmaState = ctx.state or EwmaState()
        desired = ctx.desired
        rps = sum(ctx.window(ctx.history.arrivals, self.tick_s)) / self.tick_s
        prev = st.ewma
        ewma = rps if prev is None else self.ALPHA * rps + (1 - self.ALPHA) * prev
        if prev is not None and prev > 0 and rps > self.JUMP * prev:
            new = self._size(rps)
            return (max(new, desired), f"emergency: {rps:.1f} rps > {self.JUMP:g}x EWMA", EwmaState(ewma, 0, 0))
        util = ewma / (desired * self.limit)
        high = st.high + 1 if util > self.HIGH else 0
        low = st.low + 1 if util < self.LOW else 0
        if high >= self.HIGH_CYCLES:
            new = self._size(ewma)
            return max(new, desired), f"utilization {util:.0%} > {self.HIGH:.0%}", EwmaState(ewma, 0, low)
        if low >= self.LOW_CYCLES and desired > self.min_instances:
            return desired - 1, f"utilization {util:.0%} < {self.LOW:.0%}", EwmaState(ewma, high, 0)
        return desired, "", EwmaState(ewma, high, low)


class KpaPolicy(Policy):
    """Knative's pod autoscaler with its documented defaults: every 2 s, desired = ceil(mean
    concurrency over the 60 s stable window / target), target 70 % of the per-instance limit (Q_max
    here); panic when the 6 s window asks for at least 2x the instances in service, then never
    scale down until 60 s without that; scale down at most by half per decision. State: the end of
    the panic."""

    name = "kpa"
    tick_s = 2
    STABLE_S, PANIC_S, PANIC_THRESHOLD, TARGET_UTILIZATION, MAX_SCALE_DOWN_RATE = 60, 6, 2.0, 0.7, 2.0

    def __init__(self, numbers: ScalingNumbers, q_max: int) -> None:
        self.s = numbers
        self.target = self.TARGET_UTILIZATION * q_max
        self.min_instances, self.max_instances = numbers.min_instances, numbers.max_instances

    def initial(self) -> int:
        return self.s.min_instances

    def decide(self, ctx: Ctx) -> Decision:
        h, t = ctx.history, ctx.t

        def total(window: int) -> float:
            lo = max(0, t + 1 - window)
            return sum(o * n for o, n in zip(h.occupancy[lo : t + 1], h.serving[lo : t + 1], strict=True)) / (t + 1 - lo)

        panic_until = -1 if ctx.state is None else ctx.state
        stable = math.ceil(total(self.STABLE_S) / self.target - EPS)
        panic = math.ceil(total(self.PANIC_S) / self.target - EPS)
        if panic >= self.PANIC_THRESHOLD * h.serving[t]:
            panic_until = ctx.now + self.STABLE_S
        if ctx.now < panic_until:
            return max(ctx.desired, panic, stable), "panic", panic_until
        return max(stable, math.ceil(ctx.desired / self.MAX_SCALE_DOWN_RATE)), "stable", panic_until

    def refused(self, old: Any, new: Any) -> Any:
        return new  # the panic window is an observation, kept


class FixedPolicy(Policy):
    """A constant fleet, in service from the start."""

    tick_s = 10**9
    instant = True

    def __init__(self, name: str, instances: int) -> None:
        self.name, self.n = name, max(1, instances)

    def initial(self) -> int:
        return self.n

    def decide(self, ctx: Ctx) -> Decision:
        return ctx.desired, "", None


class ScheduledPolicy(Policy):
    """A fleet that follows a precomputed per-second schedule (``need[t]`` instances), in service at
    once and gone at once: the floor and target-floor."""

    tick_s = 1
    instant = True

    def __init__(self, name: str, need: np.ndarray, reason: str) -> None:
        self.name, self.reason = name, reason
        self.need = np.maximum(1, np.asarray(need, dtype=int)).tolist()

    def initial(self) -> int:
        return self.need[0] if self.need else 1

    def decide(self, ctx: Ctx) -> Decision:
        nxt = ctx.t + 1
        return (self.need[nxt] if nxt < len(self.need) else ctx.desired), self.reason, None


def FloorAtTargetPolicy(arrivals: np.ndarray, x_target_rps: float, name: str = "target-floor") -> ScheduledPolicy:  # noqa: N802
    """The cost floor at the plan's target utilization (the oracle before issue 23): every second exactly
    ceil(arrivals / X(C_scale_max)) instances (at least one), in service at once, gone at once. It
    does not keep the SLO (98.2 % on the reference diurnal day): the bar is its utilization."""
    need = np.maximum(1, np.ceil(np.asarray(arrivals) / x_target_rps - EPS))
    return ScheduledPolicy(name, need, name)


from speech.sim.names import DEFAULT_SLO_SHARE as DEFAULT_SLO_SHARE  # noqa: E402  re-exported; help texts read speech.sim.names


def answered_within_slo(model: InstanceModel, per_instance_rps: np.ndarray, slo_ms: float) -> np.ndarray:
    """Share of arrivals answered within the SLO by one instance in the stationary chain at that
    arrival rate: (1 - P_block) x P(TTFAB <= SLO | admitted). Rates past the model's grid get its
    last (saturated) value."""
    at_slo = model.ttfab_cdf_at(slo_ms)
    ok = (1.0 - model.block) * at_slo
    lam = model.arrival_rps
    return np.interp(per_instance_rps, lam, ok, left=float(ok[0]), right=float(ok[-1]))
