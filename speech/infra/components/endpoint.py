"""Endpoint of one model: SageMaker Model, endpoint configuration, endpoint (blue/green canary)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from speech.deploy.hosting import MODEL_DATA_DOWNLOAD_TIMEOUT_S, ROUTING_STRATEGY, inference_ami_version
from speech.deploy.scaling import VARIANT  # noqa: F401  (re-exported: the variant is defined with the scaling names)
from speech.deploy.weights import MODEL_DIR
from speech.infra.components.observability import model_environment
from speech.schema.config import ModelConfig
from speech.schema.plan_artifacts import PlanArtifact

CANARY_PERCENT = 10
CANARY_WAIT_S = 600
TERMINATION_WAIT_S = 300
"""Blue/green: seconds the old fleet keeps running after all traffic moved to the new one."""

LEGACY_VARIANT: dict[str, object] = {
    "initial_variant_weight": 1.0,
    "model_data_download_timeout_in_seconds": 600,
    "routing_strategy": "LEAST_OUTSTANDING_REQUESTS",
}
"""What every release before issue 46 deployed for these inputs of a scaled real-time variant (the
inference AMI aside: :data:`LEGACY_GPU_AMI` where one was set). A stack deployed then has a capacity
read whose trigger named only the model, instance type and start-up timeout; an input that still
has its old value must not change the trigger, or the first ``up`` after upgrading re-reads the
count and, where autoscaling moved it, replaces the configuration (a second fleet)."""
LEGACY_GPU_AMI = "al2-ami-sagemaker-inference-gpu-3-1"


def capacity_triggers(variant: dict[str, pulumi.Input], async_fields: object) -> dict[str, pulumi.Input[str]]:
    """The capacity read's triggers: any change replaces the read (it runs again) exactly when the
    endpoint configuration is replaced. The first three keys are those of every earlier release
    (model, instance type, start-up timeout); every other input of the configuration joins under
    ``configuration`` (sorted JSON) only where it differs from :data:`LEGACY_VARIANT`, so an
    unchanged configuration keeps the trigger it was deployed with."""
    triggers: dict[str, pulumi.Input[str]] = {
        "model": variant["model_name"], "instance_type": variant["instance_type"],
        "startup_timeout_s": str(variant["container_startup_health_check_timeout_in_seconds"]),
    }
    legacy = dict(LEGACY_VARIANT, inference_ami_version=LEGACY_GPU_AMI if variant["inference_ami_version"] else None)
    changed = {k: v for k, v in variant.items()
               if k not in ("variant_name", "model_name", "instance_type",
                            "container_startup_health_check_timeout_in_seconds") and legacy.get(k) != v}
    if async_fields is not None:
        changed["async"] = async_fields
    if changed:
        triggers["configuration"] = pulumi.Output.json_dumps(changed, sort_keys=True)
    return triggers


def replacement_note(endpoint_name: str, instance_type: str, t_start_s: float | None) -> str:
    """What the preview says about a change that replaces the endpoint configuration: SageMaker's
    blue/green update runs a second fleet next to the old one for the canary wait, then the
    termination wait (plus the new instances' start, before the canary)."""
    least = CANARY_WAIT_S + TERMINATION_WAIT_S
    start = f" plus the new instances' start (T_total {t_start_s:g} s measured)" if t_start_s else " plus the new instances' start"
    return (f"{endpoint_name}: a change that replaces its endpoint configuration (model, image, instance type, start-up "
            f"timeout, AMI, routing) is a blue/green update: a second fleet of {instance_type} at the kept count runs "
            f"next to the old one for at least {least} s ({CANARY_PERCENT} % canary for {CANARY_WAIT_S} s, then all "
            f"traffic and {TERMINATION_WAIT_S} s before the old fleet stops){start}; the preview shows it as a "
            "replacement (+-) of the configuration")
"""Canary bake time: long enough for the TTFAB and error alarms (minutes) to see real traffic."""


def container_environment(model: str, config: ModelConfig, plan: PlanArtifact | None, *, backend: str,
                          image_digest: pulumi.Input[str], endpoint_name: str) -> dict[str, pulumi.Input[str]]:
    """The container's settings; user environment first so the program's values win.

    ENDPOINT_NAME and VARIANT_NAME make the container's EMF dimensions those of this endpoint
    (:func:`speech.infra.components.observability.container_dimensions`).
    BACKEND and MODEL_DIR are always explicit: the weights layout decides the backend, never the
    image's default. Without a plan the queue depth stays the container's own default: there is
    no measured Q_max.
    """
    env: dict[str, pulumi.Input[str]] = dict(config.environment)
    env.update(model_environment(endpoint_name))
    env.update({"MODEL_NAME": model, "BACKEND": backend, "MODEL_DIR": MODEL_DIR, "SLO_MS": f"{config.plan.slo_ms:g}",
                "IMAGE_DIGEST": image_digest})
    if plan is not None:
        env["QUEUE_MAX_DEPTH"] = str(plan.queue_max_depth)
        env["PRESSURE_CAPACITY_RPS"] = f"{plan.capacity.throughput_at_target_rps:g}"
    return env


class AsyncInference:
    """The asynchronous-inference part of an endpoint configuration (a batch model)."""

    def __init__(self, *, s3_output_path: pulumi.Input[str], s3_failure_path: pulumi.Input[str],
                 success_topic_arn: pulumi.Input[str], error_topic_arn: pulumi.Input[str],
                 max_concurrent_invocations_per_instance: int | None) -> None:
        self.s3_output_path = s3_output_path
        """``s3://<bucket>/<prefix>/`` where SageMaker stores each response body."""
        self.s3_failure_path = s3_failure_path
        """``s3://<bucket>/<prefix>/`` where SageMaker stores the error of a failed request."""
        self.success_topic_arn = success_topic_arn
        """SNS topic told of each completed request."""
        self.error_topic_arn = error_topic_arn
        """SNS topic told of each failed request."""
        self.max_concurrent_invocations_per_instance = max_concurrent_invocations_per_instance
        """Requests SageMaker hands one instance at once: the measured Q_max (None before measuring:
        SageMaker chooses)."""

    def fields(self) -> dict[str, pulumi.Input]:
        """Every value of the asynchronous part, plainly (a change makes a new endpoint configuration)."""
        return {"s3_output_path": self.s3_output_path, "s3_failure_path": self.s3_failure_path,
                "success_topic_arn": self.success_topic_arn, "error_topic_arn": self.error_topic_arn,
                "max_concurrent_invocations_per_instance": self.max_concurrent_invocations_per_instance}

    def args(self) -> aws.sagemaker.EndpointConfigurationAsyncInferenceConfigArgs:
        return aws.sagemaker.EndpointConfigurationAsyncInferenceConfigArgs(
            output_config=aws.sagemaker.EndpointConfigurationAsyncInferenceConfigOutputConfigArgs(
                s3_output_path=self.s3_output_path,
                s3_failure_path=self.s3_failure_path,
                notification_config=aws.sagemaker.EndpointConfigurationAsyncInferenceConfigOutputConfigNotificationConfigArgs(
                    success_topic=self.success_topic_arn,
                    error_topic=self.error_topic_arn,
                ),
            ),
            client_config=aws.sagemaker.EndpointConfigurationAsyncInferenceConfigClientConfigArgs(
                max_concurrent_invocations_per_instance=self.max_concurrent_invocations_per_instance,
            ),
        )


class EndpointArgs:
    def __init__(
        self,
        *,
        endpoint_name: str,
        image: pulumi.Input[str],
        role_arn: pulumi.Input[str],
        model_data_s3_uri: pulumi.Input[str],
        instance_type: str,
        initial_instance_count: int,
        environment: dict[str, pulumi.Input[str]],
        capacity_function: pulumi.Input[str] | None = None,
        capacity_ceiling: int | None = None,
        startup_health_check_timeout_s: int,
        rollback_alarm_names: Sequence[pulumi.Input[str]] = (),
        tags: dict[str, pulumi.Input[str]] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        endpoint_depends_on: Sequence[pulumi.Resource] = (),
        async_inference: AsyncInference | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        """Explicit endpoint name (``<stack>-<model>``) so alarms and scaling know it at preview."""
        self.image = image
        """Container image pinned by digest (``<repository url>@sha256:...``)."""
        self.role_arn = role_arn
        """SageMaker execution role."""
        self.model_data_s3_uri = model_data_s3_uri
        """S3 prefix holding the cached weights; SageMaker copies it to /opt/ml/model."""
        self.instance_type = instance_type
        """Instance type of the production variant."""
        self.initial_instance_count = initial_instance_count
        """The plan's min_instances (autoscaling takes over from there): the floor of the initial count."""
        self.capacity_function = capacity_function
        """The scaling guard's function: when set, every new endpoint configuration starts with the
        variant's desired count read just before it (within [initial_instance_count, capacity_ceiling]),
        so a blue/green update does not start the new fleet at the floor under load."""
        self.capacity_ceiling = capacity_ceiling
        """The plan's max_instances: the most instances a kept count may be."""
        self.environment = environment
        """Container environment (backend, model dir, queue depth, SLO, ...)."""
        self.startup_health_check_timeout_s = startup_health_check_timeout_s
        """Seconds the container has to answer /ping 200 (speech.deploy.hosting.startup_health_check_timeout_s)."""
        self.rollback_alarm_names = list(rollback_alarm_names)
        """Alarms that roll a blue/green deployment back."""
        self.tags = tags or {}
        """Provenance tags for the model and the endpoint."""
        self.depends_on = list(depends_on)
        """What must exist before the model (the weight cache run)."""
        self.endpoint_depends_on = list(endpoint_depends_on)
        """What must run before the endpoint is updated (the scaling guard)."""
        self.async_inference = async_inference
        """Set for a batch model: the endpoint is asynchronous (S3 in/out, SNS, requests queue)."""


def sagemaker_model(resource_name: str, *, image: pulumi.Input[str], environment: pulumi.Input[dict],
                    role_arn: pulumi.Input[str], model_data_s3_uri: pulumi.Input[str], tags: dict,
                    opts: pulumi.ResourceOptions) -> aws.sagemaker.Model:
    """The SageMaker Model both hostings run: the image, its environment, and the cached weights
    mounted uncompressed from their S3 prefix (SageMaker copies them to /opt/ml/model)."""
    return aws.sagemaker.Model(
        resource_name,
        execution_role_arn=role_arn,
        primary_container=aws.sagemaker.ModelPrimaryContainerArgs(
            image=image,
            environment=environment,
            model_data_source=aws.sagemaker.ModelPrimaryContainerModelDataSourceArgs(
                s3_data_sources=[
                    aws.sagemaker.ModelPrimaryContainerModelDataSourceS3DataSourceArgs(
                        s3_uri=model_data_s3_uri, s3_data_type="S3Prefix", compression_type="None"
                    )
                ]
            ),
        ),
        tags=tags,
        opts=opts,
    )


class Endpoint(pulumi.ComponentResource):
    model: aws.sagemaker.Model
    endpoint_configuration: aws.sagemaker.EndpointConfiguration
    endpoint: aws.sagemaker.Endpoint

    def __init__(self, name: str, args: EndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:Endpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.model = sagemaker_model(f"{name}-model", image=args.image, environment=args.environment,
                                     role_arn=args.role_arn, model_data_s3_uri=args.model_data_s3_uri, tags=args.tags,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        # Every input of the endpoint configuration but its instance count (and its tags, which update
        # in place): a change in any of them replaces the configuration, so a blue/green update starts
        # a new fleet, and the kept count must be read again for it. One dict feeds both the
        # configuration and the capacity read's triggers, so they cannot drift apart.
        variant: dict[str, pulumi.Input] = {
            "variant_name": VARIANT,
            "model_name": self.model.name,
            "instance_type": args.instance_type,
            "initial_variant_weight": 1.0,
            "container_startup_health_check_timeout_in_seconds": args.startup_health_check_timeout_s,
            # A torch variant on a GPU host needs a CUDA 12 driver (speech.deploy.hosting).
            "inference_ami_version": inference_ami_version(args.instance_type, args.environment.get("BACKEND")),
            "model_data_download_timeout_in_seconds": MODEL_DATA_DOWNLOAD_TIMEOUT_S,
            # Real-time requests are routed per request; an asynchronous endpoint hands its queue out
            # up to max_concurrent_invocations_per_instance per instance itself.
            "routing_strategy": None if args.async_inference is not None else ROUTING_STRATEGY,
        }
        async_fields = args.async_inference.fields() if args.async_inference is not None else None
        count: pulumi.Input[int] = args.initial_instance_count
        self.capacity = None
        if args.capacity_function is not None:
            from speech.infra.components.guard import initial_count

            # Re-read whenever a new endpoint configuration is made, and only then: the same
            # configuration keeps the count it was made with.
            self.capacity = aws.lambda_.Invocation(
                f"{name}-capacity",
                function_name=args.capacity_function,
                input=json.dumps({"action": "desired_count", "endpoint_name": args.endpoint_name, "variant": VARIANT,
                                  "floor": args.initial_instance_count,
                                  "ceiling": args.capacity_ceiling or args.initial_instance_count}),
                triggers=capacity_triggers(variant, async_fields),
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.endpoint_depends_on),
            )
            floor, ceiling = args.initial_instance_count, args.capacity_ceiling or args.initial_instance_count
            count = self.capacity.result.apply(lambda r: initial_count(r, floor, ceiling))
            pulumi.log.info(replacement_note(args.endpoint_name, args.instance_type, None), self)
        routing = variant["routing_strategy"]
        self.endpoint_configuration = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[
                aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                    variant_name=variant["variant_name"],
                    model_name=variant["model_name"],
                    instance_type=variant["instance_type"],
                    initial_instance_count=count,
                    initial_variant_weight=variant["initial_variant_weight"],
                    container_startup_health_check_timeout_in_seconds=variant[
                        "container_startup_health_check_timeout_in_seconds"],
                    inference_ami_version=variant["inference_ami_version"],
                    model_data_download_timeout_in_seconds=variant["model_data_download_timeout_in_seconds"],
                    routing_configs=None if routing is None else [
                        aws.sagemaker.EndpointConfigurationProductionVariantRoutingConfigArgs(routing_strategy=routing)
                    ],
                )
            ],
            async_inference_config=args.async_inference.args() if args.async_inference is not None else None,
            tags=args.tags,
            opts=child,
        )
        rollback = None
        if args.rollback_alarm_names:
            rollback = aws.sagemaker.EndpointDeploymentConfigAutoRollbackConfigurationArgs(
                alarms=[
                    aws.sagemaker.EndpointDeploymentConfigAutoRollbackConfigurationAlarmArgs(alarm_name=a)
                    for a in args.rollback_alarm_names
                ]
            )
        self.endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint",
            name=args.endpoint_name,
            endpoint_config_name=self.endpoint_configuration.name,
            deployment_config=aws.sagemaker.EndpointDeploymentConfigArgs(
                blue_green_update_policy=aws.sagemaker.EndpointDeploymentConfigBlueGreenUpdatePolicyArgs(
                    traffic_routing_configuration=aws.sagemaker.EndpointDeploymentConfigBlueGreenUpdatePolicyTrafficRoutingConfigurationArgs(
                        type="CANARY",
                        wait_interval_in_seconds=CANARY_WAIT_S,
                        canary_size=aws.sagemaker.EndpointDeploymentConfigBlueGreenUpdatePolicyTrafficRoutingConfigurationCanarySizeArgs(
                            type="CAPACITY_PERCENT", value=CANARY_PERCENT
                        ),
                    ),
                    termination_wait_in_seconds=TERMINATION_WAIT_S,
                    maximum_execution_timeout_in_seconds=3600,
                ),
                auto_rollback_configuration=rollback,
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.endpoint_depends_on),
        )
        self.register_outputs({"endpoint_name": self.endpoint.name, "endpoint_arn": self.endpoint.arn})
