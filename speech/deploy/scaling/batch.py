"""The backlog scaling spec of a batch route (an asynchronous endpoint, docs/design.md §3.10),
from its batch plan (:func:`batch_scaling_spec`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from speech.deploy.scaling.spec import AlarmSpec, StepPolicySpec, TargetSpec, field_rule, one_step_policy, rule_meta, variant_target
from speech.schema.aws import (
    METRIC,
    METRIC_NAMESPACE,
    SUFFIX_WAKE,
    TARGET_TRACKING,
    VARIANT,
)

if TYPE_CHECKING:
    from speech.plan.batch import BatchPlan

# --- batch routes: an asynchronous endpoint scaled on its backlog (docs/design.md §3.10)----------

BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"
"""Asynchronous endpoint metric: requests queued or in process, divided by the instance count."""
WAKE_METRIC = "HasBacklogWithoutCapacity"
"""Asynchronous endpoint metric: 1 while requests wait and the endpoint has no instance."""
ASYNC_STATISTIC = "Average"
"""Statistic of the backlog metrics and aggregation of the wake step (the AWS pattern)."""
SUFFIX_BACKLOG = "-backlog"
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

    name: str = field(compare=False)
    policy_type: str = field(metadata=rule_meta("the backlog per instance tracks a target"))
    metric_name: str = field(metadata=rule_meta("backlog per instance of the asynchronous endpoint"))
    namespace: str = field(metadata=rule_meta("SageMaker's endpoint metrics"))
    dimensions: tuple[tuple[str, str], ...] = field(metadata=rule_meta("this endpoint (async metrics have no variant)"))
    statistic: str = field(metadata=rule_meta("average backlog per instance, the AWS pattern"))
    target_value: float = field(metadata=rule_meta("batch plan backlog target floor(X(Q_max) x (max_delay_s - cold start))"))
    scale_out_cooldown_s: int = field(metadata=rule_meta("batch plan scale-out cooldown max(60, ceil(T_total)) s"))
    scale_in_cooldown_s: int = field(metadata=rule_meta("batch plan scale-in cooldown max(300, 3 x cold start) s"))


@dataclass(frozen=True)
class AsyncClientSpec:
    """How SageMaker feeds one instance of the asynchronous endpoint."""

    max_concurrent_invocations_per_instance: int = field(metadata=rule_meta(
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
        return field_rule(self, part, name)


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
        target=variant_target(endpoint_name, variant, plan.min_instances, plan.max_instances),
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
        wake=one_step_policy(f"{endpoint_name}{SUFFIX_WAKE}", w.instances_added, cooldown_s=w.cooldown_s,
                             aggregation=ASYNC_STATISTIC),
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


