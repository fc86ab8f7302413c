"""Autoscaling of one endpoint variant: the scaling spec of the plan as resources (docs/design.md §5).

Scale-out: target tracking on ConcurrentRequestsPerModel at the deployed C_scale_max, scale-in
disabled there. Scale-in: a -1 step policy behind a sustained low-concurrency alarm with the long
cooldown. Surge: a step policy that grows the fleet by a fraction at once when instances hit Q_max.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypedDict

import pulumi
import pulumi_aws as aws

from speech.deploy.scaling import (
    AlarmSpec,
    BatchScalingSpec,
    ScalingSpec,
    ScheduledActionSpec,
    StepPolicySpec,
    TargetSpec,
    TargetTrackingSpec,
    batch_scaling_spec,
    floor_in_force,
    guarded_queries,
    resource_id,
    scaling_spec,
)
from speech.infra.components.guard import REPLACE_ON, TAG_INSTANCE_TYPE
from speech.plan.batch import BatchPlan
from speech.schema.plan_artifacts import PlanArtifact

__all__ = ["AsyncScaling", "AsyncScalingArgs", "Autoscaling", "AutoscalingArgs", "resource_id"]


class AutoscalingArgs:
    def __init__(
        self,
        *,
        endpoint_name: str,
        plan: PlanArtifact,
        instance_type: str,
        tags: dict[str, str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        now: datetime | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        """Endpoint whose AllTraffic variant scales."""
        self.now = now
        """When the deploy runs (aware; default the clock): with daily floors the target is registered
        with the floor in force then (:func:`speech.deploy.scaling.floor_in_force`)."""
        self.plan = plan
        """The measured plan (gate already passed): thresholds, fleet, cooldowns, alarms."""
        self.instance_type = instance_type
        """The variant's instance type: a change replaces the target after the endpoint update
        (speech.infra.components.guard)."""
        self.tags = tags or {}
        """Provenance tags for the scalable target and the alarms."""
        self.depends_on = list(depends_on)
        """The endpoint: the variant must exist before it can be registered."""


def _bound(value: float | None) -> str | None:
    # The provider takes step bounds as strings.
    return None if value is None else f"{value:g}"


def step_policy_args(spec: StepPolicySpec) -> aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs:
    return aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs(
        adjustment_type=spec.adjustment_type,
        min_adjustment_magnitude=spec.min_adjustment_magnitude,
        cooldown=spec.cooldown_s,
        metric_aggregation_type=spec.aggregation,
        step_adjustments=[
            aws.appautoscaling.PolicyStepScalingPolicyConfigurationStepAdjustmentArgs(
                scaling_adjustment=s.scaling_adjustment,
                metric_interval_lower_bound=_bound(s.lower_bound),
                metric_interval_upper_bound=_bound(s.upper_bound),
            )
            for s in spec.steps
        ],
    )


def concurrency_alarm(resource_name: str, spec: AlarmSpec, *, action: pulumi.Input[str], tags: dict,
                      opts: pulumi.ResourceOptions) -> aws.cloudwatch.MetricAlarm:
    """The alarm ``spec`` describes, firing ``action`` (a scaling policy ARN): its one metric, or
    with a wake guard the metric math of :func:`speech.deploy.scaling.guarded_queries`."""
    if spec.wake_guard is None:
        metric: dict[str, Any] = dict(namespace=spec.namespace, metric_name=spec.metric_name,
                                      dimensions=dict(spec.dimensions), statistic=spec.statistic, period=spec.period_s)
    else:
        metric = dict(metric_queries=[
            aws.cloudwatch.MetricAlarmMetricQueryArgs(id=q.id, expression=q.expression, return_data=q.return_data)
            if q.expression else
            aws.cloudwatch.MetricAlarmMetricQueryArgs(
                id=q.id, return_data=q.return_data,
                metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(
                    namespace=q.namespace, metric_name=str(q.metric_name), dimensions=dict(q.dimensions),
                    stat=str(q.stat), period=spec.period_s))
            for q in guarded_queries(spec)])
    return aws.cloudwatch.MetricAlarm(
        resource_name,
        name=spec.name,
        alarm_description=spec.description,
        **metric,
        evaluation_periods=spec.evaluation_periods,
        datapoints_to_alarm=spec.datapoints_to_alarm,
        threshold=spec.threshold,
        comparison_operator=spec.comparison,
        treat_missing_data=spec.treat_missing_data,
        alarm_actions=[action],
        tags=tags,
        opts=opts,
    )


class TargetKeys(TypedDict):
    """The three keys a scaling policy names its scalable target by (``**keys`` into a Policy)."""

    resource_id: pulumi.Output[str]
    scalable_dimension: pulumi.Output[str]
    service_namespace: pulumi.Output[str]


def scalable_target(resource_name: str, spec: TargetSpec, *, tags: dict, parent: pulumi.Resource,
                    depends_on: Sequence[pulumi.Resource], replace_on_changes: Sequence[str] = (),
                    min_capacity: int | None = None) -> tuple[aws.appautoscaling.Target, TargetKeys]:
    """The scalable target of a spec and the three keys its policies name it by. Deleted before it
    is replaced: the replacement registers the same resource id.

    ``min_capacity``: the MinCapacity to register instead of the spec's floor: under daily floors,
    the floor in force at deploy (what the latest scheduled action set). Nothing is ignored: every
    update (RegisterScalableTarget sends both bounds) carries the plan's cap and the floor in force,
    so a re-plan that moves the cap reaches AWS at once, and one inside a raised window does not put
    the plan's floor back. A preview after a window opened or closed shows the floor move to the
    value the schedule already set."""
    target = aws.appautoscaling.Target(
        resource_name,
        service_namespace=spec.service_namespace,
        scalable_dimension=spec.scalable_dimension,
        resource_id=spec.resource_id,
        min_capacity=spec.min_capacity if min_capacity is None else min_capacity,
        max_capacity=spec.max_capacity,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on), delete_before_replace=True,
                                    replace_on_changes=list(replace_on_changes) or None),
    )
    keys = TargetKeys(resource_id=target.resource_id, scalable_dimension=target.scalable_dimension,
                      service_namespace=target.service_namespace)
    return target, keys


def variant_target(resource_name: str, spec: TargetSpec, *, tags: dict, instance_type: str, parent: pulumi.Resource,
                   depends_on: Sequence[pulumi.Resource], min_capacity: int | None = None
                   ) -> tuple[aws.appautoscaling.Target, TargetKeys]:
    """The scalable target of a variant's instance count (real-time and batch routes): tagged with the
    instance type, and replaced when that tag changes (after the endpoint update, the guard)."""
    return scalable_target(resource_name, spec, tags={**tags, TAG_INSTANCE_TYPE: instance_type}, parent=parent,
                           depends_on=depends_on, replace_on_changes=REPLACE_ON, min_capacity=min_capacity)


def policy_options(parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options of a scaling policy under ``parent``. Fixed policy names: a replacement must delete
    before it creates, or the delete of the old one would remove the new one (same name, same resource id)."""
    return pulumi.ResourceOptions(parent=parent, delete_before_replace=True)


def predefined_tracking_policy(resource_name: str, spec: TargetTrackingSpec, *, target: TargetKeys,
                               opts: pulumi.ResourceOptions) -> aws.appautoscaling.Policy:
    """Target tracking on a predefined metric, from the spec."""
    return aws.appautoscaling.Policy(
        resource_name,
        name=spec.name,
        policy_type=spec.policy_type,
        target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
            target_value=spec.target_value,
            disable_scale_in=spec.disable_scale_in,
            scale_out_cooldown=spec.scale_out_cooldown_s,
            scale_in_cooldown=spec.scale_in_cooldown_s,
            predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                predefined_metric_type=spec.metric_type,
            ),
        ),
        opts=opts,
        **target,
    )


def step_policy_with_alarm(resource_name: str, policy: StepPolicySpec, alarm: AlarmSpec, *, target: TargetKeys, tags: dict,
                           parent: pulumi.Resource) -> tuple[aws.appautoscaling.Policy, aws.cloudwatch.MetricAlarm]:
    """A step policy and the alarm that invokes it, both from the spec (fixed policy names: the
    old policy is deleted before its replacement is created)."""
    created = aws.appautoscaling.Policy(
        resource_name,
        name=policy.name,
        policy_type=policy.policy_type,
        step_scaling_policy_configuration=step_policy_args(policy),
        opts=policy_options(parent),
        **target,
    )
    return created, concurrency_alarm(f"{resource_name}-alarm", alarm, action=created.arn, tags=tags,
                                      opts=pulumi.ResourceOptions(parent=parent))


def scheduled_action(resource_name: str, spec: ScheduledActionSpec, *, target: TargetKeys,
                     opts: pulumi.ResourceOptions) -> aws.appautoscaling.ScheduledAction:
    """A daily scheduled floor of the target, from the spec (cron in the spec's time zone)."""
    return aws.appautoscaling.ScheduledAction(
        resource_name,
        name=spec.name,
        schedule=spec.schedule,
        timezone=spec.timezone,
        scalable_target_action=aws.appautoscaling.ScheduledActionScalableTargetActionArgs(
            min_capacity=spec.min_capacity, max_capacity=spec.max_capacity,
        ),
        opts=opts,
        **target,
    )


class Autoscaling(pulumi.ComponentResource):
    """Renders :func:`speech.deploy.scaling.scaling_spec` of the plan into resources, nothing more."""

    spec: ScalingSpec
    target: aws.appautoscaling.Target
    scale_out: aws.appautoscaling.Policy
    scale_in: aws.appautoscaling.Policy
    surge: aws.appautoscaling.Policy

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:Autoscaling", name, None, opts)
        policy_opts = policy_options(self)
        spec = self.spec = scaling_spec(args.plan, args.endpoint_name)
        floor, action = floor_in_force(spec.scheduled, spec.target.min_capacity, args.now or datetime.now(UTC))
        if action is not None:
            pulumi.log.info(f"{args.endpoint_name}: the floor in force now is {floor} instances ({action.name}, "
                            f"{action.schedule} {action.timezone}); the target is registered with it, cap "
                            f"{spec.target.max_capacity} from the plan", self)
        self.target, target = variant_target(f"{name}-target", spec.target, tags=args.tags,
                                             instance_type=args.instance_type, parent=self, depends_on=args.depends_on,
                                             min_capacity=floor)
        self.scale_out = predefined_tracking_policy(f"{name}-scale-out", spec.scale_out, target=target, opts=policy_opts)
        self.scale_in, self.scale_in_alarm = step_policy_with_alarm(f"{name}-scale-in", spec.scale_in, spec.scale_in_alarm,
                                                                    target=target, tags=args.tags, parent=self)
        self.surge, self.surge_alarm = step_policy_with_alarm(f"{name}-surge", spec.surge, spec.surge_alarm,
                                                              target=target, tags=args.tags, parent=self)
        # Daily floors (new resources, one per time of day; absent without a schedule). Each names the
        # target's keys, so it is created after the target is registered.
        self.scheduled = [
            scheduled_action(f"{name}{a.name[len(args.endpoint_name):]}", a, target=target,
                             opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True))
            for a in spec.scheduled
        ]
        self.register_outputs({"resource_id": self.target.resource_id})


class AsyncScalingArgs:
    def __init__(
        self,
        *,
        endpoint_name: str,
        plan: BatchPlan,
        instance_type: str,
        tags: dict[str, str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        self.endpoint_name = endpoint_name
        """Asynchronous endpoint whose AllTraffic variant scales."""
        self.plan = plan
        """The batch plan (gate already passed): backlog target, fleet 0..max, cooldowns, wake."""
        self.instance_type = instance_type
        """The variant's instance type (tag read by the scaling guard)."""
        self.tags = tags or {}
        """Provenance tags for the scalable target and the alarm."""
        self.depends_on = list(depends_on)
        """The endpoint: the variant must exist before it can be registered."""


class AsyncScaling(pulumi.ComponentResource):
    """Renders :func:`speech.deploy.scaling.batch_scaling_spec` into resources: a target 0..max, target
    tracking on the backlog per instance, and the wake step behind HasBacklogWithoutCapacity."""

    spec: BatchScalingSpec
    target: aws.appautoscaling.Target
    backlog: aws.appautoscaling.Policy
    wake: aws.appautoscaling.Policy
    wake_alarm: aws.cloudwatch.MetricAlarm

    def __init__(self, name: str, args: AsyncScalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:AsyncScaling", name, None, opts)
        policy_opts = policy_options(self)
        spec = self.spec = batch_scaling_spec(args.plan, args.endpoint_name)
        self.target, target = variant_target(f"{name}-target", spec.target, tags=args.tags,
                                             instance_type=args.instance_type, parent=self, depends_on=args.depends_on)
        b = spec.backlog
        self.backlog = aws.appautoscaling.Policy(
            f"{name}-backlog",
            name=b.name,
            policy_type=b.policy_type,
            target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                target_value=b.target_value,
                scale_out_cooldown=b.scale_out_cooldown_s,
                scale_in_cooldown=b.scale_in_cooldown_s,
                customized_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationCustomizedMetricSpecificationArgs(
                    metric_name=b.metric_name,
                    namespace=b.namespace,
                    statistic=b.statistic,
                    dimensions=[
                        aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationCustomizedMetricSpecificationDimensionArgs(
                            name=k, value=v)
                        for k, v in b.dimensions
                    ],
                ),
            ),
            opts=policy_opts,
            **target,
        )
        self.wake, self.wake_alarm = step_policy_with_alarm(f"{name}-wake", spec.wake, spec.wake_alarm, target=target,
                                                            tags=args.tags, parent=self)
        self.register_outputs({"resource_id": self.target.resource_id})
