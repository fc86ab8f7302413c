"""AWS names: the one place (metric names, dimensions, policy suffixes, resource ids)."""

from __future__ import annotations

import re
from typing import Any, Final

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
AVERAGE_STATISTIC = "Average"
"""The surge alarm's statistic under ``PlanInputs.surge_average_share`` (speech.deploy.scaling.realtime)."""
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
"""MinAdjustmentMagnitude of the scale-in step: a step removes a share of the fleet
(PercentChangeInCapacity), and at least this many instances."""
SUFFIX_FLOOR = "-floor-"
"""Scheduled floor actions are ``<endpoint>-floor-HHMM`` (their local time)."""
PERCENT_CHANGE = "PercentChangeInCapacity"

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


# --- AWS names of inference components (hosting: components) ---------------------------------
# Checked against botocore's application-autoscaling model (ScalableDimension, MetricType enums and
# the RegisterScalableTarget ResourceId documentation) and SageMaker's "Scale an endpoint to zero
# instances" guide.

COMPONENT_SCALABLE_DIMENSION: Final = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling dimension of an inference component: its number of copies."""
COMPONENT_METRIC = "ConcurrentRequestsPerCopy"
"""The CloudWatch metric a copy's Q_max is measured against (requests in flight per copy)."""
COMPONENT_SCALE_OUT_METRIC_TYPE: Final = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
"""Target tracking's metric for copies: ConcurrentRequestsPerCopy at its 10 s resolution (as
:data:`SCALE_OUT_METRIC_TYPE` is for instances)."""
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
"""What SageMaker emits when a request reaches an inference component with no copy to serve it:
the only signal that can wake a component scaled to zero copies (target tracking cannot divide by
zero copies)."""
NO_CAPACITY_STATISTIC = "Sum"
"""Failed requests in the period (the documented scale-from-zero alarm uses Sum)."""
INVOCATIONS_METRIC = "Invocations"
"""Requests sent to the inference component (AWS/SageMaker, InferenceComponentName), Sum per period."""
INVOCATIONS_PER_COPY_METRIC = "InvocationsPerCopy"
"""Invocations normalized by the copies serving them (the metric of target tracking's
SageMakerInferenceComponentInvocationsPerCopy), Sum per period: Invocations / InvocationsPerCopy is
the number of copies that served the period's requests."""
INSTANCE_SCALING_ENABLED = "ENABLED"
"""ProductionVariantManagedInstanceScaling.Status: SageMaker adds and removes instances to fit the copies."""
SUFFIX_WAKE = "-wake"
"""The scale-from-zero step policy and its alarm: ``<component><suffix>``."""
COMPONENT_POLICY_SUFFIXES = (SUFFIX_SCALE_OUT, SUFFIX_SCALE_IN, SUFFIX_WAKE)
COMPONENT_RESOURCE_ID_RE = re.compile(r"^inference-component/(?P<component>[^/]+)$")


def component_resource_id(component_name: str) -> str:
    """Application Auto Scaling's id of an inference component: ``inference-component/<name>``."""
    return f"inference-component/{component_name}"


def parse_component_resource_id(value: Any) -> str | None:
    """The inference component name of ``inference-component/<name>``, else None."""
    if not isinstance(value, str):
        return None
    m = COMPONENT_RESOURCE_ID_RE.match(value)
    return m.group("component") if m else None


def component_metric_dimensions(component_name: str) -> dict[str, str]:
    """CloudWatch dimensions of an inference component's per-copy metrics."""
    return {"InferenceComponentName": component_name}


def policy_role(policy_name: str) -> str | None:
    """Which planned policy a name belongs to (its suffix), or None for an unplanned one."""
    return next((s for s in POLICY_SUFFIXES if policy_name.endswith(s)), None)


