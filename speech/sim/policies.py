"""Scaling policies for the fleet simulator, in Ray Serve's style (serve/autoscaling_policy.py).

Each policy is a pure function of what it sees: ``decide(ctx) -> (instances, reason, state)``. The
context holds the run so far, the current desired count and the state the policy returned last time;
nothing in a policy object changes during a run. One shared wrapper, :class:`Scaler`, calls it on the
policy's tick, applies the bounds (the scalable target's min/max, at least one instance) and keeps
the state; the fleet (``speech.sim.fleet.run_policy``) applies the endpoint's rules (start-up, one
capacity change at a time). :data:`POLICIES` is the registry (name -> factory).

docs/design.md §10.3 (AWS mechanics) and §10.4 (the other policies).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.units import EPS
from speech.schema.artifacts import QmaxArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.plan.realtime import instances_for, to_cloudwatch
from speech.deploy.scaling import scaling_spec
from speech.plan.survival import throughput_at
from speech.sim.instance import InstanceModel
from speech.sim.instance import MIN_SATURATION_RPS

TARGET_TRACKING_HIGH_DATAPOINTS = 3
"""Datapoints (of one metric period each, all breaching) of the scale-out alarm Application Auto
Scaling creates for a target-tracking policy. With the high-resolution SageMaker metric the period
is 10 s, so the hidden alarm fires after 30 s above target (docs/design.md §10.3). AWS does not
document the number: a reading, see :class:`AwsReadings`."""
PRESSURE_WINDOW_S = 60
"""The container's pressure-index window (PRESSURE_WINDOW_S default), one evaluation per window."""


@dataclass(frozen=True)
class AwsReadings:
    """The AWS behaviours the simulator needs that AWS does not document, each with its default
    (docs/design.md §10.3 shows the plan under each reading)."""

    target_tracking_datapoints: int = TARGET_TRACKING_HIGH_DATAPOINTS
    """Consecutive 10 s datapoints above target before target tracking scales out."""
    removal_updating_s: float = 60.0
    """How long the endpoint stays Updating after UpdateEndpointWeightsAndCapacities removes
    instances (not published; a scale-out stays Updating until the new instances are InService)."""
    one_change_at_a_time: bool = True
    """A capacity change while the endpoint is Updating is refused (documented; False only to show
    what the rule does)."""


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
    """Instances one scale-in changes the fleet by (negative; with ``scale_in_percent`` unused)."""
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


CRON_RE = re.compile(r"^cron\((\d+) (\d+) \* \* \? \*\)$")


def floor_at(numbers: ScalingNumbers, t_s: float) -> int:
    """The scalable target's minimum at ``t_s`` seconds into the trace under the daily scheduled
    floors (``cron(M H * * ? *)``; the trace starts at 00:00 of the schedule's time zone): the
    latest entry at or before that time of day (the day's last entry before the first), never
    below the plan's floor."""
    if not numbers.floors:
        return numbers.min_instances
    entries = []
    for cron, _tz, n in numbers.floors:
        m = CRON_RE.match(cron)
        if m is None:
            raise SimulationInputError(f"scheduled floor {cron!r} is not cron(M H * * ? *)")
        entries.append((int(m.group(2)) * 60 + int(m.group(1)), n))
    entries.sort()
    minute = int(t_s // 60) % 1440
    past = [n for at, n in entries if at <= minute]
    return max(numbers.min_instances, past[-1] if past else entries[-1][1])


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
    """Mean requests in flight per in-service instance, end of each second (in the container:
    queued inside it as well as being synthesized, what ConcurrentRequestsPerModel counts)."""
    arrivals: list
    rejected: list
    serving: list
    """Instances in service during each second."""


@dataclass(frozen=True)
class Ctx:
    """What a policy sees at one evaluation (after second ``t``; the decision acts at ``t + 1``)."""

    t: int
    desired: int
    """Instances asked for so far (in service, starting)."""
    history: History
    state: Any
    """What this policy returned last time (None at the first evaluation)."""

    @property
    def now(self) -> int:
        return self.t + 1

    def window(self, series: list, seconds: int) -> list:
        return series[max(0, self.t + 1 - seconds) : self.t + 1]


Decision = tuple[int, str, Any]
"""(instances wanted, what fired, the policy's new state)."""


class Policy:
    """A scaling policy: ``decide(ctx)`` runs every ``tick_s`` seconds and returns the instances it
    wants, why, and its new state. Pure: it reads ``ctx`` and its own parameters, changes neither."""

    name = "policy"
    tick_s = 10
    instant = False
    """True for the oracle and fixed fleets: changes take effect at once, no start-up, no drain."""
    min_instances = 1
    max_instances = 10**9

    def initial(self) -> int:
        raise NotImplementedError

    def decide(self, ctx: Ctx) -> Decision:
        raise NotImplementedError

    def refused(self, old: Any, new: Any) -> Any:
        """The state to keep when the change ``decide`` asked for was refused (the endpoint was
        Updating): by default as if this evaluation had not happened, so the policy asks again."""
        return old


@dataclass
class Outcome:
    new: int
    reason: str
    refused: bool = False


class Scaler:
    """The one wrapper every policy runs in: its tick, the bounds, its state, refusals.

    ``step`` returns None when the bounded decision keeps the desired count; an :class:`Outcome`
    otherwise. With ``updating`` (the endpoint is applying a previous capacity change) a change is
    refused: the outcome says so and the policy's :meth:`Policy.refused` state is kept."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.state: Any = None
        self.tick_s = policy.tick_s
        self.instant = policy.instant
        self.name = policy.name

    def bound(self, n: int) -> int:
        return max(1, self.policy.min_instances, min(self.policy.max_instances, int(n)))

    def initial(self) -> int:
        return max(1, int(self.policy.initial()))

    def due(self, t: int, total: int) -> bool:
        return (t + 1) % self.tick_s == 0 and t + 1 < total

    def step(self, t: int, desired: int, history: History, *, updating: bool = False) -> Outcome | None:
        old = self.state
        want, why, new_state = self.policy.decide(Ctx(t=t, desired=desired, history=history, state=old))
        want = self.bound(want) if want != desired else desired
        if want == desired:
            self.state = new_state
            return None
        if updating:
            self.state = self.policy.refused(old, new_state)
            return Outcome(want, why, refused=True)
        self.state = new_state
        return Outcome(want, why)


def _alarm(window: tuple, breaching: bool, m: int, n: int) -> tuple[tuple, bool]:
    """A CloudWatch alarm with M of N datapoints: in ALARM while at least M of the last N breach."""
    window = (window + (breaching,))[-n:]
    return window, len(window) == n and sum(window) >= m


# --- the deployed plan, as Application Auto Scaling runs it ------------------------------------


@dataclass(frozen=True)
class AwsState:
    tt: tuple = ()
    surge: tuple = ()
    low: tuple = ()
    tt_until: float = -1.0
    tt_base: int = 0
    surge_until: float = -1.0
    in_until: float = -1.0


class AwsPolicy(Policy):
    """What ``speech.infra.components.autoscaling`` deploys, as Application Auto Scaling runs it.

    Every metric period (10 s) CloudWatch gets one ConcurrentRequestsPerModel datapoint, statistic
    Maximum: the highest per-second mean occupancy of the period in CloudWatch units
    (``to_cloudwatch``). When the gate refused at least one request in the period an instance
    stood at Q_max, so the datapoint is Q_max (in CloudWatch units).

    * target tracking: its hidden scale-out alarm needs ``target_tracking_datapoints`` (3) datapoints
      above the target; then desired = ceil(capacity x metric / target). During the scale-out
      cooldown the capacity the last scale-out added counts toward the next one (the base is the
      capacity before it), so only a larger result acts; after the cooldown the base is the current
      desired count. Scale-in is disabled on this policy, so it never blocks the step scale-in.
    * surge step: alarm >= Q_max for ``datapoints_to_alarm`` periods; +percent of the desired
      count (rounded down, at least 1), at least ``MinAdjustmentMagnitude``; its own cooldown.
    * scale-in step: alarm <= C_scale_min for every one of the window's periods (a period without
      traffic breaches); the spec's step; its own cooldown.
    * several policies at once: scale-out if any wants it, the largest resulting capacity wins.
    * refused (endpoint Updating): the alarms keep their datapoints, no cooldown starts; the alarm
      still in ALARM invokes the policy again next period.
    """

    def __init__(self, numbers: ScalingNumbers, ratio: float, q_max: int, *, name: str = "plan",
                 max_instances: int | None = None, readings: AwsReadings | None = None) -> None:
        self.name = name
        self.s = numbers
        self.ratio = ratio
        self.q_max = q_max
        self.tick_s = numbers.metric_period_s
        self.readings = readings or AwsReadings()
        self.min_instances = numbers.min_instances
        self.max_instances = numbers.max_instances if max_instances is None else max(numbers.min_instances, max_instances)

    @property
    def max_n(self) -> int:
        return self.max_instances

    def initial(self) -> int:
        return self.s.min_instances

    def datapoint(self, ctx: Ctx) -> tuple[float, float]:
        """(the period's ConcurrentRequestsPerModel Maximum in CloudWatch units, its arrivals)."""
        h = ctx.history
        occ = max(ctx.window(h.occupancy, self.tick_s))
        full = sum(ctx.window(h.rejected, self.tick_s)) >= 1.0
        return to_cloudwatch(self.q_max if full else occ, self.ratio), sum(ctx.window(h.arrivals, self.tick_s))

    def decide(self, ctx: Ctx) -> Decision:
        st: AwsState = ctx.state or AwsState()
        s, desired, now = self.s, ctx.desired, ctx.now
        metric, traffic = self.datapoint(ctx)
        k = self.readings.target_tracking_datapoints
        tt, tt_fire = _alarm(st.tt, metric > s.target_value, k, k)
        surge, surge_fire = _alarm(st.surge, metric >= s.saturation_threshold, s.surge_periods, s.surge_periods)
        low, low_fire = _alarm(st.low, traffic <= 0 or metric <= s.scale_in_threshold, s.scale_in_periods, s.scale_in_periods)
        st = replace(st, tt=tt, surge=surge, low=low)
        best, why = desired, ""
        if tt_fire:
            base = st.tt_base if now < st.tt_until else desired
            new = min(self.max_n, math.ceil(base * metric / s.target_value - EPS))
            if new > best:
                best, why = new, "target-tracking"
        if surge_fire and now >= st.surge_until:
            add = desired * s.surge_percent / 100.0
            add = max(1, math.floor(add)) if add > 0 else 0
            new = min(self.max_n, desired + max(add, s.surge_min_added))
            if new > best:
                best, why = new, "surge"
        if best > desired:
            if why == "target-tracking":
                st = replace(st, tt_base=desired if now >= st.tt_until else st.tt_base,
                             tt_until=now + s.scale_out_cooldown_s)
            else:
                st = replace(st, surge_until=now + s.surge_cooldown_s)
            return best, why, st
        floor = floor_at(s, now)
        if desired < floor:  # a scheduled action raised MinCapacity: Application Auto Scaling scales to it
            return floor, "scheduled floor", st
        if low_fire and now >= st.in_until and desired > floor:
            st = replace(st, in_until=now + s.scale_in_cooldown_s)
            return max(floor, s.scale_in_to(desired)), "scale-in", st
        return desired, "", st

    def refused(self, old: Any, new: Any) -> Any:
        old = old or AwsState()
        return replace(old, tt=new.tt, surge=new.surge, low=new.low)


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
    once and gone at once: the oracles."""

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
    """The cost floor at the plan's target utilization (the old oracle): every second exactly
    ceil(arrivals / X(C_scale_max)) instances (at least one), in service at once, gone at once. It
    does not keep the SLO (98.2 % on the reference diurnal day): the bar is its utilization."""
    need = np.maximum(1, np.ceil(np.asarray(arrivals) / x_target_rps - EPS))
    return ScheduledPolicy(name, need, name)


ORACLE_STEP_S = 60
"""The SLO oracle changes its fleet at most once per this many seconds."""
DEFAULT_SLO_SHARE = 0.995
"""Share of requests answered within the SLO the oracle (and ``bench tune``) keeps, by default."""


def answered_within_slo(model: InstanceModel, per_instance_rps: np.ndarray, slo_ms: float) -> np.ndarray:
    """Share of arrivals answered within the SLO by one instance in the stationary chain at that
    arrival rate: (1 - P_block) x P(TTFAB <= SLO | admitted). Rates past the model's grid get its
    last (saturated) value."""
    at_slo = model.ttfab_cdf_at(slo_ms)
    ok = (1.0 - model.block) * at_slo
    lam = model.arrival_rps
    return np.interp(per_instance_rps, lam, ok, left=float(ok[0]), right=float(ok[-1]))


def slo_oracle_need(model: InstanceModel, arrivals: np.ndarray, slo_ms: float, slo_share: float = DEFAULT_SLO_SHARE,
                    step_s: int = ORACLE_STEP_S) -> np.ndarray:
    """Per second, the instances of the SLO oracle: for each ``step_s`` window (clairvoyant), the
    fewest instances n whose window keeps ``slo_share`` of its requests within the SLO when each
    second's arrivals split evenly over n stationary instances (:func:`answered_within_slo`).
    At least one. A window the instance cannot serve at any size (the SLO share above what one
    instance reaches alone) gets the smallest n past which the share stops rising."""
    a = np.asarray(arrivals, dtype=float)
    windows = math.ceil(a.size / step_s)
    pad = np.zeros(windows * step_s)
    pad[: a.size] = a
    w = pad.reshape(windows, step_s)
    total = w.sum(axis=1)
    best_alone = float(answered_within_slo(model, np.array([0.0]), slo_ms)[0])
    goal = min(slo_share, best_alone - EPS)

    def share(n: np.ndarray) -> np.ndarray:
        ok = (w * answered_within_slo(model, w / n[:, None], slo_ms)).sum(axis=1)
        return np.where(total > 0, ok / np.where(total > 0, total, 1.0), 1.0)

    hi = np.maximum(1, np.ceil(w.max(axis=1) / max(model.saturation_rps, MIN_SATURATION_RPS))).astype(float)
    while True:  # grow until every window keeps the share
        short = share(hi) < goal
        if not short.any():
            break
        hi = np.where(short, hi * 2, hi)
    lo = np.zeros(windows)  # share(lo) < goal (or lo = 0)
    while (hi - lo > 1).any():
        mid = np.floor((lo + hi) / 2)
        ok = share(np.maximum(mid, 1)) >= goal
        move = hi - lo > 1
        hi = np.where(move & ok, mid, hi)
        lo = np.where(move & ~ok, mid, lo)
    return np.repeat(np.maximum(hi, 1), step_s)[: a.size].astype(int)


def OraclePolicy(model: InstanceModel, arrivals: np.ndarray, slo_ms: float, slo_share: float = DEFAULT_SLO_SHARE,  # noqa: N802
                 name: str = "oracle") -> ScheduledPolicy:
    """The SLO-meeting oracle: clairvoyant, no start-up, no cooldown, changing at most once a
    minute to :func:`slo_oracle_need`. "x oracle" is measured against it."""
    return ScheduledPolicy(name, slo_oracle_need(model, arrivals, slo_ms, slo_share), name)


# --- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyInputs:
    """What any policy may be built from."""

    plan: PlanArtifact
    qmax: QmaxArtifact
    model: InstanceModel
    arrivals: np.ndarray
    peak_rps: float
    readings: AwsReadings = field(default_factory=AwsReadings)
    slo_share: float = DEFAULT_SLO_SHARE

    @property
    def numbers(self) -> ScalingNumbers:
        return scaling_numbers(self.plan)


def _plan(i: PolicyInputs) -> Policy:
    return AwsPolicy(i.numbers, i.model.cloudwatch_ratio, i.model.q_max, readings=i.readings)


def _reference(i: PolicyInputs) -> Policy:
    s = i.numbers
    return AwsPolicy(s, i.model.cloudwatch_ratio, i.model.q_max, name="reference", max_instances=s.littles_law_instances,
                     readings=i.readings)


def _qps_ewma(i: PolicyInputs) -> Policy:
    levels = [(lv.concurrency, lv.throughput_rps) for lv in i.qmax.ladder]
    return QpsEwmaPolicy(i.numbers, throughput_at(levels, i.model.q_max))


def _fixed_peak(i: PolicyInputs) -> Policy:
    s = i.numbers
    return FixedPolicy("fixed-peak", max(s.min_instances, instances_for(i.peak_rps, s.x_target_rps)))


def _oracle(i: PolicyInputs) -> Policy:
    return OraclePolicy(i.model, i.arrivals, i.plan.inputs.slo_ms, i.slo_share)


def _target_floor(i: PolicyInputs) -> Policy:
    return FloorAtTargetPolicy(i.arrivals, i.numbers.x_target_rps)


POLICIES: dict[str, Callable[[PolicyInputs], Policy]] = {
    "plan": _plan,
    "reference": _reference,
    "pressure": lambda i: PressurePolicy(i.numbers, i.model.q_max),
    "qps-ewma": _qps_ewma,
    "kpa": lambda i: KpaPolicy(i.numbers, i.model.q_max),
    "fixed-peak": _fixed_peak,
    "oracle": _oracle,
    "target-floor": _target_floor,
}
"""Every policy ``bench simulate`` knows, by name, with the factory that builds it."""
POLICY_NAMES = tuple(POLICIES)


def make_policy(name: str, *, plan: PlanArtifact, qmax: QmaxArtifact, model: InstanceModel, arrivals: np.ndarray,
                peak_rps: float, readings: AwsReadings | None = None, slo_share: float = DEFAULT_SLO_SHARE) -> Policy:
    """One of :data:`POLICY_NAMES`, parameterized from the plan and the measurement."""
    if name not in POLICIES:
        raise SimulationInputError(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")
    return POLICIES[name](PolicyInputs(plan=plan, qmax=qmax, model=model, arrivals=arrivals, peak_rps=peak_rps,
                                       readings=readings or AwsReadings(), slo_share=slo_share))
