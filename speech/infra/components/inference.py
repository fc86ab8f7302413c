"""Hosting mode ``components``: an endpoint with managed instance scaling that hosts the model as an
inference component (docs/design.md §5.8).

The SageMaker Model is the same as a real-time endpoint's (image, weights, environment); the
endpoint configuration's variant names no model, only the instance type and the range of instances
SageMaker may run (``ManagedInstanceScaling``), and the execution role moves to the configuration
(what SageMaker requires for an inference-component endpoint). The model is deployed onto the
endpoint as an ``AWS::SageMaker::InferenceComponent`` (pulumi-aws-native: pulumi-aws has no such
resource), whose copies each reserve the measured footprint plus the stated margin; instances follow
what the copies need. The copies' scaling is :class:`CopyAutoscaling`.

pulumi-aws-native is used for this one resource, through an explicit provider in the same region
as pulumi-aws (no separate ``aws-native:region`` config that could name another region).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_aws_native as aws_native

from speech.deploy.hosting import MODEL_DATA_DOWNLOAD_TIMEOUT_S, ROUTING_STRATEGY, inference_ami_version
from speech.deploy.scaling import ComponentScalingSpec
from speech.infra.components.autoscaling import (
    policy_options,
    predefined_tracking_policy,
    scalable_target,
    step_policy_with_alarm,
)
from speech.infra.components.endpoint import sagemaker_model
from speech.infra.components.guard import TAG_INSTANCE_TYPE

ROLLING_BATCH_PERCENT = 50
"""Copies replaced per step of a rolling update, as a share of the copy count: the largest SageMaker
accepts (5-50 %), so a one- or two-copy component still updates one copy at a time."""
ROLLING_WAIT_S = 600
"""Bake time per step: as long as a real-time endpoint's canary (the TTFAB and error alarms need minutes)."""
ROLLING_TIMEOUT_S = 3600


def native_tags(tags: dict[str, pulumi.Input[str]]) -> list[aws_native.TagArgs]:
    """pulumi-aws-native takes tags as a list of key/value pairs (sorted, so the input is stable)."""
    return [aws_native.TagArgs(key=k, value=v) for k, v in sorted(tags.items())]


def native_provider(name: str, region: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> aws_native.Provider:
    """The pulumi-aws-native provider, pinned to pulumi-aws's region."""
    return aws_native.Provider(name, region=region, opts=opts)


class ComponentEndpointArgs:
    def __init__(
        self,
        *,
        endpoint_name: str,
        spec: ComponentScalingSpec,
        image: pulumi.Input[str],
        role_arn: pulumi.Input[str],
        model_data_s3_uri: pulumi.Input[str],
        instance_type: str,
        environment: dict[str, pulumi.Input[str]],
        startup_health_check_timeout_s: int,
        provider: pulumi.ProviderResource,
        rollback_alarm_names: Sequence[pulumi.Input[str]] = (),
        tags: dict[str, pulumi.Input[str]] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        self.endpoint_name = endpoint_name
        """Explicit endpoint name (``<stack>-<model>``)."""
        self.spec = spec
        """The component's desired state from the copy plan (speech.deploy.scaling.component_scaling_spec):
        its name, instance range, starting copies and compute requirements."""
        self.image = image
        """Container image pinned by digest."""
        self.role_arn = role_arn
        """SageMaker execution role (on the endpoint configuration, as inference components require)."""
        self.model_data_s3_uri = model_data_s3_uri
        """S3 prefix holding the cached weights; SageMaker copies it to /opt/ml/model for each copy."""
        self.instance_type = instance_type
        """Instance type of the variant the copies are packed onto."""
        self.environment = environment
        """Container environment (QUEUE_MAX_DEPTH is the per-copy Q_max)."""
        self.startup_health_check_timeout_s = startup_health_check_timeout_s
        """Seconds a new copy has to answer /ping 200."""
        self.provider = provider
        """The pulumi-aws-native provider (:func:`native_provider`)."""
        self.rollback_alarm_names = list(rollback_alarm_names)
        """Alarms that roll a rolling update of the copies back."""
        self.tags = tags or {}
        """Provenance tags."""
        self.depends_on = list(depends_on)
        """What must exist before the model (the weight cache run, the role policy)."""


class ComponentEndpoint(pulumi.ComponentResource):
    """Model, endpoint configuration with managed instance scaling, endpoint, inference component."""

    model: aws.sagemaker.Model
    endpoint_configuration: aws.sagemaker.EndpointConfiguration
    endpoint: aws.sagemaker.Endpoint
    inference_component: aws_native.sagemaker.InferenceComponent

    def __init__(self, name: str, args: ComponentEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:ComponentEndpoint", name, None, opts)
        spec = args.spec
        self.model = sagemaker_model(f"{name}-model", image=args.image, environment=args.environment,
                                     role_arn=args.role_arn, model_data_s3_uri=args.model_data_s3_uri, tags=args.tags,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        inst = spec.instances
        self.endpoint_configuration = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            # An inference-component endpoint: no model on the variant, the role here instead.
            execution_role_arn=args.role_arn,
            production_variants=[
                aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                    variant_name=spec.variant,
                    instance_type=args.instance_type,
                    # A torch model on a GPU host needs a CUDA 12 driver (speech.deploy.hosting).
                    inference_ami_version=inference_ami_version(args.instance_type, args.environment.get("BACKEND")),
                    # SageMaker starts at least one instance (InitialInstanceCount >= 1) even when
                    # managed instance scaling may later release them all.
                    initial_instance_count=max(1, inst.min_instance_count),
                    managed_instance_scaling=aws.sagemaker.EndpointConfigurationProductionVariantManagedInstanceScalingArgs(
                        status=inst.status,
                        min_instance_count=inst.min_instance_count,
                        max_instance_count=inst.max_instance_count,
                    ),
                    routing_configs=[
                        aws.sagemaker.EndpointConfigurationProductionVariantRoutingConfigArgs(routing_strategy=ROUTING_STRATEGY)
                    ],
                )
            ],
            tags={**args.tags, TAG_INSTANCE_TYPE: args.instance_type},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint",
            name=args.endpoint_name,
            endpoint_config_name=self.endpoint_configuration.name,
            # No blue/green here: the model's rollout belongs to the inference component's rolling update.
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        compute = spec.compute
        rollback = (
            aws_native.sagemaker.InferenceComponentAutoRollbackConfigurationArgs(
                alarms=[aws_native.sagemaker.InferenceComponentAlarmArgs(alarm_name=a) for a in args.rollback_alarm_names]
            )
            if args.rollback_alarm_names else None
        )
        self.inference_component = aws_native.sagemaker.InferenceComponent(
            f"{name}-component",
            inference_component_name=spec.component_name,
            endpoint_name=self.endpoint.name,
            variant_name=spec.variant,
            specification=aws_native.sagemaker.InferenceComponentSpecificationArgs(
                model_name=self.model.name,
                compute_resource_requirements=aws_native.sagemaker.InferenceComponentComputeResourceRequirementsArgs(
                    min_memory_required_in_mb=compute.min_memory_required_mb,
                    number_of_accelerator_devices_required=compute.accelerator_devices,
                    number_of_cpu_cores_required=compute.cpu_cores,
                ),
                startup_parameters=aws_native.sagemaker.InferenceComponentStartupParametersArgs(
                    container_startup_health_check_timeout_in_seconds=args.startup_health_check_timeout_s,
                    model_data_download_timeout_in_seconds=MODEL_DATA_DOWNLOAD_TIMEOUT_S,
                ),
            ),
            runtime_config=aws_native.sagemaker.InferenceComponentRuntimeConfigArgs(copy_count=spec.initial_copies),
            deployment_config=aws_native.sagemaker.InferenceComponentDeploymentConfigArgs(
                rolling_update_policy=aws_native.sagemaker.InferenceComponentRollingUpdatePolicyArgs(
                    maximum_batch_size=aws_native.sagemaker.InferenceComponentCapacitySizeArgs(
                        type=aws_native.sagemaker.InferenceComponentCapacitySizeType.CAPACITY_PERCENT,
                        value=ROLLING_BATCH_PERCENT,
                    ),
                    wait_interval_in_seconds=ROLLING_WAIT_S,
                    maximum_execution_timeout_in_seconds=ROLLING_TIMEOUT_S,
                ),
                auto_rollback_configuration=rollback,
            ),
            tags=native_tags(args.tags),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                # After creation the copy count belongs to Application Auto Scaling: a later
                # `pulumi up` must not reset it to the starting copies.
                ignore_changes=["runtimeConfig"],
                # Its name is fixed (the scaling resource id and alarms use it): a replacement
                # must delete the old component before it creates the new one.
                delete_before_replace=True,
            ),
        )
        self.register_outputs({
            "endpoint_name": self.endpoint.name,
            "inference_component_name": self.inference_component.inference_component_name,
        })


class CopyAutoscalingArgs:
    def __init__(self, *, spec: ComponentScalingSpec, tags: dict[str, str] | None = None,
                 depends_on: Sequence[pulumi.Resource] = ()) -> None:
        self.spec = spec
        """The copy scaling spec (speech.deploy.scaling.component_scaling_spec)."""
        self.tags = tags or {}
        """Provenance tags for the scalable target and the alarms."""
        self.depends_on = list(depends_on)
        """The inference component: it must exist before it can be registered."""


class CopyAutoscaling(pulumi.ComponentResource):
    """Renders the copy scaling spec into resources: a scalable target on the component's copy
    count, target tracking on ConcurrentRequestsPerCopy, the alarm-driven scale-in step and, where
    scaling to zero copies is allowed, the documented scale-from-zero step and its alarm."""

    target: aws.appautoscaling.Target
    scale_out: aws.appautoscaling.Policy
    scale_in: aws.appautoscaling.Policy
    wake: aws.appautoscaling.Policy | None

    def __init__(self, name: str, args: CopyAutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:CopyAutoscaling", name, None, opts)
        policy_opts = policy_options(self)
        spec = args.spec
        self.target, target = scalable_target(f"{name}-target", spec.target, tags=args.tags, parent=self,
                                              depends_on=args.depends_on)
        self.scale_out = predefined_tracking_policy(f"{name}-scale-out", spec.scale_out, target=target, opts=policy_opts)
        self.scale_in, self.scale_in_alarm = step_policy_with_alarm(f"{name}-scale-in", spec.scale_in, spec.scale_in_alarm,
                                                                    target=target, tags=args.tags, parent=self)
        self.wake = self.wake_alarm = None
        if spec.wake is not None and spec.wake_alarm is not None:
            self.wake, self.wake_alarm = step_policy_with_alarm(f"{name}-wake", spec.wake, spec.wake_alarm, target=target,
                                                                tags=args.tags, parent=self)
        self.register_outputs({"resource_id": self.target.resource_id})


__all__ = ["ComponentEndpoint", "ComponentEndpointArgs", "CopyAutoscaling", "CopyAutoscalingArgs", "native_provider",
           "native_tags"]
