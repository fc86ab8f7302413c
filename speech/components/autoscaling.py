"""Autoscaling of one endpoint variant, every number from the plan (docs/design.md §5).

Scale-out: target tracking on ConcurrentRequestsPerModel at the deployed C_scale_max, scale-in
disabled there. Scale-in: a -1 step policy behind a sustained low-concurrency alarm with the long
cooldown. Surge: a step policy that grows the fleet by a fraction at once when instances hit Q_max.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws

from ..artifacts import PlanArtifact
from ..scaling import SCALE_OUT_METRIC_TYPE, surge_adjustment
from .endpoint import VARIANT
from .guard import REPLACE_ON, TAG_INSTANCE_TYPE

METRIC = "ConcurrentRequestsPerModel"
NAMESPACE = "AWS/SageMaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def resource_id(endpoint_name: str, variant: str = VARIANT) -> str:
    return f"endpoint/{endpoint_name}/variant/{variant}"


class AutoscalingArgs:
    def __init__(
        self,
        *,
        endpoint_name: str,
        plan: PlanArtifact,
        instance_type: str,
        tags: Optional[dict[str, str]] = None,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        self.endpoint_name = endpoint_name
        """Endpoint whose AllTraffic variant scales."""
        self.plan = plan
        """The measured plan (gate already passed): thresholds, fleet, cooldowns, alarms."""
        self.instance_type = instance_type
        """The variant's instance type: a change replaces the target after the endpoint update
        (speech.components.guard)."""
        self.tags = tags or {}
        """Provenance tags for the scalable target and the alarms."""
        self.depends_on = list(depends_on)
        """The endpoint: the variant must exist before it can be registered."""



def concurrency_alarm(
    resource_name: str,
    *,
    alarm_name: str,
    description: str,
    dims: dict,
    period_s: int,
    periods: int,
    threshold: float,
    comparison: str,
    missing_data: str,
    action: pulumi.Input[str],
    tags: dict,
    opts: pulumi.ResourceOptions,
) -> aws.cloudwatch.MetricAlarm:
    """An alarm on ConcurrentRequestsPerModel (Maximum) that must breach every one of `periods`
    consecutive periods before it fires its scaling action."""
    return aws.cloudwatch.MetricAlarm(
        resource_name,
        name=alarm_name,
        alarm_description=description,
        namespace=NAMESPACE,
        metric_name=METRIC,
        dimensions=dims,
        statistic="Maximum",
        period=period_s,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        threshold=threshold,
        comparison_operator=comparison,
        treat_missing_data=missing_data,
        alarm_actions=[action],
        tags=tags,
        opts=opts,
    )

class Autoscaling(pulumi.ComponentResource):
    target: aws.appautoscaling.Target
    scale_out: aws.appautoscaling.Policy
    scale_in: aws.appautoscaling.Policy
    surge: aws.appautoscaling.Policy

    def __init__(self, name: str, args: AutoscalingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("speech:index:Autoscaling", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Fixed policy names: a replacement must delete before it creates, or the delete of the old
        # one would remove the new one (same name, same resource id).
        policy_opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        p = args.plan
        rid = resource_id(args.endpoint_name)
        dims = {"EndpointName": args.endpoint_name, "VariantName": VARIANT}

        self.target = aws.appautoscaling.Target(
            f"{name}-target",
            service_namespace="sagemaker",
            scalable_dimension=DIMENSION,
            resource_id=rid,
            min_capacity=p.fleet.min_instances,
            max_capacity=p.fleet.max_instances,
            tags={**args.tags, TAG_INSTANCE_TYPE: args.instance_type},
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on, delete_before_replace=True,
                                        replace_on_changes=REPLACE_ON),
        )
        target = dict(
            resource_id=self.target.resource_id,
            scalable_dimension=self.target.scalable_dimension,
            service_namespace=self.target.service_namespace,
        )

        self.scale_out = aws.appautoscaling.Policy(
            f"{name}-scale-out",
            name=f"{args.endpoint_name}-scale-out",
            policy_type="TargetTrackingScaling",
            target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                target_value=p.thresholds.scaling_target_value,
                disable_scale_in=True,
                scale_out_cooldown=p.cooldowns.scale_out_s,
                scale_in_cooldown=p.cooldowns.scale_in_s,
                predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                    predefined_metric_type=SCALE_OUT_METRIC_TYPE,
                ),
            ),
            opts=policy_opts,
            **target,
        )

        self.scale_in = aws.appautoscaling.Policy(
            f"{name}-scale-in",
            name=f"{args.endpoint_name}-scale-in",
            policy_type="StepScaling",
            step_scaling_policy_configuration=aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs(
                adjustment_type="ChangeInCapacity",
                cooldown=p.cooldowns.scale_in_s,
                metric_aggregation_type="Maximum",
                step_adjustments=[
                    aws.appautoscaling.PolicyStepScalingPolicyConfigurationStepAdjustmentArgs(
                        scaling_adjustment=-1, metric_interval_upper_bound="0"
                    )
                ],
            ),
            opts=policy_opts,
            **target,
        )
        self.scale_in_alarm = concurrency_alarm(
            f"{name}-scale-in-alarm",
            alarm_name=f"{args.endpoint_name}-scale-in",
            description=f"every instance at or below C_scale_min ({p.thresholds.scale_in_threshold:g}) for "
            f"{p.alarms.scale_in_evaluation_periods} x {p.alarms.metric_period_s} s: remove one instance",
            dims=dims,
            period_s=p.alarms.metric_period_s,
            periods=p.alarms.scale_in_evaluation_periods,
            threshold=p.thresholds.scale_in_threshold,
            comparison="LessThanOrEqualToThreshold",
            # An idle variant publishes no datapoints; an idle fleet should shrink to its floor.
            missing_data="breaching",
            action=self.scale_in.arn,
            tags=args.tags,
            opts=child,
        )

        step = surge_adjustment(p)
        self.surge_step = step
        self.surge = aws.appautoscaling.Policy(
            f"{name}-surge",
            name=f"{args.endpoint_name}-surge",
            policy_type="StepScaling",
            step_scaling_policy_configuration=aws.appautoscaling.PolicyStepScalingPolicyConfigurationArgs(
                adjustment_type="PercentChangeInCapacity",
                min_adjustment_magnitude=step.min_instances_added,
                cooldown=p.cooldowns.scale_out_s,
                metric_aggregation_type="Maximum",
                step_adjustments=[
                    aws.appautoscaling.PolicyStepScalingPolicyConfigurationStepAdjustmentArgs(
                        scaling_adjustment=step.percent, metric_interval_lower_bound="0"
                    )
                ],
            ),
            opts=policy_opts,
            **target,
        )
        self.surge_alarm = concurrency_alarm(
            f"{name}-surge-alarm",
            alarm_name=f"{args.endpoint_name}-surge",
            description=f"an instance reached Q_max ({p.alarms.saturation_concurrency:g}): add "
            f"{step.percent}% (at least {step.min_instances_added}) at once",
            dims=dims,
            period_s=p.alarms.metric_period_s,
            periods=p.alarms.datapoints_to_alarm,
            threshold=p.alarms.saturation_concurrency,
            comparison="GreaterThanOrEqualToThreshold",
            missing_data="notBreaching",
            action=self.surge.arn,
            tags=args.tags,
            opts=child,
        )
        self.register_outputs({"resource_id": self.target.resource_id})
