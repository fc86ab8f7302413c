"""The copy scaling spec of an inference component (hosting: components), from its copy plan
(:func:`component_scaling_spec`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from speech.deploy.scaling.spec import (
    AlarmSpec,
    QueueSpec,
    StepPolicySpec,
    TargetSpec,
    TargetTrackingSpec,
    field_rule,
    one_step_policy,
    rule_meta,
    scale_out_tracking,
)
from speech.schema.aws import (
    ALARM_STATISTIC,
    COMPONENT_METRIC,
    COMPONENT_SCALABLE_DIMENSION,
    COMPONENT_SCALE_OUT_METRIC_TYPE,
    INSTANCE_SCALING_ENABLED,
    METRIC_NAMESPACE,
    NO_CAPACITY_METRIC,
    NO_CAPACITY_STATISTIC,
    SERVICE_NAMESPACE,
    SUFFIX_SCALE_IN,
    SUFFIX_SCALE_OUT,
    SUFFIX_WAKE,
    VARIANT,
    component_metric_dimensions,
    component_resource_id,
)
from speech.schema.units import EPS

# --- inference components: the copy scaling spec (hosting: components) ----------------------------


@dataclass(frozen=True)
class InstanceScalingSpec:
    """The variant's ManagedInstanceScaling: SageMaker runs as many instances as the copies need,
    within this range."""

    status: str = field(metadata=rule_meta("instances follow the copies"))
    min_instance_count: int = field(metadata=rule_meta("copy plan: copy floor / copies per instance"))
    max_instance_count: int = field(metadata=rule_meta("copy plan: copies at peak / copies per instance"))


@dataclass(frozen=True)
class ComputeSpec:
    """What each copy reserves (the inference component's ComputeResourceRequirements)."""

    min_memory_required_mb: int = field(metadata=rule_meta("measured host memory x (1 + margin)"))
    accelerator_devices: float | None = field(metadata=rule_meta(
        "whole devices for the measured accelerator memory x (1 + margin)"))
    cpu_cores: float | None = field(metadata=rule_meta("measured CPU cores x (1 + margin), in steps of 0.25"))


@dataclass(frozen=True)
class ComponentScalingSpec:
    """Everything the program deploys for a component-hosted model, every number from the copy plan."""

    endpoint_name: str
    variant: str
    component_name: str
    initial_copies: int
    """Copies the component starts with (then Application Auto Scaling owns the count)."""
    instances: InstanceScalingSpec
    compute: ComputeSpec
    target: TargetSpec
    scale_out: TargetTrackingSpec
    scale_in: StepPolicySpec
    scale_in_alarm: AlarmSpec
    wake: StepPolicySpec | None
    """Scale from zero copies (only when the copy floor is 0)."""
    wake_alarm: AlarmSpec | None
    queue: QueueSpec
    why: dict = field(compare=False, repr=False, default_factory=dict)

    @property
    def resource_id(self) -> str:
        return self.target.resource_id

    def rule_of(self, part: str, name: str) -> str:
        """Why ``part.name`` has its value: this plan's rule, else the field's generic rule."""
        return field_rule(self, part, name)


COMPONENT_PART_KIND = {"instances": "instances", "compute": "compute", "target": "target", "scale_out": "scale_out",
                       "scale_in": "step", "scale_in_alarm": "alarm", "wake": "step", "wake_alarm": "alarm",
                       "queue": "queue"}
"""Each part of :class:`ComponentScalingSpec` by the kind of resource property it describes."""

WAKE_COOLDOWN_MIN_S = 60
"""The documented scale-from-zero step policy's cooldown (SageMaker, "Scale an endpoint to zero instances")."""
WAKE_PERIOD_S = 60
"""NoCapacityInvocationFailures is read per minute, as in the documented alarm."""


def wake_cooldown_s(copy_plan: Any) -> int:
    """Seconds the scale-from-zero step waits after it fired: what the first copy takes to serve.

    From zero copies on zero instances (instance floor 0) that is an instance's measured T_total
    (the copy starts on a new instance); with instances kept, the measured T_copy. Requests keep
    failing until then, so a shorter cooldown would add a copy per cooldown for the whole start
    (the same compounding :func:`surge_cooldown_s` prevents). At least the documented 60 s."""
    t_total = copy_plan.t_total
    if copy_plan.instances.min_instances == 0 and t_total is not None:
        start = t_total.measured_s
    else:
        start = copy_plan.t_copy.measured_s
    return max(WAKE_COOLDOWN_MIN_S, math.ceil(start - EPS))


def copy_scale_in_alarm(copy_plan: Any, component_name: str) -> AlarmSpec:
    """Every copy at or below the per-copy C_scale_min for the whole scale-in window: remove a copy.

    Copy floor 1 or more: missing data breaches (an idle component publishes nothing and shrinks
    to its floor; there is no wake to undo).

    Copy floor 0: the -1 step reaches zero copies, so the last copy must go only when nothing was
    invoked for the whole window, not when one copy is lightly loaded (issue 46: one copy at a fifth
    of Q_max was removed every few minutes, and every request failed until a new one started). The
    alarm is metric math (:data:`speech.deploy.scaling.GUARD_EXPRESSION`): with two or more copies
    serving (Invocations / InvocationsPerCopy) the per-copy concurrency against C_scale_min as above;
    with one copy serving anything, or a request refused for want of a copy (a wake pending), Q_max
    per copy, far above the threshold; with nothing invoked, 0. Missing data breaches, so a range in
    which no metric has a point (idle, whether or not FILL fills an all-empty series) removes the
    copy, never INSUFFICIENT_DATA. The window is the plan's plus the woken copy's start
    (:func:`zero_floor_periods`), so a wake is not undone before the woken copy could serve. Per minute:
    NoCapacityInvocationFailures and the invocation metrics are per minute, metric math needs one
    period, and a minute's Maximum is at or below C_scale_min exactly when every shorter period in it
    is."""
    from speech.plan.formulas import scale_in_evaluation_periods

    period = copy_plan.inputs.metric_period_s
    periods = scale_in_evaluation_periods(period)
    threshold = copy_plan.scaling.scale_in_threshold
    zero = copy_plan.copies.min_copies == 0
    if zero:
        periods = zero_floor_periods(copy_plan)
        period = WAKE_PERIOD_S
    guard = float(copy_plan.q_max_per_copy) if zero else None
    description = f"every copy at or below C_scale_min ({threshold:g}) for {periods} x {period} s: remove one copy"
    if zero:
        description = (f"two or more copies at or below C_scale_min ({threshold:g}), or nothing invoked, for {periods} x "
                       f"{period} s: remove one copy; a minute one copy served, or a request found no copy, reads as "
                       f"Q_max per copy ({guard:g}): the last copy goes only when idle, never while a wake is pending")
    return AlarmSpec(
        name=f"{component_name}{SUFFIX_SCALE_IN}",
        description=description,
        namespace=METRIC_NAMESPACE,
        metric_name=COMPONENT_METRIC,
        dimensions=tuple(sorted(component_metric_dimensions(component_name).items())),
        statistic=ALARM_STATISTIC,
        period_s=period,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        threshold=threshold,
        comparison="LessThanOrEqualToThreshold",
        treat_missing_data="breaching",
        wake_guard=guard,
    )


def zero_floor_periods(copy_plan: Any) -> int:
    """Minutes of the zero-floor scale-in window: the plan's scale-in window in whole minutes plus
    the woken copy's start (:func:`wake_cooldown_s`), so a copy woken by a refused request gets a
    whole window of serving before an idle spell can remove it."""
    from speech.plan.formulas import scale_in_evaluation_periods

    period = copy_plan.inputs.metric_period_s
    window_min = math.ceil(scale_in_evaluation_periods(period) * period / WAKE_PERIOD_S)
    return window_min + math.ceil(wake_cooldown_s(copy_plan) / WAKE_PERIOD_S)


def wake_alarm(component_name: str) -> AlarmSpec:
    """A request found no copy to serve it: SageMaker's documented scale-from-zero alarm on
    NoCapacityInvocationFailures (Sum per minute, one datapoint), at >= 1 rather than the guide's
    > 1 so the first refused request wakes the component, not the second."""
    return AlarmSpec(
        name=f"{component_name}{SUFFIX_WAKE}",
        description="a request found no copy (scaled to zero): add one copy",
        namespace=METRIC_NAMESPACE,
        metric_name=NO_CAPACITY_METRIC,
        dimensions=tuple(sorted(component_metric_dimensions(component_name).items())),
        statistic=NO_CAPACITY_STATISTIC,
        period_s=WAKE_PERIOD_S,
        evaluation_periods=1,
        datapoints_to_alarm=1,
        threshold=1.0,
        comparison="GreaterThanOrEqualToThreshold",
        treat_missing_data="notBreaching",
    )


def component_scaling_spec(copy_plan: Any, endpoint_name: str, component_name: str | None = None,
                           variant: str = VARIANT) -> ComponentScalingSpec:
    """The desired state of a component-hosted model under ``copy_plan`` (a :class:`speech.plan.copies.CopyPlan`).

    Instances: managed instance scaling over the plan's range. Each copy: the plan's compute
    requirements (measured footprint + margin). Copies: target tracking on ConcurrentRequestsPerCopy
    (high resolution) at the per-copy C_scale_max, scale-in disabled there; a -1 copy step behind
    :func:`copy_scale_in_alarm` with the plan's long cooldown; with a copy floor of 0, the
    scale-from-zero step behind :func:`wake_alarm`. The component is named like its endpoint.
    """
    name = component_name or endpoint_name
    s, counts, comp = copy_plan.scaling, copy_plan.copies, copy_plan.compute
    zero = counts.min_copies == 0
    periods_in = copy_scale_in_alarm(copy_plan, name).evaluation_periods
    why = {
        ("instances", "min_instance_count"): f"copy plan: ceil(copy floor {counts.min_copies} / "
                                             f"{copy_plan.packing.copies_per_instance} copies per instance)",
        ("instances", "max_instance_count"): f"copy plan: ceil({counts.max_copies} copies / "
                                             f"{copy_plan.packing.copies_per_instance} per instance)",
        ("compute", "min_memory_required_mb"): f"measured host memory x (1 + margin {copy_plan.inputs.footprint_margin:g})",
        ("compute", "accelerator_devices"): f"accelerator memory x (1 + margin {copy_plan.inputs.footprint_margin:g}) in "
                                            "whole devices",
        ("compute", "cpu_cores"): f"measured CPU cores x (1 + margin {copy_plan.inputs.footprint_margin:g}), rounded up "
                                  "to 0.25",
        ("target", "min_capacity"): "copy floor (0: scale to zero copies)" if zero else "copy plan copy floor",
        ("target", "max_capacity"): "copy plan copies at peak",
        ("scale_out", "metric_type"): "ConcurrentRequestsPerCopy at 10 s, the metric Q_max per copy was measured against",
        ("scale_out", "target_value"): f"deployed per-copy C_scale_max = (1-h) x Q_max per copy {copy_plan.q_max_per_copy} "
                                       "x CloudWatch ratio",
        ("scale_out", "scale_out_cooldown_s"): "copy plan scale-out cooldown clamp(T_copy/2, 10, 30) s",
        ("scale_out", "scale_in_cooldown_s"): "copy plan scale-in cooldown max(300, 3 x planning T_copy) s",
        ("scale_in", "steps"): "one step of -1 copy below the per-copy C_scale_min",
        ("scale_in", "cooldown_s"): "copy plan scale-in cooldown max(300, 3 x planning T_copy) s",
        ("scale_in_alarm", "threshold"): f"deployed per-copy C_scale_min = (1-2h) x Q_max per copy {copy_plan.q_max_per_copy}",
        ("scale_in_alarm", "evaluation_periods"): (f"scale-in window in minutes + the woken copy's start = {periods_in} "
                                                   "minutes" if zero else
                                                   f"scale-in window max(3, ceil(300 s / period)) periods = {periods_in} "
                                                   f"periods of {copy_scale_in_alarm(copy_plan, name).period_s} s"),
        ("scale_in_alarm", "datapoints_to_alarm"): f"every one of the {periods_in} periods must breach",
        ("scale_in_alarm", "treat_missing_data"): ("a range without any point is idle: breaching (never "
                                                   "INSUFFICIENT_DATA, whether or not FILL fills an empty series)"
                                                   if zero else
                                                   "an idle component publishes nothing; it shrinks to its floor"),
        ("scale_in_alarm", "wake_guard"): (f"a minute one copy served, or with a request that found no copy, reads as "
                                           f"Q_max per copy {copy_plan.q_max_per_copy}: the last copy goes only when "
                                           "nothing was invoked, and not while a wake is pending"
                                           if zero else "copy floor 1 or more: no wake to guard"),
        ("scale_in_alarm", "period_s"): ("per minute, the period of NoCapacityInvocationFailures" if zero
                                         else "plan metric period (high-resolution)"),
        ("wake", "cooldown_s"): "max(60 s, the measured start of the first copy: T_total from zero instances, else T_copy)",
        ("wake", "steps"): "one copy when a request finds none",
        ("wake_alarm", "threshold"): "the first request that found no copy",
        ("queue", "max_depth"): f"each copy rejects above Q_max per copy {copy_plan.q_max_per_copy}",
    }
    return ComponentScalingSpec(
        endpoint_name=endpoint_name,
        variant=variant,
        component_name=name,
        initial_copies=max(1, counts.min_copies),
        instances=InstanceScalingSpec(
            status=INSTANCE_SCALING_ENABLED,
            min_instance_count=copy_plan.instances.min_instances,
            max_instance_count=copy_plan.instances.max_instances,
        ),
        compute=ComputeSpec(
            min_memory_required_mb=comp.min_memory_required_in_mb,
            accelerator_devices=comp.number_of_accelerator_devices_required,
            cpu_cores=comp.number_of_cpu_cores_required,
        ),
        target=TargetSpec(
            resource_id=component_resource_id(name),
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=COMPONENT_SCALABLE_DIMENSION,
            min_capacity=counts.min_copies,
            max_capacity=counts.max_copies,
        ),
        scale_out=scale_out_tracking(f"{name}{SUFFIX_SCALE_OUT}", COMPONENT_SCALE_OUT_METRIC_TYPE, s.target_value,
                                     s.scale_out_cooldown_s, s.scale_in_cooldown_s),
        scale_in=one_step_policy(f"{name}{SUFFIX_SCALE_IN}", -1, cooldown_s=s.scale_in_cooldown_s, aggregation=ALARM_STATISTIC),
        scale_in_alarm=copy_scale_in_alarm(copy_plan, name),
        wake=one_step_policy(f"{name}{SUFFIX_WAKE}", 1, cooldown_s=wake_cooldown_s(copy_plan), aggregation=ALARM_STATISTIC)
        if zero else None,
        wake_alarm=wake_alarm(name) if zero else None,
        queue=QueueSpec(max_depth=copy_plan.queue_max_depth),
        why=why,
    )
