"""Scaling sizes derived from a plan that are not thresholds: pure, so the Pulumi program and the
policy pack compute them with the same code (the pack must not import pulumi_aws)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .artifacts import PlanArtifact

SCALE_OUT_METRIC_TYPE = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
"""Target tracking's metric: ConcurrentRequestsPerModel at its 10 s resolution. Only this predefined
type gives Application Auto Scaling the 10 s period the plan's reaction bound assumes (a
customized metric specification is read at 60 s, which would add minutes to T_total)."""


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
