"""What a policy sees and the one wrapper that runs it: the plan's scaling numbers, the history, the
context, the Policy protocol and the Scaler (bounds, tick, state) — in Ray Serve's style."""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import Any

from speech.deploy.scaling import cron_minutes, scaling_spec
from speech.errors import SimulationInputError
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS

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
    """Scheduled floors (cron schedule, time zone, min capacity), by time of day (of the week)."""
    jump_ratio: float | None = None
    """The emergency step (:func:`emergency_size`): when a window's arrivals reach this many times
    the window before's, the fleet goes at once to the instances the new rate needs. The QPS
    design's rule is 3.0 (more than 200 % up in one window); None: no emergency step."""
    jump_window_s: int = 60
    """The emergency step's window, s (its rate is arrivals over this many seconds)."""
    surge_statistic: str = "Maximum"
    """The surge alarm's statistic: ``Maximum`` (an instance at Q_max) or ``Average`` (the
    instances' mean over the period, PlanInputs.surge_average_share)."""

    def scale_in_to(self, desired: int) -> int:
        """Desired count after one scale-in step from ``desired``, as Application Auto Scaling
        computes it: a percentage of the count rounded toward zero, at least MinAdjustmentMagnitude,
        never below the floor."""
        if self.scale_in_percent is None:
            return max(self.min_instances, desired + self.scale_in_step)
        remove = max(self.scale_in_min_removed, math.floor(desired * -self.scale_in_percent / 100.0 + EPS))
        return max(self.min_instances, desired - remove)


def jump_ratio_of(arrivals: list, t: int, window_s: int) -> float:
    """Arrivals in the ``window_s`` seconds up to second ``t`` over those in the window before (0
    before two whole windows have passed or when the earlier one is empty)."""
    if t + 1 < 2 * window_s:
        return 0.0
    before = sum(arrivals[t + 1 - 2 * window_s : t + 1 - window_s])
    return sum(arrivals[t + 1 - window_s : t + 1]) / before if before > 0 else 0.0


def emergency_size(arrivals_in_window: float, window_s: int, x_target_rps: float) -> int:
    """The emergency step's fleet: the instances the window's rate (requests/s) needs at the plan's
    per-instance throughput at the target (``x_target_rps``), rounded up. Sized from the rate after
    the jump, not from the occupancy metric: an instance's occupancy stops at Q_max however large
    the jump, so target tracking and the surge step see at most Q_max / target of it per decision,
    while the new instances take a planning T_total to serve (the step's cooldown)."""
    return max(1, math.ceil(arrivals_in_window / window_s / x_target_rps - EPS))


def floor_at(numbers: ScalingNumbers, t_s: float) -> int:
    """The scalable target's minimum at ``t_s`` seconds into the trace under the scheduled floors
    (daily ``cron(M H * * ? *)``: the trace starts at 00:00 of the schedule's time zone; weekly
    ``cron(M H ? * MON *)``: at Monday 00:00): the latest entry at or before that time of the day
    (of the week), the period's last entry before the first, never below the plan's floor."""
    if not numbers.floors:
        return numbers.min_instances
    entries, period = floor_entries(numbers.floors)
    minute = int(t_s // 60) % period
    past = bisect.bisect_right(entries, (minute, math.inf))  # entries at or before this minute
    return max(numbers.min_instances, entries[past - 1][1] if past else entries[-1][1])


@functools.lru_cache(maxsize=256)
def floor_entries(floors: tuple[tuple[str, str, int], ...]) -> tuple[tuple[tuple[int, int], ...], int]:
    """The scheduled floors as (minute of the day or week, instances), sorted, and the period in
    minutes they repeat after (1440 or 10080); parsed once per schedule (the policy asks every metric
    period of every simulated day)."""
    try:
        minutes, period = cron_minutes([cron for cron, _tz, _n in floors])
    except ValueError as err:
        raise SimulationInputError(f"scheduled floors: {err}") from None
    return tuple(sorted(zip(minutes, (n for _c, _tz, n in floors), strict=True))), period


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
        surge_statistic=spec.surge_alarm.statistic,
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
    """True for the floor and fixed fleets: changes take effect at once, no start-up, no drain."""
    min_instances = 1
    max_instances = 10**9
    one_change_at_a_time = True
    """False where the platform takes a new count at any time (a Kubernetes Deployment): the
    fleet then never refuses a change as SageMaker's Updating endpoint does."""

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


def m_of_n_alarm(window: tuple, breaching: bool, m: int, n: int) -> tuple[tuple, bool]:
    """A CloudWatch alarm with M of N datapoints: in ALARM while at least M of the last N breach."""
    window = (window + (breaching,))[-n:]
    return window, len(window) == n and sum(window) >= m


