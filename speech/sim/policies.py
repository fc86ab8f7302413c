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

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.units import EPS
from speech.schema.artifacts import QmaxArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.plan.realtime import instances_for, to_cloudwatch
from speech.deploy.scaling import scaling_spec
from speech.plan.survival import throughput_at
from speech.sim.instance import InstanceModel

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
    """At least the measured T_total (speech.deploy.scaling.surge_cooldown_s): one surge per start-up."""
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
    scale_in_percent: int | None = None
    """PercentChangeInCapacity of the scale-in step (negative); None: ``scale_in_step`` instances."""
    scale_in_min_removed: int = 1
    """MinAdjustmentMagnitude of the scale-in step."""
    floors: tuple[tuple[str, str, int], ...] = ()
    """Scheduled floors (cron schedule, time zone, min capacity), by time of day."""

    def scale_in_to(self, desired: int) -> int:
        """Desired count after one scale-in step from ``desired``, as Application Auto Scaling
        computes it: a percentage of the count rounded toward zero, at least MinAdjustmentMagnitude,
        never below the floor."""
        if self.scale_in_percent is None:
            return max(self.min_instances, desired + self.scale_in_step)
        remove = max(self.scale_in_min_removed, math.floor(desired * -self.scale_in_percent / 100.0 + EPS))
        return max(self.min_instances, desired - remove)


def scaling_numbers(plan: PlanArtifact) -> ScalingNumbers:
    """The one place the simulator reads scaling numbers: :func:`speech.deploy.scaling.scaling_spec`, the
    state ``speech.infra.components.autoscaling`` deploys (the endpoint name does not matter here)."""
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
        # The instance spec always sets the surge's smallest step (surge_adjustment); 0 would mean none.
        surge_min_added=spec.surge.min_adjustment_magnitude or 0,
        planning_total_s=plan.t_total.planning_s,
        x_target_rps=plan.capacity.throughput_at_target_rps,
        littles_law_instances=plan.capacity.littles_law_instances,
        scale_in_percent=scale_in.scaling_adjustment if spec.scale_in.adjustment_type == "PercentChangeInCapacity" else None,
        scale_in_min_removed=spec.scale_in.min_adjustment_magnitude or 1,
        floors=tuple((a.schedule, a.timezone, a.min_capacity) for a in spec.scheduled),
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
        self.m = m
        self.window: deque[bool] = deque(maxlen=n)

    def add(self, breaching: bool) -> bool:
        self.window.append(breaching)
        return len(self.window) == self.window.maxlen and sum(self.window) >= self.m


class AwsPolicy(Policy):
    """What ``speech.infra.components.autoscaling`` deploys, as Application Auto Scaling runs it.

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
            new = min(self.max_n, math.ceil(base * metric / self.s.target_value - EPS))
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
            return self.s.scale_in_to(desired), "scale-in"
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
        return min(self.s.max_instances, max(self.s.min_instances, math.ceil(rps / (self.HIGH * self.limit) - EPS)))

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

        stable = math.ceil(total(self.STABLE_S) / self.target - EPS)
        panic = math.ceil(total(self.PANIC_S) / self.target - EPS)
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
        self.need = np.maximum(1, np.ceil(np.asarray(arrivals) / x_target_rps - EPS)).astype(int).tolist()

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
    raise SimulationInputError(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")


