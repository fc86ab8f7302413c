"""The scaling spec: the complete desired scaling state of one endpoint variant, from a plan
(docs/design.md §5).

Pure (no pulumi, no boto3, no I/O). Four readers use it and nothing else:

- the program (:mod:`speech.components.autoscaling`) renders it into resources;
- the policy pack (:mod:`policy.rules`) normalizes Pulumi resource properties into the same shape;
- ``bench drift`` / ``bench validate`` (:mod:`bench.scaling_check`) normalize AWS ``Describe*``
  output into the same shape;
- the simulator (:func:`speech.simulate.scaling_numbers`) reads its numbers from it.

The pack and bench compare with :func:`diff` (one tolerance, :data:`REL_TOL`) and render its
:class:`Difference` values into their own messages. Adding a policy or changing a threshold is an
edit here only. The AWS names and constants (metric, namespaces, dimensions, variant, resource id,
policy-name suffixes) are defined here once.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .artifacts import PlanArtifact

if TYPE_CHECKING:
    from .batch import BatchPlan

# --- AWS names: the one place ------------------------------------------------------------------

VARIANT = "AllTraffic"
"""The one production variant each endpoint has."""
SERVICE_NAMESPACE = "sagemaker"
"""Application Auto Scaling service namespace of a SageMaker variant."""
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
METRIC_NAMESPACE = "AWS/SageMaker"
METRIC = "ConcurrentRequestsPerModel"
"""The CloudWatch metric Q_max is measured against (per instance, in flight)."""
ALARM_STATISTIC = "Maximum"
"""Per-instance peak concurrency, as measured; also the step policies' aggregation."""
SCALE_OUT_METRIC_TYPE = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
"""Target tracking's metric: ConcurrentRequestsPerModel at its 10 s resolution. Only this predefined
type gives Application Auto Scaling the 10 s period the plan's reaction bound assumes (a
customized metric specification is read at 60 s, which would add minutes to T_total)."""
TARGET_TRACKING = "TargetTrackingScaling"
STEP_SCALING = "StepScaling"

SUFFIX_SCALE_OUT = "-scale-out"
SUFFIX_SCALE_IN = "-scale-in"
SUFFIX_SURGE = "-surge"
POLICY_SUFFIXES = (SUFFIX_SCALE_OUT, SUFFIX_SCALE_IN, SUFFIX_SURGE)
"""Policy (and alarm) names are ``<endpoint><suffix>``: fixed, so a reader finds them by name."""

SCALE_IN_INSTANCES = 1
"""Instances one scale-in step removes: one at a time, each after a sustained low window."""

RESOURCE_ID_RE = re.compile(r"^endpoint/(?P<endpoint>[^/]+)/variant/(?P<variant>[^/]+)$")


def resource_id(endpoint_name: str, variant: str = VARIANT) -> str:
    """Application Auto Scaling's id of a SageMaker variant."""
    return f"endpoint/{endpoint_name}/variant/{variant}"


def parse_resource_id(value: Any) -> tuple[str, str] | None:
    """(endpoint name, variant) of ``endpoint/<name>/variant/<variant>``, else None."""
    if not isinstance(value, str):
        return None
    m = RESOURCE_ID_RE.match(value)
    return (m.group("endpoint"), m.group("variant")) if m else None


def metric_dimensions(endpoint_name: str, variant: str = VARIANT) -> dict[str, str]:
    """CloudWatch dimensions of the variant's ConcurrentRequestsPerModel."""
    return {"EndpointName": endpoint_name, "VariantName": variant}


def policy_role(policy_name: str) -> str | None:
    """Which planned policy a name belongs to (its suffix), or None for an unplanned one."""
    return next((s for s in POLICY_SUFFIXES if policy_name.endswith(s)), None)


# --- the spec ----------------------------------------------------------------------------------


def _meta(rule: str) -> dict:
    return {"rule": rule}


IDENTITY = dict(compare=False)
"""Names and descriptions identify a resource (the readers find it by them); :func:`diff` skips
them."""


@dataclass(frozen=True)
class TargetSpec:
    """The scalable target."""

    resource_id: str = field(metadata=_meta("endpoint/<endpoint>/variant/<variant>"))
    service_namespace: str = field(metadata=_meta("a SageMaker variant"))
    scalable_dimension: str = field(metadata=_meta("a SageMaker variant's instance count"))
    min_capacity: int = field(metadata=_meta("plan fleet floor"))
    max_capacity: int = field(metadata=_meta("plan fleet size for peak traffic"))


@dataclass(frozen=True)
class TargetTrackingSpec:
    """Scale-out: target tracking on ConcurrentRequestsPerModel at the deployed C_scale_max."""

    name: str = field(**IDENTITY)
    policy_type: str = field(metadata=_meta("scale-out tracks a target"))
    metric_type: str = field(metadata=_meta(
        "ConcurrentRequestsPerModel at 10 s, the metric Q_max was measured against and the period the plan's "
        "reaction bound assumes"))
    target_value: float = field(metadata=_meta("deployed C_scale_max = (1-h) x Q_max x CloudWatch ratio"))
    scale_out_cooldown_s: int = field(metadata=_meta("plan scale-out cooldown clamp(T_total/2, 10, 30) s"))
    scale_in_cooldown_s: int = field(metadata=_meta(
        "plan scale-in cooldown max(300, 3 x planning T_total) s (inert while scale-in is disabled)"))
    disable_scale_in: bool = field(metadata=_meta(
        "scale-in belongs to the alarm-driven step policy at C_scale_min, not to target tracking"))


@dataclass(frozen=True)
class StepSpec:
    """One step adjustment; bounds relative to the alarm threshold (None: unbounded)."""

    scaling_adjustment: int
    lower_bound: float | None = None
    upper_bound: float | None = None


@dataclass(frozen=True)
class StepPolicySpec:
    """A step scaling policy fired by one alarm."""

    name: str = field(**IDENTITY)
    policy_type: str = field(metadata=_meta("an alarm fires a step"))
    adjustment_type: str = field(metadata=_meta("how a step changes capacity"))
    steps: tuple[StepSpec, ...] = field(metadata=_meta("the planned step"))
    min_adjustment_magnitude: int | None = field(metadata=_meta("the smallest step"))
    cooldown_s: int = field(metadata=_meta("the plan's cooldown for this direction"))
    aggregation: str = field(metadata=_meta("per-instance peak concurrency, as measured"))


@dataclass(frozen=True)
class AlarmSpec:
    """A CloudWatch alarm on the variant's ConcurrentRequestsPerModel that fires a step policy."""

    name: str = field(**IDENTITY)
    description: str = field(**IDENTITY)
    namespace: str = field(metadata=_meta("SageMaker's endpoint metrics"))
    metric_name: str = field(metadata=_meta("the metric Q_max was measured against"))
    dimensions: tuple[tuple[str, str], ...] = field(metadata=_meta("this endpoint's variant"))
    statistic: str = field(metadata=_meta("per-instance peak concurrency, as measured"))
    period_s: int = field(metadata=_meta("plan metric period (high-resolution)"))
    evaluation_periods: int = field(metadata=_meta("the plan's window"))
    datapoints_to_alarm: int = field(metadata=_meta("every period of the window must breach"))
    threshold: float = field(metadata=_meta("the plan's threshold"))
    comparison: str = field(metadata=_meta("the side of the threshold that fires"))
    treat_missing_data: str = field(metadata=_meta("what a period without datapoints means"))


@dataclass(frozen=True)
class QueueSpec:
    """The container's admission limit."""

    max_depth: int = field(metadata=_meta("the container must reject above Q_max, the concurrency the SLO was "
                                          "measured at"))


@dataclass(frozen=True)
class ScalingSpec:
    """Everything the program deploys for one scaled variant, every number from the plan."""

    endpoint_name: str
    variant: str
    target: TargetSpec
    scale_out: TargetTrackingSpec
    scale_in: StepPolicySpec
    scale_in_alarm: AlarmSpec
    surge: StepPolicySpec
    surge_alarm: AlarmSpec
    queue: QueueSpec
    why: dict = field(compare=False, repr=False, default_factory=dict)
    """(part, field) -> the rule with this plan's numbers, for messages (:func:`rule_of`)."""

    @property
    def resource_id(self) -> str:
        return self.target.resource_id

    def rule_of(self, part: str, name: str) -> str:
        """Why ``part.name`` has its value: this plan's rule, else the field's generic rule."""
        return _rule_of(self, part, name)


def _rule_of(spec: Any, part: str, name: str) -> str:
    top = name.split(".")[0]  # steps.0.scaling_adjustment: the rule of the steps
    for key in ((part, name), (part, top)):
        if key in spec.why:
            return spec.why[key]
    f = {f.name: f for f in dataclasses.fields(getattr(spec, part))}.get(top)
    return f.metadata.get("rule", "") if f is not None else ""


PART_KIND = {"target": "target", "scale_out": "scale_out", "scale_in": "step", "surge": "step",
             "scale_in_alarm": "alarm", "surge_alarm": "alarm", "queue": "queue",
             "backlog": "backlog", "wake": "step", "wake_alarm": "alarm", "client": "client"}
"""Each part of :class:`ScalingSpec` by the kind of resource it describes (readers map kinds to
their own property names)."""


@dataclass(frozen=True)
class SurgeStep:
    percent: int
    """PercentChangeInCapacity when an instance reaches Q_max."""
    min_instances_added: int
    """MinAdjustmentMagnitude: never fewer than this many at once."""


def surge_adjustment(plan: PlanArtifact) -> SurgeStep:
    """Instances at Q_max reject the rest (queue_max_depth), so true demand is unknown: assume the
    planned surge is still coming on top and grow by surge_ratio x Q_max / C_scale_max, the factor
    that brings saturated instances back to C_scale_max; at least what the smallest safe fleet
    would add, so a small fleet adds several instances, not one."""
    factor = plan.inputs.surge_ratio * plan.q_max / plan.thresholds.c_scale_max
    grow = factor - 1.0
    return SurgeStep(
        percent=max(1, math.ceil(100 * grow - 1e-9)),
        min_instances_added=max(2, math.ceil(plan.fleet.min_safe_instances * grow - 1e-9)),
    )


def surge_cooldown_s(plan: PlanArtifact) -> int:
    """Seconds the surge policy waits after it fired: at least the measured T_total (whole seconds).

    The instances a surge adds serve only after the measured scale-out time. Until then the
    saturated instances keep the surge alarm in ALARM, and Application Auto Scaling applies a step
    policy again for every breach once its cooldown has ended, each time as a percentage of the
    desired count already raised. A cooldown shorter than the start-up (the scale-out cooldown,
    10-30 s) would so compound the surge to max_instances before the first new instance serves.
    Within the cooldown a repeated breach adds only what a larger step would add beyond the
    capacity already added, so one surge per start-up is what this buys; target tracking keeps
    adding in between at its own, proportional pace."""
    return max(plan.cooldowns.scale_out_s, math.ceil(plan.t_total.measured_s - 1e-9))


def scale_in_alarm(plan: PlanArtifact, endpoint_name: str, variant: str) -> AlarmSpec:
    """Every instance at or below C_scale_min for the whole scale-in window (minutes): remove one.
    Missing data breaches: an idle variant publishes nothing, and an idle fleet should shrink to
    its floor."""
    a, t = plan.alarms, plan.thresholds
    return AlarmSpec(
        name=f"{endpoint_name}{SUFFIX_SCALE_IN}",
        description=f"every instance at or below C_scale_min ({t.scale_in_threshold:g}) for "
        f"{a.scale_in_evaluation_periods} x {a.metric_period_s} s: remove "
        + ("one instance" if SCALE_IN_INSTANCES == 1 else f"{SCALE_IN_INSTANCES} instances"),
        namespace=METRIC_NAMESPACE,
        metric_name=METRIC,
        dimensions=tuple(sorted(metric_dimensions(endpoint_name, variant).items())),
        statistic=ALARM_STATISTIC,
        period_s=a.metric_period_s,
        evaluation_periods=a.scale_in_evaluation_periods,
        datapoints_to_alarm=a.scale_in_evaluation_periods,
        threshold=t.scale_in_threshold,
        comparison="LessThanOrEqualToThreshold",
        treat_missing_data="breaching",
    )


def surge_alarm(plan: PlanArtifact, endpoint_name: str, variant: str, step: SurgeStep) -> AlarmSpec:
    """An instance reached Q_max (it already rejects): the emergency, fired after the plan's
    datapoints to alarm. Missing data does not breach: nothing published is no surge."""
    a = plan.alarms
    return AlarmSpec(
        name=f"{endpoint_name}{SUFFIX_SURGE}",
        description=f"an instance reached Q_max ({a.saturation_concurrency:g}): add "
        f"{step.percent}% (at least {step.min_instances_added}) at once",
        namespace=METRIC_NAMESPACE,
        metric_name=METRIC,
        dimensions=tuple(sorted(metric_dimensions(endpoint_name, variant).items())),
        statistic=ALARM_STATISTIC,
        period_s=a.metric_period_s,
        evaluation_periods=a.datapoints_to_alarm,
        datapoints_to_alarm=a.datapoints_to_alarm,
        threshold=a.saturation_concurrency,
        comparison="GreaterThanOrEqualToThreshold",
        treat_missing_data="notBreaching",
    )


def scaling_spec(plan: PlanArtifact, endpoint_name: str, variant: str = VARIANT) -> ScalingSpec:
    """The desired scaling state of ``endpoint_name``/``variant`` under ``plan``.

    Scale-out: target tracking at ``thresholds.scaling_target_value``, scale-in disabled there.
    Scale-in: a -1 step behind :func:`scale_in_alarm`, with the long cooldown. Surge: a
    percentage step sized by :func:`surge_adjustment` behind :func:`surge_alarm`, with
    :func:`surge_cooldown_s`. Queue depth: the plan's ``queue_max_depth``.
    """
    t, c, a = plan.thresholds, plan.cooldowns, plan.alarms
    step = surge_adjustment(plan)
    period = a.metric_period_s
    sizing = (f"speech.scaling.surge_adjustment: surge_ratio {plan.inputs.surge_ratio:g} x Q_max {plan.q_max} / "
              f"C_scale_max {t.c_scale_max:g}")
    periods_in = (f"plan scale-in window max(3, ceil(300 s / {period} s)) periods: concurrency must stay low for "
                  "minutes before an instance goes")
    periods_surge = (f"plan datapoints to alarm {a.datapoints_to_alarm}, part of the reaction bound in the planning "
                     "T_total")
    c_min = f"deployed C_scale_min = (1-2h) x Q_max {plan.q_max} x CloudWatch ratio"
    why = {
        ("scale_out", "target_value"): f"deployed C_scale_max = (1-h) x Q_max {plan.q_max} x CloudWatch ratio",
        ("scale_in", "steps"): f"one step of -{SCALE_IN_INSTANCES} instance(s) below C_scale_min",
        ("scale_in", "adjustment_type"): "scale-in removes whole instances",
        ("scale_in", "cooldown_s"): "plan scale-in cooldown max(300, 3 x planning T_total) s",
        ("surge", "adjustment_type"): "the surge grows the fleet by a fraction of its size",
        ("surge", "steps"): f"+{step.percent}% from {sizing}",
        ("surge", "min_adjustment_magnitude"): f"at least what the smallest safe fleet "
                                               f"({plan.fleet.min_safe_instances}) would add, from {sizing}",
        ("surge", "cooldown_s"): f"max(scale-out cooldown, measured T_total {plan.t_total.measured_s:g} s): one surge "
                                 "per start-up, not one per cooldown while the new instances start",
        ("scale_in_alarm", "threshold"): c_min,
        ("scale_in_alarm", "comparison"): "an instance at exactly C_scale_min is already below the scale-out band",
        ("scale_in_alarm", "evaluation_periods"): periods_in,
        ("scale_in_alarm", "datapoints_to_alarm"): f"every one of the {a.scale_in_evaluation_periods} periods must "
                                                   f"breach ({periods_in})",
        ("scale_in_alarm", "treat_missing_data"): "an idle variant publishes nothing; an idle fleet shrinks to its floor",
        ("surge_alarm", "threshold"): f"deployed Q_max = {plan.q_max} x CloudWatch ratio (saturation)",
        ("surge_alarm", "comparison"): "an instance at Q_max already rejects (queue_max_depth), so reaching it is "
                                       "the emergency",
        ("surge_alarm", "evaluation_periods"): periods_surge,
        ("surge_alarm", "datapoints_to_alarm"): f"every one of the {a.datapoints_to_alarm} periods must breach "
                                                f"({periods_surge})",
        ("surge_alarm", "treat_missing_data"): "no datapoints is no surge",
        ("queue", "max_depth"): f"the container must reject above Q_max {plan.q_max}, the concurrency the SLO was "
                                "measured at",
    }
    for alarm in ("scale_in_alarm", "surge_alarm"):
        why[(alarm, "period_s")] = f"plan metric period (high-resolution {period} s)"
    return ScalingSpec(
        endpoint_name=endpoint_name,
        variant=variant,
        target=TargetSpec(
            resource_id=resource_id(endpoint_name, variant),
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=plan.fleet.min_instances,
            max_capacity=plan.fleet.max_instances,
        ),
        scale_out=TargetTrackingSpec(
            name=f"{endpoint_name}{SUFFIX_SCALE_OUT}",
            policy_type=TARGET_TRACKING,
            metric_type=SCALE_OUT_METRIC_TYPE,
            target_value=t.scaling_target_value,
            scale_out_cooldown_s=c.scale_out_s,
            scale_in_cooldown_s=c.scale_in_s,
            disable_scale_in=True,
        ),
        scale_in=StepPolicySpec(
            name=f"{endpoint_name}{SUFFIX_SCALE_IN}",
            policy_type=STEP_SCALING,
            adjustment_type="ChangeInCapacity",
            steps=(StepSpec(scaling_adjustment=-SCALE_IN_INSTANCES, upper_bound=0.0),),
            min_adjustment_magnitude=None,
            cooldown_s=c.scale_in_s,
            aggregation=ALARM_STATISTIC,
        ),
        scale_in_alarm=scale_in_alarm(plan, endpoint_name, variant),
        surge=StepPolicySpec(
            name=f"{endpoint_name}{SUFFIX_SURGE}",
            policy_type=STEP_SCALING,
            adjustment_type="PercentChangeInCapacity",
            steps=(StepSpec(scaling_adjustment=step.percent, lower_bound=0.0),),
            min_adjustment_magnitude=step.min_instances_added,
            cooldown_s=surge_cooldown_s(plan),
            aggregation=ALARM_STATISTIC,
        ),
        surge_alarm=surge_alarm(plan, endpoint_name, variant, step),
        queue=QueueSpec(max_depth=plan.queue_max_depth),
        why=why,
    )


# --- batch routes: an asynchronous endpoint scaled on its backlog (docs/design.md §3.8) ----------

BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"
"""Asynchronous endpoint metric: requests queued or in process, divided by the instance count."""
WAKE_METRIC = "HasBacklogWithoutCapacity"
"""Asynchronous endpoint metric: 1 while requests wait and the endpoint has no instance."""
ASYNC_STATISTIC = "Average"
"""Statistic of the backlog metrics and aggregation of the wake step (the AWS pattern)."""
SUFFIX_BACKLOG = "-backlog"
SUFFIX_WAKE = "-wake"
BATCH_POLICY_SUFFIXES = (SUFFIX_BACKLOG, SUFFIX_WAKE)
REALTIME_METRICS = (METRIC, "InvocationsPerInstance")
"""Real-time load metrics: an asynchronous endpoint must not scale on them (its requests wait in
its own queue, and these count only what the container already holds)."""


def async_metric_dimensions(endpoint_name: str) -> dict[str, str]:
    """The asynchronous endpoint metrics carry the endpoint only, no variant."""
    return {"EndpointName": endpoint_name}


@dataclass(frozen=True)
class BacklogTrackingSpec:
    """Target tracking on ApproximateBacklogSizePerInstance (a customized metric specification);
    it scales in too, down to the target's minimum of zero."""

    name: str = field(**IDENTITY)
    policy_type: str = field(metadata=_meta("the backlog per instance tracks a target"))
    metric_name: str = field(metadata=_meta("backlog per instance of the asynchronous endpoint"))
    namespace: str = field(metadata=_meta("SageMaker's endpoint metrics"))
    dimensions: tuple[tuple[str, str], ...] = field(metadata=_meta("this endpoint (async metrics have no variant)"))
    statistic: str = field(metadata=_meta("average backlog per instance, the AWS pattern"))
    target_value: float = field(metadata=_meta("batch plan backlog target floor(X(Q_max) x (max_delay_s - cold start))"))
    scale_out_cooldown_s: int = field(metadata=_meta("batch plan scale-out cooldown max(60, ceil(T_total)) s"))
    scale_in_cooldown_s: int = field(metadata=_meta("batch plan scale-in cooldown max(300, 3 x cold start) s"))


@dataclass(frozen=True)
class AsyncClientSpec:
    """How SageMaker feeds one instance of the asynchronous endpoint."""

    max_concurrent_invocations_per_instance: int = field(metadata=_meta(
        "measured Q_max: more in flight and each request is served slower than measured"))


@dataclass(frozen=True)
class BatchScalingSpec:
    """Everything the program deploys to scale one asynchronous endpoint, every number from the batch plan."""

    endpoint_name: str
    variant: str
    target: TargetSpec
    backlog: BacklogTrackingSpec
    wake: StepPolicySpec
    wake_alarm: AlarmSpec
    client: AsyncClientSpec
    why: dict = field(compare=False, repr=False, default_factory=dict)

    @property
    def resource_id(self) -> str:
        return self.target.resource_id

    def rule_of(self, part: str, name: str) -> str:
        return _rule_of(self, part, name)


def batch_scaling_spec(plan: BatchPlan, endpoint_name: str, variant: str = VARIANT) -> BatchScalingSpec:
    """The desired scaling state of an asynchronous endpoint under a batch plan.

    Target min 0, max the plan's. Backlog: target tracking on ApproximateBacklogSizePerInstance at
    the plan's backlog target (scale-in enabled: an empty queue takes the fleet to zero). Wake:
    HasBacklogWithoutCapacity >= 1 (Average, 60 s) for 2 of 2 periods fires a +1 ChangeInCapacity
    step, the one way up from zero instances (target tracking has no per-instance value at zero).
    """
    dims = tuple(sorted(async_metric_dimensions(endpoint_name).items()))
    w = plan.wake
    why = {
        ("target", "min_capacity"): "an asynchronous endpoint scales to zero when idle",
        ("target", "max_capacity"): f"batch plan ceil(peak {plan.inputs.peak_rps:g} rps / X(Q_max) "
                                    f"{plan.throughput_per_instance_rps:g} rps), capped by max_instances",
        ("backlog", "target_value"): f"floor(X(Q_max) {plan.throughput_per_instance_rps:g} rps x (max_delay_s "
                                     f"{plan.inputs.max_delay_s:g} - cold start {plan.cold_start.total_s:g} s))",
        ("wake_alarm", "threshold"): "HasBacklogWithoutCapacity is 1 while requests wait with no instance",
        ("wake_alarm", "evaluation_periods"): f"{w.datapoints_to_alarm} one-minute periods, part of the cold start",
        ("wake_alarm", "treat_missing_data"): "the AWS pattern: a gap in the metric neither wakes nor clears",
        ("wake", "steps"): f"+{w.instances_added} instance from zero; backlog tracking takes over from there",
        ("wake", "cooldown_s"): "batch plan scale-out cooldown: one wake per start-up",
        ("client", "max_concurrent_invocations_per_instance"): f"measured Q_max {plan.q_max}",
    }
    return BatchScalingSpec(
        endpoint_name=endpoint_name,
        variant=variant,
        target=TargetSpec(
            resource_id=resource_id(endpoint_name, variant),
            service_namespace=SERVICE_NAMESPACE,
            scalable_dimension=SCALABLE_DIMENSION,
            min_capacity=plan.min_instances,
            max_capacity=plan.max_instances,
        ),
        backlog=BacklogTrackingSpec(
            name=f"{endpoint_name}{SUFFIX_BACKLOG}",
            policy_type=TARGET_TRACKING,
            metric_name=BACKLOG_METRIC,
            namespace=METRIC_NAMESPACE,
            dimensions=dims,
            statistic=ASYNC_STATISTIC,
            target_value=float(plan.backlog_target_per_instance),
            scale_out_cooldown_s=plan.cooldowns.scale_out_s,
            scale_in_cooldown_s=plan.cooldowns.scale_in_s,
        ),
        wake=StepPolicySpec(
            name=f"{endpoint_name}{SUFFIX_WAKE}",
            policy_type=STEP_SCALING,
            adjustment_type="ChangeInCapacity",
            steps=(StepSpec(scaling_adjustment=w.instances_added, lower_bound=0.0),),
            min_adjustment_magnitude=None,
            cooldown_s=w.cooldown_s,
            aggregation=ASYNC_STATISTIC,
        ),
        wake_alarm=AlarmSpec(
            name=f"{endpoint_name}{SUFFIX_WAKE}",
            description=f"requests wait with no instance for {w.datapoints_to_alarm} x {w.period_s} s: "
            f"start {w.instances_added}",
            namespace=METRIC_NAMESPACE,
            metric_name=WAKE_METRIC,
            dimensions=dims,
            statistic=ASYNC_STATISTIC,
            period_s=w.period_s,
            evaluation_periods=w.datapoints_to_alarm,
            datapoints_to_alarm=w.datapoints_to_alarm,
            threshold=w.threshold,
            comparison="GreaterThanOrEqualToThreshold",
            treat_missing_data="missing",
        ),
        client=AsyncClientSpec(max_concurrent_invocations_per_instance=plan.max_concurrent_invocations_per_instance),
        why=why,
    )


# --- the one comparison ------------------------------------------------------------------------

REL_TOL = 1e-6
"""One tolerance for every float in the scaling state (relative, with the same absolute floor).

Every path carries the plan's IEEE doubles unchanged: Pulumi property values are JSON numbers,
Application Auto Scaling and CloudWatch store and return doubles. So an honest deployment
compares equal to within a few ulps, and any slack only has to absorb a value that went through
a short decimal rendering (7 significant digits: a console edit, a float32 hop). 1e-6 does that;
the 1e-4 ``bench`` used before would let a 10 000-request threshold move by one request unseen,
and no hand edit a person makes (25 -> 25.5 is 2e-2) comes near 1e-6."""


def number(value: Any) -> float | None:
    """A number from an int, a float or a numeric string (Pulumi sends some numbers as strings);
    None for anything else, booleans included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def close(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are numbers equal within :data:`REL_TOL`."""
    x, y = number(a), number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=REL_TOL, abs_tol=REL_TOL)


def same(observed: Any, expected: Any) -> bool:
    """One value of the scaling state: numbers within :data:`REL_TOL` (numeric strings count),
    booleans also as 'true'/'false' strings, None only equals None, the rest exactly."""
    if expected is None or observed is None:
        return observed is expected
    if isinstance(expected, bool):
        return observed is expected or (isinstance(observed, str) and observed.lower() == str(expected).lower())
    if isinstance(expected, (int, float)):
        return close(observed, expected)
    return observed == expected


@dataclass(frozen=True)
class Difference:
    """One value of the observed scaling state that is not the desired one."""

    part: str
    """Which part of :class:`ScalingSpec`: target, scale_out, scale_in, scale_in_alarm, surge, surge_alarm, queue."""
    field: str
    """The spec field (``steps`` for a different number of steps, ``steps.0.scaling_adjustment`` inside one)."""
    observed: Any
    expected: Any


def diff(part: str, expected: Any, observed: Any) -> list[Difference]:
    """Every compared field of ``observed`` that differs from ``expected`` (same spec class).

    Readers build ``observed`` from what they see, with whatever values they found there (an
    unknown marker, a string, None when absent); fields marked identity (names, descriptions)
    are not compared. Steps are compared step by step when their number agrees, else as one
    difference in their number.
    """
    out: list[Difference] = []
    for f in dataclasses.fields(expected):
        if not f.compare:
            continue
        want, got = getattr(expected, f.name), getattr(observed, f.name)
        if isinstance(want, tuple) and want and dataclasses.is_dataclass(want[0]):
            if not isinstance(got, tuple) or len(got) != len(want):
                out.append(Difference(part, f.name, got, want))
                continue
            for i, (w, g) in enumerate(zip(want, got, strict=True)):
                out += [dataclasses.replace(d, field=f"{f.name}.{i}.{d.field}") for d in diff(part, w, g)]
        elif not same(got, want):
            out.append(Difference(part, f.name, got, want))
    return out
