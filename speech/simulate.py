"""Fleet simulator: a traffic trace against a fleet of the measured instance, under a scaling policy.

Pure and vectorized where it can be: numpy tables built once per instance, one scalar loop over
1 s steps per policy (no per-request work), no I/O, no clock. docs/design.md §10 says what is
modelled and what is not.

**Instance model (from the measurement only).** The qmax ladder gives X(n), completions per second
with n requests in the instance (``speech.survival.service_rates``, the plan's own interpolation),
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

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from .artifacts import SCHEMA_VERSION, Frozen, PlanArtifact, QmaxArtifact, TtotalArtifact, canonical_sha256
from .plan import instances_for, to_cloudwatch
from .scaling import scaling_spec
from .survival import service_rates, throughput_at

TARGET_TRACKING_HIGH_DATAPOINTS = 3
"""Datapoints (of one metric period each, all breaching) of the scale-out alarm Application Auto
Scaling creates for a target-tracking policy. With the high-resolution SageMaker metric the period
is 10 s, so the hidden alarm fires after 30 s above target (docs/design.md §10.3)."""
PRESSURE_WINDOW_S = 60
"""The container's pressure-index window (PRESSURE_WINDOW_S default), one evaluation per window."""
OCCUPANCY_GRID = 320
TTFAB_BINS = 480
SLO_SHARE = 0.95
"""A minute violates the SLO when fewer than 95 % of its requests got their first audio byte within
the SLO (its p95 TTFAB, counting a rejected request as never answered, is above the SLO)."""


# --- instance ----------------------------------------------------------------------------------


def startup_s(ttotal: TtotalArtifact) -> float:
    """Seconds from "more capacity asked for" to the new instance taking traffic: the ``in_service``
    phase when it applies (SageMaker), else ``ready`` (local process), else the measured total.
    What follows in_service (the queue draining to normal latency) is simulated, not added."""
    by_name = {p.name: p for p in ttotal.phases if p.applicable and p.offset_s is not None}
    for name in ("in_service", "ready"):
        if name in by_name:
            return float(by_name[name].offset_s)
    return float(ttotal.measured_total_s)


def gated_chain(arrival_rps: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Stationary distributions (rows) on 0..Q of the chain with departures X(n) and Poisson
    arrivals refused at Q = len(rates): pi(n) proportional to prod_{k<=n} lambda / X(k)."""
    lam = np.asarray(arrival_rps, dtype=float)[:, None]
    n = np.arange(rates.size + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = n[None, :] * np.log(lam) - np.concatenate([[0.0], np.cumsum(np.log(rates))])[None, :]
    logw[:, 0] = 0.0
    logw = np.where(np.isnan(logw), -np.inf, logw)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _ttfab_cdf(p50: np.ndarray, p95: np.ndarray, p99: np.ndarray, bins_ms: np.ndarray) -> np.ndarray:
    """Per concurrency (rows), a piecewise-linear CDF through the ladder's p50, p95 and p99, with
    the tails extended linearly at the slopes of the nearest segment (bounded below by 0)."""
    out = np.empty((p50.size, bins_ms.size))
    for i, (a, b, c) in enumerate(zip(p50, p95, p99, strict=True)):
        b = max(b, a + 1e-6)
        c = max(c, b + 1e-6)
        lo = max(0.0, a - (b - a) * 0.5 / 0.45)
        hi = c + (c - b) * 0.01 / 0.04
        out[i] = np.interp(bins_ms, [lo, a, b, c, hi], [0.0, 0.5, 0.95, 0.99, 1.0])
    return out


@dataclass(frozen=True)
class InstanceModel:
    """Everything the simulator knows about one instance, each table indexed by an occupancy grid."""

    q_max: int
    startup_s: float
    cloudwatch_ratio: float
    saturation_rps: float
    occupancy: np.ndarray
    """Mean occupancy m_k of the grid's stationary chains (increasing, from 0 to just below Q_max)."""
    block: np.ndarray
    """P(an arrival finds the gate full) at m_k."""
    depart_rps: np.ndarray
    """Completions per second at m_k (= admitted arrivals in the stationary chain)."""
    bins_ms: np.ndarray
    cdf: np.ndarray
    """TTFAB CDF of admitted requests at m_k (rows) over ``bins_ms``."""

    def ttfab_cdf_at(self, slo_ms: float) -> np.ndarray:
        return np.array([np.interp(slo_ms, self.bins_ms, row) for row in self.cdf])


def build_instance(qmax: QmaxArtifact, ttotal: TtotalArtifact | None, *, grid: int = OCCUPANCY_GRID,
                   bins: int = TTFAB_BINS, slo_ms: float | None = None) -> InstanceModel:
    """The instance model from the two artifacts alone (nothing assumed beyond the chain).
    Without a ttotal artifact new instances serve at once (for fixed fleets)."""
    q = qmax.q_max
    if q < 1:
        raise ValueError("Q_max is 0: no concurrency met the SLO, there is nothing to simulate")
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    rates = service_rates(levels, q)
    sat = float(rates[-1])
    # Dense sweep of arrival rates, then a grid even in occupancy (plus fine steps near idle).
    dense = np.concatenate([[0.0], np.geomspace(1e-5, 40.0, 4000)]) * max(sat, 1e-9)
    dense_mean = gated_chain(dense, rates) @ np.arange(q + 1)
    targets = np.unique(np.concatenate([np.geomspace(1e-4, 1.0, 24), np.linspace(0.0, dense_mean[-1], grid)]))
    targets = targets[targets <= dense_mean[-1]]
    lam = np.interp(targets, dense_mean, dense)
    pi = gated_chain(lam, rates)
    occ = pi @ np.arange(q + 1)
    keep = np.concatenate([[True], np.diff(occ) > 1e-12])
    lam, pi, occ = lam[keep], pi[keep], occ[keep]
    block = pi[:, q]
    depart = lam * (1.0 - block)
    # TTFAB of a request admitted behind n others: the ladder at concurrency n + 1 (flat outside).
    cs = [lv.concurrency for lv in qmax.ladder]
    conc = np.arange(1, q + 1, dtype=float)
    p50 = np.interp(conc, cs, [lv.ttfab_p50_ms for lv in qmax.ladder])
    p95 = np.interp(conc, cs, [lv.ttfab_p95_ms for lv in qmax.ladder])
    p99 = np.interp(conc, cs, [lv.ttfab_p99_ms for lv in qmax.ladder])
    top = max(float(p99.max()) * 1.3, (slo_ms or qmax.slo.ttfab_p95_ms) * 1.5)
    bins_ms = np.linspace(0.0, top, bins)
    per_n = _ttfab_cdf(p50, p95, p99, bins_ms)
    seen = pi[:, :q]
    seen = seen / np.where(seen.sum(axis=1, keepdims=True) > 0, seen.sum(axis=1, keepdims=True), 1.0)
    return InstanceModel(
        q_max=q, startup_s=startup_s(ttotal) if ttotal is not None else 0.0, cloudwatch_ratio=qmax.cloudwatch_ratio, saturation_rps=sat,
        occupancy=occ, block=block, depart_rps=depart, bins_ms=bins_ms, cdf=seen @ per_n,
    )


# --- scaling numbers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingNumbers:
    """Every number the deployed scaling uses, in the units AWS sees them."""

    min_instances: int
    max_instances: int
    metric_period_s: int
    target_value: float
    """Target tracking on ConcurrentRequestsPerModel (CloudWatch units), scale-in disabled there."""
    scale_out_cooldown_s: int
    surge_cooldown_s: int
    """At least the measured T_total (speech.scaling.surge_cooldown_s): one surge per start-up."""
    scale_in_threshold: float
    scale_in_periods: int
    scale_in_cooldown_s: int
    scale_in_step: int
    """Instances one scale-in changes the fleet by (negative)."""
    saturation_threshold: float
    surge_periods: int
    surge_percent: int
    surge_min_added: int
    planning_total_s: float
    x_target_rps: float
    """Measured per-instance throughput at C_scale_max."""
    littles_law_instances: int


def scaling_numbers(plan: PlanArtifact) -> ScalingNumbers:
    """The one place the simulator reads scaling numbers: :func:`speech.scaling.scaling_spec`, the
    state ``speech.components.autoscaling`` deploys (the endpoint name does not matter here)."""
    spec = scaling_spec(plan, "simulated")
    [surge], [scale_in] = spec.surge.steps, spec.scale_in.steps
    return ScalingNumbers(
        min_instances=spec.target.min_capacity,
        max_instances=spec.target.max_capacity,
        metric_period_s=spec.scale_in_alarm.period_s,
        target_value=spec.scale_out.target_value,
        scale_out_cooldown_s=spec.scale_out.scale_out_cooldown_s,
        surge_cooldown_s=spec.surge.cooldown_s,
        scale_in_threshold=spec.scale_in_alarm.threshold,
        scale_in_periods=spec.scale_in_alarm.evaluation_periods,
        scale_in_cooldown_s=spec.scale_in.cooldown_s,
        scale_in_step=scale_in.scaling_adjustment,
        saturation_threshold=spec.surge_alarm.threshold,
        surge_periods=spec.surge_alarm.evaluation_periods,
        surge_percent=surge.scaling_adjustment,
        surge_min_added=spec.surge.min_adjustment_magnitude,
        planning_total_s=plan.t_total.planning_s,
        x_target_rps=plan.capacity.throughput_at_target_rps,
        littles_law_instances=plan.capacity.littles_law_instances,
    )


# --- what a policy sees ------------------------------------------------------------------------


@dataclass
class History:
    """Per-second record of the run so far; policies read windows of it."""

    occupancy: list
    """Mean requests in flight per in-service instance, end of each second."""
    arrivals: list
    rejected: list
    serving: list
    """Instances in service during each second."""


class Policy:
    """A scaling policy: ``decide`` runs every ``tick_s`` seconds and returns a new desired
    instance count (or None to keep it); ``reason`` names what fired."""

    name = "policy"
    tick_s = 10
    instant = False
    """True for the oracle: changes take effect at once, no start-up, no drain."""

    def initial(self) -> int:
        raise NotImplementedError

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        raise NotImplementedError


class _Alarm:
    """A CloudWatch alarm with M of N datapoints: in ALARM while at least M of the last N breach."""

    def __init__(self, m: int, n: int) -> None:
        self.m, self.window = m, deque(maxlen=n)

    def add(self, breaching: bool) -> bool:
        self.window.append(breaching)
        return len(self.window) == self.window.maxlen and sum(self.window) >= self.m


class AwsPolicy(Policy):
    """What ``speech.components.autoscaling`` deploys, as Application Auto Scaling runs it.

    Every metric period (10 s) CloudWatch gets one ConcurrentRequestsPerModel datapoint, statistic
    Maximum: the highest per-second mean occupancy of the period in CloudWatch units
    (``to_cloudwatch``). When the gate refused at least one request in the period an instance
    stood at Q_max, so the datapoint is Q_max (in CloudWatch units).

    * target tracking: its hidden scale-out alarm needs 3 of 3 datapoints above the target; then
      desired = ceil(capacity x metric / target). During the scale-out cooldown the capacity the
      last scale-out added counts toward the next one (the base is the capacity before it), so
      only a larger result acts; after the cooldown the base is the current desired count.
      Scale-in is disabled on this policy.
    * surge step: alarm >= Q_max for ``datapoints_to_alarm`` periods; +percent of the desired
      count (rounded down, at least 1), at least ``MinAdjustmentMagnitude``; its own cooldown.
    * scale-in step: alarm <= C_scale_min for every one of the window's periods (a period without
      traffic breaches); -1; its own cooldown.
    * several policies at once: the largest resulting capacity wins; min/max clamp.
    """

    def __init__(self, numbers: ScalingNumbers, ratio: float, q_max: int, *, name: str = "plan",
                 max_instances: int | None = None) -> None:
        self.name = name
        self.s = numbers
        self.ratio = ratio
        self.q_max = q_max
        self.tick_s = numbers.metric_period_s
        self.max_n = numbers.max_instances if max_instances is None else max(numbers.min_instances, max_instances)
        self.tt = _Alarm(TARGET_TRACKING_HIGH_DATAPOINTS, TARGET_TRACKING_HIGH_DATAPOINTS)
        self.surge = _Alarm(numbers.surge_periods, numbers.surge_periods)
        self.low = _Alarm(numbers.scale_in_periods, numbers.scale_in_periods)
        self.tt_until = -1.0
        self.tt_base = 0
        self.surge_until = -1.0
        self.in_until = -1.0

    def initial(self) -> int:
        return self.s.min_instances

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        lo = t + 1 - self.tick_s
        occ = max(h.occupancy[lo : t + 1])
        traffic = sum(h.arrivals[lo : t + 1])
        full = sum(h.rejected[lo : t + 1]) >= 1.0
        metric = to_cloudwatch(self.q_max if full else occ, self.ratio)
        tt_fire = self.tt.add(metric > self.s.target_value)
        surge_fire = self.surge.add(metric >= self.s.saturation_threshold)
        low_fire = self.low.add(traffic <= 0 or metric <= self.s.scale_in_threshold)
        now = t + 1
        best, why = desired, ""
        if tt_fire:
            base = self.tt_base if now < self.tt_until else desired
            new = min(self.max_n, math.ceil(base * metric / self.s.target_value - 1e-9))
            if new > best:
                best, why = new, "target-tracking"
        if surge_fire and now >= self.surge_until:
            add = desired * self.s.surge_percent / 100.0
            add = max(1, math.floor(add)) if add > 0 else 0
            new = min(self.max_n, desired + max(add, self.s.surge_min_added))
            if new > best:
                best, why = new, "surge"
        if best > desired:
            if why == "target-tracking":
                if now >= self.tt_until:
                    self.tt_base = desired
                self.tt_until = now + self.s.scale_out_cooldown_s
            else:
                self.surge_until = now + self.s.surge_cooldown_s
            return best, why
        if low_fire and now >= self.in_until and desired > self.s.min_instances:
            self.in_until = now + self.s.scale_in_cooldown_s
            return max(self.s.min_instances, desired + self.s.scale_in_step), "scale-in"
        return None


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
        self.high = self.low = 0
        self.out_until = self.in_until = -1

    def initial(self) -> int:
        return self.s.min_instances

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        lo = t + 1 - self.tick_s
        arr = sum(h.arrivals[lo : t + 1])
        serving = sum(h.serving[lo : t + 1]) / self.tick_s
        clip = lambda x: min(1.0, max(0.0, x))  # noqa: E731
        qps = clip(arr / self.tick_s / (serving * self.s.x_target_rps))
        queue = clip(sum(h.occupancy[lo : t + 1]) / self.tick_s / self.q_max)
        rej = clip(sum(h.rejected[lo : t + 1]) / arr) if arr > 0 else 0.0
        w = self.WEIGHTS
        index = 100.0 * (w[0] * qps + w[1] * queue + w[2] * rej)
        self.high = self.high + 1 if index >= self.HIGH else 0
        self.low = self.low + 1 if index <= self.LOW else 0
        now = t + 1
        if self.high >= self.HIGH_WINDOWS and now >= self.out_until and desired < self.s.max_instances:
            self.high = 0
            self.out_until = now + self.OUT_COOLDOWN_S
            return min(self.s.max_instances, desired + self.OUT_STEP), f"pressure {index:.0f} >= {self.HIGH:g}"
        if self.low >= self.LOW_WINDOWS and now >= self.in_until and desired > self.s.min_instances:
            self.low = 0
            self.in_until = now + self.IN_COOLDOWN_S
            return desired - self.IN_STEP, f"pressure {index:.0f} <= {self.LOW:g}"
        return None


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
        self.ewma: float | None = None
        self.high = self.low = 0

    def initial(self) -> int:
        return self.s.min_instances

    def _size(self, rps: float) -> int:
        return min(self.s.max_instances, max(self.s.min_instances, math.ceil(rps / (self.HIGH * self.limit) - 1e-9)))

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        rps = sum(h.arrivals[t + 1 - self.tick_s : t + 1]) / self.tick_s
        prev = self.ewma
        self.ewma = rps if prev is None else self.ALPHA * rps + (1 - self.ALPHA) * prev
        if prev is not None and prev > 0 and rps > self.JUMP * prev:
            self.high = self.low = 0
            new = self._size(rps)
            return (new, f"emergency: {rps:.1f} rps > {self.JUMP:g}x EWMA") if new > desired else None
        util = self.ewma / (desired * self.limit)
        self.high = self.high + 1 if util > self.HIGH else 0
        self.low = self.low + 1 if util < self.LOW else 0
        if self.high >= self.HIGH_CYCLES:
            self.high = 0
            new = self._size(self.ewma)
            return (new, f"utilization {util:.0%} > {self.HIGH:.0%}") if new > desired else None
        if self.low >= self.LOW_CYCLES and desired > self.s.min_instances:
            self.low = 0
            return desired - 1, f"utilization {util:.0%} < {self.LOW:.0%}"
        return None


class KpaPolicy(Policy):
    """Knative's pod autoscaler with its documented defaults: every 2 s, desired = ceil(mean
    concurrency over the 60 s stable window / target), target 70 % of the per-instance limit (Q_max
    here); panic when the 6 s window asks for at least 2x the instances in service, then never
    scale down until 60 s without that; scale down at most by half per decision."""

    name = "kpa"
    tick_s = 2
    STABLE_S, PANIC_S, PANIC_THRESHOLD, TARGET_UTILIZATION, MAX_SCALE_DOWN_RATE = 60, 6, 2.0, 0.7, 2.0

    def __init__(self, numbers: ScalingNumbers, q_max: int) -> None:
        self.s = numbers
        self.target = self.TARGET_UTILIZATION * q_max
        self.panic_until = -1

    def initial(self) -> int:
        return self.s.min_instances

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        def total(window: int) -> float:
            lo = max(0, t + 1 - window)
            return sum(o * n for o, n in zip(h.occupancy[lo : t + 1], h.serving[lo : t + 1], strict=True)) / (t + 1 - lo)

        stable = math.ceil(total(self.STABLE_S) / self.target - 1e-9)
        panic = math.ceil(total(self.PANIC_S) / self.target - 1e-9)
        serving = h.serving[t]
        now = t + 1
        if panic >= self.PANIC_THRESHOLD * serving:
            self.panic_until = now + self.STABLE_S
        if now < self.panic_until:
            new, why = max(desired, panic, stable), "panic"
        else:
            new, why = max(stable, math.ceil(desired / self.MAX_SCALE_DOWN_RATE)), "stable"
        new = min(self.s.max_instances, max(self.s.min_instances, new))
        return (new, why) if new != desired else None


class FixedPolicy(Policy):
    """A constant fleet, in service from the start."""

    tick_s = 10**9
    instant = True

    def __init__(self, name: str, instances: int) -> None:
        self.name, self.n = name, max(1, instances)

    def initial(self) -> int:
        return self.n

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        return None


class OraclePolicy(Policy):
    """The cost lower bound: every second exactly ceil(arrivals / X(C_scale_max)) instances (at
    least one), in service at once, gone at once."""

    name = "oracle"
    tick_s = 1
    instant = True

    def __init__(self, arrivals: np.ndarray, x_target_rps: float) -> None:
        self.need = np.maximum(1, np.ceil(np.asarray(arrivals) / x_target_rps - 1e-9)).astype(int).tolist()

    def initial(self) -> int:
        return self.need[0] if self.need else 1

    def decide(self, t: int, desired: int, h: History) -> tuple[int, str] | None:
        if t + 1 < len(self.need) and self.need[t + 1] != desired:
            return self.need[t + 1], "oracle"
        return None


POLICY_NAMES = ("plan", "reference", "pressure", "qps-ewma", "kpa", "fixed-peak", "oracle")


def make_policy(name: str, *, plan: PlanArtifact, qmax: QmaxArtifact, model: InstanceModel, arrivals: np.ndarray,
                peak_rps: float) -> Policy:
    """One of :data:`POLICY_NAMES`, parameterized from the plan and the measurement."""
    s = scaling_numbers(plan)
    if name == "plan":
        return AwsPolicy(s, model.cloudwatch_ratio, model.q_max)
    if name == "reference":
        return AwsPolicy(s, model.cloudwatch_ratio, model.q_max, name="reference", max_instances=s.littles_law_instances)
    if name == "pressure":
        return PressurePolicy(s, model.q_max)
    if name == "qps-ewma":
        levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
        return QpsEwmaPolicy(s, throughput_at(levels, model.q_max))
    if name == "kpa":
        return KpaPolicy(s, model.q_max)
    if name == "fixed-peak":
        return FixedPolicy("fixed-peak", max(s.min_instances, instances_for(peak_rps, s.x_target_rps)))
    if name == "oracle":
        return OraclePolicy(arrivals, s.x_target_rps)
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")


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


def run_policy(model: InstanceModel, arrivals: np.ndarray, policy: Policy) -> Run:
    """Step the fleet through the trace one second at a time under ``policy``."""
    occ_grid = model.occupancy.tolist()
    dep = model.depart_rps.tolist()
    blk = model.block.tolist()
    arr = np.asarray(arrivals, dtype=float).tolist()
    T = len(arr)
    hist = History(occupancy=[0.0] * T, arrivals=arr, rejected=[0.0] * T, serving=[0] * T)
    pos_out, adm_out, billed_out = [0.0] * T, [0.0] * T, [0] * T
    actions: list[Action] = []
    n = policy.initial()
    desired = n
    pending: deque = deque()
    draining: list = []
    startup = model.startup_s
    tick = policy.tick_s
    instant = policy.instant
    m = 0.0
    for t in range(T):
        while pending and pending[0] <= t:
            pending.popleft()
            m = m * n / (n + 1)
            n += 1
        a = arr[t]
        m, pb, k, w = fluid_step(occ_grid, dep, blk, m, a / n)
        rej = a * pb
        hist.occupancy[t] = m
        hist.rejected[t] = rej
        hist.serving[t] = n
        pos_out[t] = k + w
        adm_out[t] = a - rej
        if draining:
            draining = [e for e in draining if e > t]
        billed_out[t] = n + len(pending) + len(draining)
        if (t + 1) % tick == 0 and t + 1 < T:
            decision = policy.decide(t, desired, hist)
            if decision is not None and decision[0] != desired:
                new, why = decision
                new = max(1, new)
                if instant:
                    # The oracle's per-second changes are not scaling actions anyone would run.
                    m = m * n / new
                    n = desired = new
                    continue
                actions.append(Action(t_s=t + 1, before=desired, after=new, reason=why))
                if new > desired:
                    pending.extend([t + 1 + startup] * (new - desired))
                else:
                    for _ in range(desired - new):
                        if pending:
                            pending.pop()
                        elif n > 1:
                            # The instance leaves routing and drains what it holds.
                            rate = dep[k] if dep[k] > 0 else model.saturation_rps
                            draining.append(t + 1 + math.ceil(m / rate) if m > 0 else t + 1)
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


def minute_within_share(run: Run, model: InstanceModel, slo_ms: float) -> np.ndarray:
    """Per minute: share of requests answered within the SLO (a rejected request never is)."""
    at_slo = model.ttfab_cdf_at(slo_ms)
    k = np.floor(run.grid_pos).astype(int)
    frac = run.grid_pos - k
    nxt = np.minimum(k + 1, at_slo.size - 1)
    ok = run.admitted * (at_slo[k] * (1 - frac) + at_slo[nxt] * frac)
    minutes = math.ceil(run.arrivals.size / 60)
    idx = np.arange(run.arrivals.size) // 60
    ok_m = np.bincount(idx, ok, minlength=minutes)
    all_m = np.bincount(idx, run.arrivals, minlength=minutes)
    return np.where(all_m > 0, ok_m / np.where(all_m > 0, all_m, 1), 1.0)


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
    share = minute_within_share(run, model, slo_ms)
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
) -> tuple[InstanceModel, list[Run], list[Summary]]:
    """Run every named policy on the same arrivals; summaries in the order asked."""
    from .traces import peak_rps as trace_peak

    model = model or build_instance(qmax, ttotal, slo_ms=plan.inputs.slo_ms)
    peak = trace_peak(arrivals) if peak_rps is None else peak_rps
    runs, sums = [], []
    for name in policies:
        pol = make_policy(name, plan=plan, qmax=qmax, model=model, arrivals=arrivals, peak_rps=peak)
        run = run_policy(model, arrivals, pol)
        runs.append(run)
        sums.append(summarize(run, model, plan.inputs.slo_ms, plan.t_total.planning_s))
    return model, runs, sums


# --- artifact ----------------------------------------------------------------------------------


class TraceRecord(Frozen):
    spec: str
    name: str
    seed: int | None = None
    duration_s: int
    requests: float
    peak_rps: float
    """Busiest minute's mean arrival rate."""
    source_sha256: str | None = None
    attribution: str | None = None


class PolicyResult(Frozen):
    policy: str
    within_slo_share: float
    rejected_share: float
    ttfab_p95_ms: float | None
    ttfab_p99_ms: float | None
    violation_minutes: int
    instance_hours: float
    cost_usd: float | None
    cost_vs_oracle: float | None
    scale_out_actions: int
    scale_in_actions: int
    flaps: int
    peak_instances: int


class SimulationArtifact(Frozen):
    """Result of ``bench simulate``: every policy on one trace, with what went in."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["simulation"] = "simulation"
    model: str
    slo_ms: float
    qmax_sha256: str
    ttotal_sha256: str
    plan_sha256: str
    trace: TraceRecord
    price_per_hour_usd: float | None = None
    startup_s: float
    """Start-up of a new instance used (the ttotal artifact's in_service phase)."""
    planning_total_s: float
    results: list[PolicyResult] = Field(min_length=1)
    created_at: datetime | None = None
    tool: str = "speech.simulate.simulate"


def _finite(x: float) -> float | None:
    return round(x, 3) if x == x and math.isfinite(x) else None


def simulation_artifact(*, plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact, trace, model: InstanceModel,
                        summaries: Sequence[Summary], price_per_hour: float | None,
                        created_at: datetime | None = None) -> SimulationArtifact:
    """The artifact from a run; costs relative to the oracle when it ran."""
    oracle = next((s for s in summaries if s.policy == "oracle"), None)
    results = [
        PolicyResult(
            policy=s.policy,
            within_slo_share=round(s.within_slo_share, 6),
            rejected_share=round(s.rejected_share, 6),
            ttfab_p95_ms=_finite(s.ttfab_p95_ms),
            ttfab_p99_ms=_finite(s.ttfab_p99_ms),
            violation_minutes=s.violation_minutes,
            instance_hours=round(s.instance_hours, 3),
            cost_usd=round(s.instance_hours * price_per_hour, 2) if price_per_hour is not None else None,
            cost_vs_oracle=round(s.instance_hours / oracle.instance_hours, 4) if oracle and oracle.instance_hours > 0 else None,
            scale_out_actions=s.scale_out_actions,
            scale_in_actions=s.scale_in_actions,
            flaps=s.flaps,
            peak_instances=s.peak_instances,
        )
        for s in summaries
    ]
    return SimulationArtifact(
        model=plan.model,
        slo_ms=plan.inputs.slo_ms,
        qmax_sha256=canonical_sha256(qmax),
        ttotal_sha256=canonical_sha256(ttotal),
        plan_sha256=canonical_sha256(plan),
        trace=TraceRecord(
            spec=trace.spec, name=trace.name, seed=trace.seed, duration_s=trace.duration_s,
            requests=round(trace.total_requests, 3), peak_rps=round(trace.peak_rps, 3),
            source_sha256=trace.source_sha256, attribution=trace.attribution,
        ),
        price_per_hour_usd=price_per_hour,
        startup_s=model.startup_s,
        planning_total_s=plan.t_total.planning_s,
        results=results,
        created_at=created_at,
    )


# --- several routes under one budget (docs/design.md §10.9) -------------------------------------


@dataclass(frozen=True)
class BudgetRoute:
    """One real-time route of a stack with a daily budget: its plan (capped by the allocation,
    speech.budget.apply_allocation), the measurements it was planned from, and its own traffic."""

    name: str
    plan: PlanArtifact
    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    arrivals: np.ndarray


@dataclass(frozen=True)
class RouteResult:
    """A route at its budget cap next to the same route with its whole planned need."""

    name: str
    priority: str
    max_instances: int
    """What the budget allows (the capped plan's fleet max)."""
    peak_instances: int
    """What its plan needs at peak."""
    capped: Summary
    """The deployed policy with the fleet capped at the allocation."""
    uncapped: Summary
    """The same policy and traffic with the whole need: the baseline the cap is judged against."""


def simulate_budget(routes: Sequence[BudgetRoute]) -> list[RouteResult]:
    """Every route on its own traffic under the deployed policy, at its budget cap and at its whole
    planned need. Routes are separate endpoints, so they share nothing while running: the budget
    acts only through each fleet's max capacity, which is what this shows (a critical route keeps
    its plan, a capped standard route refuses what its capped fleet cannot admit at peak)."""
    out = []
    for r in routes:
        alloc = r.plan.budget
        peak = alloc.peak_instances if alloc is not None else r.plan.fleet.max_instances
        full = r.plan.model_copy(update={"fleet": r.plan.fleet.model_copy(update={"max_instances": max(
            r.plan.fleet.min_instances, peak)})})
        model = build_instance(r.qmax, r.ttotal, slo_ms=r.plan.inputs.slo_ms)
        _, _, capped = simulate(r.plan, r.qmax, r.ttotal, r.arrivals, policies=("plan",), model=model)
        _, _, uncapped = simulate(full, r.qmax, r.ttotal, r.arrivals, policies=("plan",), model=model)
        out.append(RouteResult(name=r.name, priority=alloc.priority if alloc is not None else "standard",
                               max_instances=r.plan.fleet.max_instances, peak_instances=peak,
                               capped=capped[0], uncapped=uncapped[0]))
    return out


def budget_table(results: Sequence[RouteResult]) -> str:
    """The comparison as a text table (benchmarks/simulate_budget.py prints it)."""
    head = (f"{'route':<14} {'priority':<9} {'fleet':>7} {'':<9} {'within SLO':>10} {'rejected':>9} "
            f"{'p95 ms':>8} {'viol. min':>9} {'inst-h':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        for label, s, n in (("at cap", r.capped, r.max_instances), ("whole need", r.uncapped, r.peak_instances)):
            lines.append(f"{r.name:<14} {r.priority:<9} {n:>7} {label:<9} {100 * s.within_slo_share:>9.1f}% "
                         f"{100 * s.rejected_share:>8.1f}% {s.ttfab_p95_ms:>8.0f} {s.violation_minutes:>9} "
                         f"{s.instance_hours:>8.1f}")
    return "\n".join(lines)


# --- a batch route's backlog (asynchronous inference) -------------------------------------------


@dataclass(frozen=True)
class BacklogRun:
    """A batch route's queue over the trace, one value per second."""

    backlog: np.ndarray
    """Requests waiting (not yet being served) at the end of each second."""
    serving: np.ndarray
    """Instances in service."""
    completed: np.ndarray
    """Requests finished in each second."""
    delay_p95_s: float
    """95th percentile of submission-to-completion delay of the requests finished (FIFO)."""
    delay_max_s: float
    within_delay_share: float
    """Share of all requests finished within the plan's max_delay_s."""
    unfinished: float
    """Requests still waiting when the trace ends."""


def simulate_backlog(plan, ttotal: TtotalArtifact, arrivals: np.ndarray) -> BacklogRun:
    """A batch plan (speech.batch.BatchPlan) on a trace: the asynchronous endpoint's queue and its
    backlog scaling, as a fluid model with 1 s steps.

    What it models: every in-service instance completes ``throughput_per_instance_rps`` (X(Q_max),
    the plan's measured sustained rate) while work waits; requests are served in arrival order.
    Every 60 s (the asynchronous metrics' period) target tracking sets desired =
    ceil(backlog / backlog_target_per_instance), clamped to [0, max_instances]; a larger value acts
    after the scale-out cooldown, a smaller one after the scale-in cooldown; at zero instances the
    wake alarm adds one instance after ``wake.datapoints_to_alarm`` periods with a backlog. A new
    instance serves after the measured start-up (:func:`startup_s`). Not modelled: request sizes,
    S3 transfer times, the per-instance concurrency limit below X(Q_max).
    """
    x = float(plan.throughput_per_instance_rps)
    target = max(1, int(plan.backlog_target_per_instance))
    period = int(plan.wake.period_s)
    start = startup_s(ttotal)
    arr = np.asarray(arrivals, dtype=float)
    T = len(arr)
    backlog, serving, done = np.zeros(T), np.zeros(T, dtype=int), np.zeros(T)
    n, desired, b = 0, 0, 0.0
    pending: deque = deque()
    last_out, last_in = -math.inf, -math.inf
    breach = 0
    for t in range(T):
        while pending and pending[0] <= t:
            pending.popleft()
            n += 1
        b += arr[t]
        served = min(b, n * x)
        b -= served
        done[t], backlog[t], serving[t] = served, b, n
        if (t + 1) % period:
            continue
        have = n + len(pending)
        if have == 0:
            breach = breach + 1 if b > 0 else 0
            if breach >= plan.wake.datapoints_to_alarm:
                desired, breach, last_out = plan.wake.instances_added, 0, t
        else:
            want = min(plan.max_instances, math.ceil(b / target - 1e-9))
            if want > have and t - last_out >= plan.cooldowns.scale_out_s:
                desired, last_out = want, t
            elif want < have and t - last_in >= plan.cooldowns.scale_in_s and t - last_out >= plan.cooldowns.scale_in_s:
                desired, last_in = want, t
            else:
                desired = have
        while n + len(pending) < desired:
            pending.append(t + start)
        while n + len(pending) > desired and pending:
            pending.pop()
        while n > desired:
            n -= 1
    # FIFO delay: the k-th request (cumulative) finishes when cumulative completions reach k.
    cum_in, cum_out = np.cumsum(arr), np.cumsum(done)
    finished = cum_out[-1] if T else 0.0
    ks = np.linspace(0.0, finished, num=min(2000, max(2, int(finished)))) if finished > 0 else np.zeros(0)
    t_in = np.searchsorted(cum_in, ks, side="left")
    t_out = np.searchsorted(cum_out, ks, side="left")
    delays = (t_out - t_in).astype(float)
    total = float(cum_in[-1]) if T else 0.0
    within = float(np.mean(delays <= plan.inputs.max_delay_s)) * finished / total if total > 0 and delays.size else 1.0
    return BacklogRun(
        backlog=backlog, serving=serving, completed=done,
        delay_p95_s=float(np.percentile(delays, 95)) if delays.size else 0.0,
        delay_max_s=float(delays.max()) if delays.size else 0.0,
        within_delay_share=within,
        unfinished=float(b),
    )
