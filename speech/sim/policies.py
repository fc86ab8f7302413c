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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from speech.errors import SimulationInputError
from speech.plan.formulas import instances_for, to_cloudwatch
from speech.plan.survival import throughput_at
from speech.schema.artifacts import QmaxArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.floor import floor_schedule
from speech.sim.floor_policies import FloorPolicy, PerfectForecastPolicy
from speech.sim.instance import InstanceModel
from speech.sim.kube import KubePolicy, plan_hpa_spec
from speech.sim.names import POLICY_NAMES
from speech.sim.peers import DEFAULT_SLO_SHARE, FixedPolicy, FloorAtTargetPolicy, KpaPolicy, PressurePolicy, QpsEwmaPolicy
from speech.sim.predictive import PredictivePolicy
from speech.sim.scaler import Ctx, Decision, Policy, ScalingNumbers, emergency_size, floor_at, jump_ratio_of, m_of_n_alarm, scaling_numbers

TARGET_TRACKING_HIGH_DATAPOINTS = 3
"""Datapoints (of one metric period each, all breaching) of the scale-out alarm Application Auto
Scaling creates for a target-tracking policy. With the high-resolution SageMaker metric the period
is 10 s, so the hidden alarm fires after 30 s above target (docs/design.md §10.3). AWS does not
document the number: a reading, see :class:`AwsReadings`."""


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
    jump_until: float = -1.0


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
      count (rounded down, at least 1), at least ``MinAdjustmentMagnitude``; its own cooldown. With
      ``surge_statistic`` Average the alarm reads the period's mean occupancy per instance
      (:meth:`average`) against its threshold (``surge_average_share`` x Q_max), so refusals alone
      do not fire it; target tracking's target is then Q_max and never reached.
    * scale-in step: alarm <= C_scale_min for every one of the window's periods (a period without
      traffic breaches); the spec's step; its own cooldown.
    * emergency step (``jump_ratio``, a simulator knob, not deployed): the window's arrivals at
      least ``jump_ratio`` x the window before's -> the instances the new rate needs
      (:func:`speech.sim.scaler.emergency_size`), at least what the surge step adds; its own cooldown, the planning T_total (one per
      start-up).
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

    def average(self, ctx: Ctx) -> float:
        """The period's ConcurrentRequestsPerModel Average in CloudWatch units: the mean of the
        per-second mean occupancy per instance (a refusal does not raise it to Q_max)."""
        occ = ctx.window(ctx.history.occupancy, self.tick_s)
        return to_cloudwatch(sum(occ) / len(occ), self.ratio)

    def decide(self, ctx: Ctx) -> Decision:
        st: AwsState = ctx.state or AwsState()
        s, desired, now = self.s, ctx.desired, ctx.now
        metric, traffic = self.datapoint(ctx)
        k = self.readings.target_tracking_datapoints
        # under an Average surge the target is Q_max, which the gate never lets the metric pass (the
        # deployed value is rounded to 4 decimals, the simulated Q_max is not: compare nothing)
        tt, tt_fire = m_of_n_alarm(st.tt, s.surge_statistic == "Maximum" and metric > s.target_value, k, k)
        surge_metric = metric if s.surge_statistic == "Maximum" else self.average(ctx)
        surge, surge_fire = m_of_n_alarm(st.surge, surge_metric >= s.saturation_threshold, s.surge_periods, s.surge_periods)
        low, low_fire = m_of_n_alarm(st.low, traffic <= 0 or metric <= s.scale_in_threshold, s.scale_in_periods, s.scale_in_periods)
        # AwsState(...) rather than dataclasses.replace: this runs once per metric period of every simulated day
        st = AwsState(tt, surge, low, st.tt_until, st.tt_base, st.surge_until, st.in_until, st.jump_until)
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
        if s.jump_ratio is not None and now >= st.jump_until:
            jump = jump_ratio_of(ctx.history.arrivals, ctx.t, s.jump_window_s)
            if jump >= s.jump_ratio:
                recent = sum(ctx.window(ctx.history.arrivals, s.jump_window_s))
                # never less than the surge step would add: the step's start-up blocks the surge's
                add = desired * s.surge_percent / 100.0
                surge_to = desired + max(max(1, math.floor(add)) if add > 0 else 0, s.surge_min_added)
                new = min(self.max_n, max(surge_to, emergency_size(recent, s.jump_window_s, s.x_target_rps)))
                if new > best:
                    best, why = new, "emergency step"
        if best > desired:
            if why == "emergency step":
                st = replace(st, jump_until=now + s.planning_total_s)
            elif why == "target-tracking":
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
    history: np.ndarray | None = None
    """Arrivals per second before the trace, ending where it starts (what ``predictive`` forecasts
    from besides the trace so far); None: none."""

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


def fixed_peak_size(numbers: ScalingNumbers, peak_rps: float) -> int:
    """The fixed-peak fleet: instances for the busiest minute at the plan's X at the target, never
    below the plan's floor (bench simulate's fixed-peak row; bench tune's fixed-peak floor)."""
    return max(numbers.min_instances, instances_for(peak_rps, numbers.x_target_rps))


def _fixed_peak(i: PolicyInputs) -> Policy:
    return FixedPolicy("fixed-peak", fixed_peak_size(i.numbers, i.peak_rps))


def _floor(i: PolicyInputs) -> Policy:
    return FloorPolicy(i.model, i.arrivals, i.plan.inputs.slo_ms, i.slo_share)


def _perfect_forecast(i: PolicyInputs) -> Policy:
    s = i.numbers
    need = floor_schedule(i.model, i.arrivals, i.plan.inputs.slo_ms, i.slo_share).per_second
    return PerfectForecastPolicy(need, startup_s=i.model.startup_s, removal_updating_s=i.readings.removal_updating_s,
                                 tick_s=s.metric_period_s, min_instances=s.min_instances, max_instances=s.max_instances)


def _predictive(i: PolicyInputs) -> Policy:
    s = i.numbers
    inner = AwsPolicy(s, i.model.cloudwatch_ratio, i.model.q_max, readings=i.readings)
    return PredictivePolicy(inner, i.history, per_instance_rps=s.x_target_rps, buffer_s=s.planning_total_s)


def _target_floor(i: PolicyInputs) -> Policy:
    return FloorAtTargetPolicy(i.arrivals, i.numbers.x_target_rps)


def _hpa_v2(i: PolicyInputs) -> Policy:
    return KubePolicy(plan_hpa_spec(i.plan, i.numbers, "hpa"), i.model)


def _keda(i: PolicyInputs) -> Policy:
    return KubePolicy(plan_hpa_spec(i.plan, i.numbers, "keda"), i.model)


POLICIES: dict[str, Callable[[PolicyInputs], Policy]] = {
    "plan": _plan,
    "reference": _reference,
    "pressure": lambda i: PressurePolicy(i.numbers, i.model.q_max),
    "qps-ewma": _qps_ewma,
    "kpa": lambda i: KpaPolicy(i.numbers, i.model.q_max),
    "fixed-peak": _fixed_peak,
    "perfect-forecast": _perfect_forecast,
    "floor": _floor,
    "target-floor": _target_floor,
    "hpa-v2": _hpa_v2,
    "keda": _keda,
    "predictive": _predictive,
}
"""Every policy ``bench simulate`` knows, by name, with the factory that builds it."""
if tuple(POLICIES) != POLICY_NAMES:  # the light list the help texts read must name exactly these, in this order
    raise RuntimeError(f"speech.sim.names.POLICY_NAMES {POLICY_NAMES} != the policies {tuple(POLICIES)}")


def make_policy(name: str, *, plan: PlanArtifact, qmax: QmaxArtifact, model: InstanceModel, arrivals: np.ndarray,
                peak_rps: float, readings: AwsReadings | None = None, slo_share: float = DEFAULT_SLO_SHARE,
                history: np.ndarray | None = None) -> Policy:
    """One of :data:`POLICY_NAMES`, parameterized from the plan and the measurement (``history``:
    the traffic before the trace, for ``predictive``)."""
    if name not in POLICIES:
        raise SimulationInputError(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")
    return POLICIES[name](PolicyInputs(plan=plan, qmax=qmax, model=model, arrivals=arrivals, peak_rps=peak_rps,
                                       readings=readings or AwsReadings(), slo_share=slo_share, history=history))
