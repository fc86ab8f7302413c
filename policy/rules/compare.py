"""The observed side of the one scaling-spec comparison: Pulumi properties read into the spec's
shape (:func:`observed`) and :func:`speech.deploy.scaling.diff` rendered as the pack's messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from policy.resources import (
    MISSING,
    UNKNOWN,
    Res,
    at,
    fmt,
    has_unknown,
)
from policy.rules.common import FIX_HAND_EDIT, PREVIEW
from speech.deploy import scaling

# Where each field of the scaling spec lives in Pulumi resource properties: the pack reads the
# observed state from these paths and names them in its messages.
PULUMI_PATHS: dict[tuple[str, str], str] = {
    ("target", "resource_id"): "resourceId",
    ("target", "service_namespace"): "serviceNamespace",
    ("target", "scalable_dimension"): "scalableDimension",
    ("target", "min_capacity"): "minCapacity",
    ("target", "max_capacity"): "maxCapacity",
    ("scale_out", "policy_type"): "policyType",
    ("scale_out", "metric_type"): "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
    ("scale_out", "target_value"): "targetTrackingScalingPolicyConfiguration.targetValue",
    ("scale_out", "scale_out_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleOutCooldown",
    ("scale_out", "scale_in_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleInCooldown",
    ("scale_out", "disable_scale_in"): "targetTrackingScalingPolicyConfiguration.disableScaleIn",
    ("step", "policy_type"): "policyType",
    ("step", "adjustment_type"): "stepScalingPolicyConfiguration.adjustmentType",
    ("step", "steps"): "stepScalingPolicyConfiguration.stepAdjustments",
    ("step", "min_adjustment_magnitude"): "stepScalingPolicyConfiguration.minAdjustmentMagnitude",
    ("step", "cooldown_s"): "stepScalingPolicyConfiguration.cooldown",
    ("step", "aggregation"): "stepScalingPolicyConfiguration.metricAggregationType",
    ("alarm", "namespace"): "namespace",
    ("alarm", "metric_name"): "metricName",
    ("alarm", "dimensions"): "dimensions",
    ("alarm", "statistic"): "statistic",
    ("alarm", "period_s"): "period",
    ("alarm", "evaluation_periods"): "evaluationPeriods",
    ("alarm", "datapoints_to_alarm"): "datapointsToAlarm",
    ("alarm", "threshold"): "threshold",
    ("alarm", "comparison"): "comparisonOperator",
    ("alarm", "treat_missing_data"): "treatMissingData",
    ("alarm", "wake_guard"): "metricQueries",
    ("queue", "max_depth"): "primaryContainer.environment.QUEUE_MAX_DEPTH",
    ("scheduled", "schedule"): "schedule",
    ("scheduled", "timezone"): "timezone",
    ("scheduled", "min_capacity"): "scalableTargetAction.minCapacity",
    ("scheduled", "max_capacity"): "scalableTargetAction.maxCapacity",
    # hosting: components: the variant's managed instance scaling, the component's compute.
    ("instances", "status"): "managedInstanceScaling.status",
    ("instances", "min_instance_count"): "managedInstanceScaling.minInstanceCount",
    ("instances", "max_instance_count"): "managedInstanceScaling.maxInstanceCount",
    ("compute", "min_memory_required_mb"): "specification.computeResourceRequirements.minMemoryRequiredInMb",
    ("compute", "accelerator_devices"): "specification.computeResourceRequirements.numberOfAcceleratorDevicesRequired",
    ("compute", "cpu_cores"): "specification.computeResourceRequirements.numberOfCpuCoresRequired",
    ("backlog", "policy_type"): "policyType",
    ("backlog", "metric_name"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.metricName",
    ("backlog", "namespace"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.namespace",
    ("backlog", "dimensions"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.dimensions",
    ("backlog", "statistic"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.statistic",
    ("backlog", "target_value"): "targetTrackingScalingPolicyConfiguration.targetValue",
    ("backlog", "scale_out_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleOutCooldown",
    ("backlog", "scale_in_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleInCooldown",
    ("client", "max_concurrent_invocations_per_instance"):
        "asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance",
}
STEP_PATHS = {"scaling_adjustment": "scalingAdjustment", "lower_bound": "metricIntervalLowerBound",
              "upper_bound": "metricIntervalUpperBound"}
KIND = scaling.PART_KIND
PROVIDER_DEFAULTS = {("alarm", "treat_missing_data"): "missing"}
"""What AWS applies when the property is not set (datapointsToAlarm defaults to evaluationPeriods)."""
REPORTED_ELSEWHERE = {("scale_out", "disable_scale_in"), ("target", "resource_id"), ("target", "service_namespace"),
                      ("target", "scalable_dimension")}
"""Owned by other rules: the target's identity selects it (scaled_variants, which reports what it
cannot identify), and one-scaling-path-per-variant owns disableScaleIn; a second report of the
same edit would only repeat it."""


def _path(part: str, name: str, kind: str | None = None) -> str:
    kind = kind or KIND[part]
    if name.startswith("steps.") and name.count(".") == 2:
        _, i, sub = name.split(".")
        return f"{PULUMI_PATHS[(kind, 'steps')]}.{i}.{STEP_PATHS[sub]}"
    return PULUMI_PATHS[(kind, name)]


def _steps(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    def bound(v: Any) -> Any:
        return None if v is MISSING else v
    return tuple(scaling.StepSpec(scaling_adjustment=at(s, "scalingAdjustment"), lower_bound=bound(at(s, "metricIntervalLowerBound")),
                                  upper_bound=bound(at(s, "metricIntervalUpperBound"))) for s in value)


def observed(part: str, res: Res, expected: Any, kind: str | None = None) -> Any:
    """The spec part ``expected`` as ``res`` has it (Pulumi properties normalized into the spec shape)."""
    kind, values = kind or KIND[part], {}
    # A metric-math alarm names its metric inside metricQueries: read those into the flat fields.
    queries = res.get("metricQueries") if kind == "alarm" else MISSING
    math = scaling.read_guarded(queries) if isinstance(queries, (list, tuple)) else None
    for f in dataclasses.fields(expected):
        if not f.compare:
            values[f.name] = getattr(expected, f.name)
            continue
        if math is not None and f.name in math:
            values[f.name] = math[f.name]
            continue
        v = res.get(PULUMI_PATHS[(kind, f.name)])
        if f.name == "wake_guard":
            v = None if v is MISSING else v
        if v is MISSING:
            v = PROVIDER_DEFAULTS.get((kind, f.name), None)
        if f.name == "steps":
            v = _steps(v)
        elif f.name == "dimensions" and isinstance(v, Mapping):
            v = tuple(sorted((str(k), at(v, k)) for k in v))
        elif f.name == "dimensions" and isinstance(v, list):
            # A customized metric specification lists its dimensions as {name, value}.
            v = tuple(sorted((str(at(d, "name")), at(d, "value")) for d in v))
        values[f.name] = v
    if kind == "alarm" and values["datapoints_to_alarm"] is None:
        values["datapoints_to_alarm"] = values["evaluation_periods"]
    return type(expected)(**values)


def plan_differences(part: str, res: Res, spec: Any, src: str, kind: str | None = None) -> Iterator[str]:
    """:func:`speech.deploy.scaling.diff` of ``res`` against ``spec.<part>``, as the pack's messages
    (``spec`` a ScalingSpec, or a ComponentScalingSpec with ``kind`` from its part kinds)."""
    want = getattr(spec, part)
    for d in scaling.diff(part, want, observed(part, res, want, kind)):
        if (part, d.field) in REPORTED_ELSEWHERE:
            continue
        path, why = _path(part, d.field, kind), spec.rule_of(part, d.field)
        raw = res.get(path)
        if raw is UNKNOWN or has_unknown(raw):
            yield (f"{PREVIEW}: {res.label} {path} is unknown, expected {_show(d.expected)} ({why}); "
                   "compute it from stack config, not from another resource's output")
        elif d.field == "steps" and isinstance(raw, list):
            yield (f"{res.label} has {len(raw)} step adjustments, expected {len(d.expected)} ({why}): further steps would "
                   f"add capacity no plan sized; {FIX_HAND_EDIT}")
        elif part == "queue":
            # Environment values are strings.
            yield f"{res.label} {path} is {fmt(raw)}, expected {fmt(str(d.expected))} ({why}, from {src}); {FIX_HAND_EDIT}"
        else:
            yield f"{res.label} {path} is {fmt(raw)}, expected {_show(d.expected)} ({why}, from {src}); {FIX_HAND_EDIT}"


def _show(value: Any) -> str:
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        return "[" + ", ".join(", ".join(f"{k}={fmt(v)}" for k, v in dataclasses.asdict(s).items() if v is not None)
                               for s in value) + "]"
    if isinstance(value, tuple):
        return fmt(dict(value))
    return fmt(value)
