"""One model of the stack as one component: :class:`SpeechModel` composes everything a model
deploys (docs/sagemaker.md, "What the stack deploys for a model"):

1. its foundation (bucket, execution role, repository), the provenance document and the receipts
   read from the bucket (:mod:`speech.infra.receipts`);
2. the weights cache and the image (built, or the one the stack names);
3. its observability (dashboard, alarms);
4. the hosting: a variant (real-time or asynchronous) with its scaling guard and scaling, or an
   inference component with copy scaling;
5. the clients' invoke role and policy, and the model's parts of the stack outputs.

Every component and resource the model owns is its child. They were the stack's own children
before this component existed, so each carries an alias to its old parent, the root stack: the
engine then finds every deployed resource at its old URN and moves it under the model instead of
replacing it. The engine derives the aliases of their own children (a URN holds every ancestor's
type) from these (pulumi/pulumi#9734, computed by the engine since #10819); Pulumi's mocks put only
the parent's type in a URN, so there the grandchildren keep theirs unchanged (tests/speech/infra/test_urns.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from speech.deploy.gate import GateDecision, ModelDeployment, image_matches_measurements
from speech.deploy.hosting import startup_health_check_timeout_s
from speech.deploy.iam import account_trust_policy, async_invoke_policy, invoke_endpoint_policy
from speech.deploy.outputs import async_output, batch_scaling_output, endpoint_output, scaling_output
from speech.deploy.provenance import TAG_MODEL, provenance_tags
from speech.deploy.receipts import ReceiptClaim, receipt_claims
from speech.deploy.scaling import ComponentScalingSpec, InstanceScalingSpec, component_scaling_spec, resource_id
from speech.deploy.weights import cache_inputs, cache_key, layout_for_instance
from speech.infra.components.autoscaling import AsyncScaling, AsyncScalingArgs, Autoscaling, AutoscalingArgs
from speech.infra.components.batch_io import BatchIO, BatchIOArgs
from speech.infra.components.cache import ModelCache, ModelCacheArgs
from speech.infra.components.endpoint import AsyncInference, Endpoint, EndpointArgs, container_environment
from speech.infra.components.foundation import Foundation, FoundationArgs
from speech.infra.components.guard import ScalingGuard, ScalingGuardArgs
from speech.infra.components.image import ContainerImage, ContainerImageArgs, context_tag, dockerfile_for
from speech.infra.components.inference import ComponentEndpoint, ComponentEndpointArgs, CopyAutoscaling, CopyAutoscalingArgs
from speech.infra.components.observability import Observability, ObservabilityArgs
from speech.infra.receipts import ReceiptRead, bucket_once_created, gate_after_receipts, read_receipts
from speech.schema.config import ECR_REPO_RE
from speech.schema.receipts import RECEIPT_TAGS

MODEL_TYPE = "speech:index:SpeechModel"


def repository_arn(repository: str) -> str:
    """ARN of an ECR repository from its URI (``<account>.dkr.ecr.<region>.amazonaws.com/<name>``)."""
    m = ECR_REPO_RE.match(repository)
    assert m is not None  # ModelConfig validated it
    partition = "aws-cn" if repository.split("/", 1)[0].endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{m.group('region')}:{m.group('account')}:repository/{m.group('name')}"


def component_environment(env: dict[str, pulumi.Input[str]], spec: ComponentScalingSpec) -> dict[str, pulumi.Input[str]]:
    """A copy's environment: ``CPU_CORES`` is the component's NumberOfCpuCoresRequired, the cores
    SageMaker reserves for one copy; the container sizes its engine and threads from it (it would
    otherwise see the host's cores and run every packed copy on all of them). Fractional values are
    passed as they are (the container rounds down, at least 1). A variant (one container per
    instance) gets none: its container owns the instance, and the affinity and cgroup it reads are
    the instance's vCPUs, with no table of ours to drift from the host. Without a measured CPU use
    the component reserves no cores, and none are set."""
    cores = spec.compute.cpu_cores
    return {**env, "CPU_CORES": f"{cores:g}"} if cores else env


@dataclass
class ModelOutputs:
    """One model's parts of the stack outputs (speech.deploy.outputs)."""

    endpoint: pulumi.Output[dict]
    scaling: dict | pulumi.Output[dict]
    dashboard: pulumi.Output[dict]
    alarms: pulumi.Output[dict]
    gate: GateDecision | pulumi.Output[GateDecision] | None = None
    """The final gate: the config gate, then the receipts once read (an Output while they are)."""


@dataclass
class SpeechModelArgs:
    """One model's deployment (planned and gated by speech.deploy.gate) and what it shares with the
    stack's other models."""

    deployment: ModelDeployment
    endpoint_name: str
    """The SageMaker endpoint's name (speech.deploy.hosting.endpoint_name of the stack and model)."""
    account_id: pulumi.Input[str]
    region: pulumi.Input[str]
    topic_arn: pulumi.Input[str]
    """The stack's alarm topic (speech.infra.components.observability.AlarmTopic)."""
    allow_config_mismatch: bool = False
    native: pulumi.ProviderResource | None = None
    """pulumi-aws-native, in pulumi-aws's region: needed by ``hosting: components`` only."""


@dataclass
class HostingArgs:
    """What every hosting (a variant, an inference component) builds on: the model's foundation,
    image, weights, tags and observability, and the receipts read for its gate."""

    image: pulumi.Input[str]
    image_digest: pulumi.Input[str]
    backend: str
    """The backend the weights' layout needs (speech.deploy.weights.layout_for_instance)."""
    foundation: Foundation
    weights_s3_uri: pulumi.Input[str]
    cache: ModelCache
    observability: Observability
    tags: dict[str, pulumi.Input[str]]
    """The endpoint's tags: the model and stack, provenance, and the receipts read."""
    base_tags: dict[str, str]
    """Every other resource's tags: the model and stack."""
    claims: list[ReceiptClaim]
    reads: dict[str, pulumi.Output[ReceiptRead]]


def _scaling_of(gate: GateDecision | pulumi.Output[GateDecision],
                output: Callable[[GateDecision], dict]) -> dict | pulumi.Output[dict]:
    """``scaling.<model>`` from the final gate, resolved or still to be read."""
    return gate.apply(output) if isinstance(gate, pulumi.Output) else output(gate)


class SpeechModel(pulumi.ComponentResource):
    """All resources of one model; :attr:`outputs` holds its parts of the stack outputs."""

    outputs: ModelOutputs

    def __init__(self, name: str, args: SpeechModelArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(MODEL_TYPE, name, None, opts)
        self._args = args
        hosting = self._foundation_image_and_observability()
        cfg = args.deployment.config
        self.outputs = self._components(hosting) if cfg.hosting == "components" else self._variant(hosting)
        self.register_outputs({"endpoint": self.outputs.endpoint, "dashboard": self.outputs.dashboard,
                               "alarms": self.outputs.alarms})

    def _child(self) -> pulumi.ResourceOptions:
        """Options of a direct child: this model as its parent, and the alias that finds it where it was
        deployed before there was a model component (the root stack's child)."""
        return pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)])

    def _foundation_image_and_observability(self) -> HostingArgs:
        """The parts every hosting builds on (:class:`HostingArgs`), created in this order: foundation,
        provenance document, receipt reads, weights cache, image, observability."""
        args = self._args
        dep, ep_name = args.deployment, args.endpoint_name
        name, cfg, plan = dep.name, dep.config, dep.plan
        layout = layout_for_instance(cfg.instance_type, cfg.weights_source, f"speech-endpoints:models.{name}")
        inputs = cache_inputs()
        key = cache_key(layout, inputs)
        base_tags = {TAG_MODEL: name, "speech:stack": pulumi.get_stack()}
        any_plan = plan if plan is not None else dep.batch
        tags: dict[str, pulumi.Input[str]] = (
            {**base_tags, **provenance_tags(name, any_plan, dep.document_text, cfg.measurements)}
            if any_plan is not None and dep.document_text is not None and cfg.measurements is not None
            else dict(base_tags)
        )

        foundation = Foundation(
            name,
            FoundationArgs(model=name, endpoint_name=ep_name, account_id=args.account_id, region=args.region,
                           tags=base_tags,
                           image_repository_arn=repository_arn(cfg.image_repository) if cfg.image_repository else None,
                           # The component is named like its endpoint (component_scaling_spec); its copies log there.
                           inference_component=ep_name if cfg.hosting == "components" else None),
            self._child(),
        )
        if dep.document_key is not None:
            # The policy pack reads this object to recompute the plan and compare it with what deploys.
            aws.s3.BucketObjectv2(
                f"{name}-provenance",
                bucket=foundation.bucket.id,
                key=dep.document_key,
                content=dep.document_text,
                content_type="application/json",
                tags={TAG_MODEL: name},
                opts=pulumi.ResourceOptions(parent=foundation),
            )
        # Measured SageMaker artifacts: their receipts, read from the bucket, tag the endpoint (the pack
        # compares them) and decide the gate (the hosting's scale()).
        claims = (receipt_claims(cfg.measurements, cfg.measured_on)
                  if (plan is not None or dep.batch is not None) and cfg.measurements else [])
        reads = read_receipts(claims, bucket_once_created(foundation.bucket))
        tags = {**tags, **{RECEIPT_TAGS[kind]: r.apply(lambda v: v[0]) for kind, r in reads.items()}}
        cache_args = ModelCacheArgs(
            model=name,
            layout=layout,
            inputs=inputs,
            cache_key=key,
            bucket_name=foundation.bucket.bucket,
            bucket_arn=foundation.bucket.arn,
            weights_root=foundation.weights_prefix,
            account_id=args.account_id,
            region=args.region,
            tags=base_tags,
        )
        cache = ModelCache(f"{name}-cache", cache_args, self._child())
        weights_s3_uri = pulumi.Output.concat("s3://", foundation.bucket.bucket, f"/{cache_args.weights_prefix}/")

        if cfg.image is not None:
            image: pulumi.Input[str] = cfg.image
            image_digest: pulumi.Input[str] = cfg.image_digest or ""
        else:
            assert foundation.repository is not None
            # The image of the backend the weights need: CUDA torch (Dockerfile) or onnxruntime (Dockerfile.cpu).
            tag = context_tag(dockerfile_for(layout.backend))
            built = ContainerImage(f"{name}-image", ContainerImageArgs(repository=foundation.repository, tag=tag,
                                                                      backend=layout.backend), self._child())
            image_digest = built.digest

            def checked(uri_digest: list[str]) -> str:
                # Runs once the push is done (or in a preview of an unchanged image): before the Model.
                problem = image_matches_measurements(name, plan, dep.gate.enabled, uri_digest[1],
                                                     allow_config_mismatch=args.allow_config_mismatch,
                                                     dockerfile=dockerfile_for(layout.backend))
                if problem:
                    raise pulumi.RunError(f"ConfigError: {problem}")
                return uri_digest[0]

            image = pulumi.Output.all(built.uri, built.digest).apply(checked)

        observability = Observability(
            f"{name}-obs",
            ObservabilityArgs(model=name, endpoint_name=ep_name, region=args.region, plan=plan, slo_ms=cfg.plan.slo_ms,
                              topic_arn=args.topic_arn, hosting=cfg.hosting, tags=base_tags),
            self._child(),
        )
        return HostingArgs(image=image, image_digest=image_digest, backend=layout.backend, foundation=foundation,
                           weights_s3_uri=weights_s3_uri, cache=cache, observability=observability, tags=tags,
                           base_tags=base_tags, claims=claims, reads=reads)

    # --- hosting: a variant (real-time or asynchronous) ------------------------------------------------

    def _variant(self, h: HostingArgs) -> ModelOutputs:
        """A production variant, real-time or asynchronous (``hosting: async``), with its scaling
        guard (the kept instance count across updates) and, when the gate opens, its scaling."""
        args = self._args
        dep, ep_name = args.deployment, args.endpoint_name
        name, cfg, plan = dep.name, dep.config, dep.plan
        guard = ScalingGuard(
            f"{name}-scaling-guard",
            ScalingGuardArgs(endpoint_name=ep_name, resource_id=resource_id(ep_name), instance_type=cfg.instance_type,
                             account_id=args.account_id, region=args.region, tags=h.base_tags),
            self._child(),
        )
        batch_io = None
        if cfg.hosting == "async":
            batch_io = BatchIO(f"{name}-async", BatchIOArgs(model=name, endpoint_name=ep_name,
                                                           bucket_name=h.foundation.bucket.bucket,
                                                           bucket_arn=h.foundation.bucket.arn,
                                                           role_id=h.foundation.role.id,
                                                           max_delay_s=cfg.plan.max_delay_s, topic_arn=args.topic_arn,
                                                           tags=h.base_tags),
                               self._child())
        max_concurrent = dep.batch.max_concurrent_invocations_per_instance if dep.batch is not None else None
        keep_capacity = batch_io is None and plan is not None and dep.gate.enabled
        environment = container_environment(name, cfg, plan, backend=h.backend, image_digest=h.image_digest,
                                            endpoint_name=ep_name)
        if batch_io is not None:
            # /invocations answers an asynchronous request with one complete WAV (container ASYNC_INFERENCE);
            # SageMaker hands an instance at most Q_max at once, so the admission queue is Q_max too.
            environment["ASYNC_INFERENCE"] = "true"
            if max_concurrent is not None:
                environment["QUEUE_MAX_DEPTH"] = str(max_concurrent)
        endpoint = Endpoint(
            name,
            EndpointArgs(
                endpoint_name=ep_name,
                image=h.image,
                role_arn=h.foundation.role.arn,
                model_data_s3_uri=h.weights_s3_uri,
                instance_type=cfg.instance_type,
                initial_instance_count=dep.min_instances,
                environment=environment,
                # A real-time route that scales: each update starts the new fleet with the desired count
                # of the one it replaces (SageMaker starts it at the configuration's initial count).
                capacity_function=guard.function.name if keep_capacity else None,
                capacity_ceiling=plan.fleet.max_instances if keep_capacity and plan is not None else None,
                startup_health_check_timeout_s=startup_health_check_timeout_s(
                    cfg.measurements.ttotal if cfg.measurements is not None else None
                ),
                rollback_alarm_names=h.observability.rollback_alarm_names,
                tags=h.tags,
                # A batch route's model needs its async permissions (output prefix, topics) before it serves.
                depends_on=[h.cache.invocation, h.foundation.role_policy] + ([batch_io.role_policy] if batch_io else []),
                endpoint_depends_on=[guard.invocation],
                async_inference=None if batch_io is None else AsyncInference(
                    s3_output_path=batch_io.s3_output_path, s3_failure_path=batch_io.s3_failure_path,
                    success_topic_arn=batch_io.success_topic.arn, error_topic_arn=batch_io.error_topic.arn,
                    max_concurrent_invocations_per_instance=max_concurrent),
            ),
            self._child(),
        )

        def scale(decision: GateDecision, scaling_tags: dict) -> GateDecision:
            if decision.enabled and dep.batch is not None:
                AsyncScaling(name, AsyncScalingArgs(endpoint_name=ep_name, plan=dep.batch, instance_type=cfg.instance_type,
                                                    tags=scaling_tags, depends_on=[endpoint.endpoint]),
                             self._child())
            elif decision.enabled and plan is not None:
                Autoscaling(name, AutoscalingArgs(endpoint_name=ep_name, plan=plan, instance_type=cfg.instance_type,
                                                  tags=scaling_tags, depends_on=[endpoint.endpoint]),
                            self._child())
            else:
                pulumi.log.warn(f"{name}: no autoscaling: {decision.reason}")
            return decision

        final = gate_after_receipts(dep, h.claims, h.reads, h.tags, scale)

        def scaling_of(g: GateDecision) -> dict:
            return (batch_scaling_output(g, dep.batch, dep.document_key, dep.budget) if dep.batch is not None
                    else scaling_output(g, plan, dep.document_key, budget=dep.budget))

        return self._client_access_and_outputs(h, endpoint.endpoint, gate=final, scaling=_scaling_of(final, scaling_of),
                                               batch_io=batch_io, max_concurrent=max_concurrent)

    # --- hosting: an inference component --------------------------------------------------------------

    def _components(self, h: HostingArgs) -> ModelOutputs:
        """``hosting: components``: the endpoint with managed instance scaling, the model as an inference
        component sized by the copy plan, and copy scaling when the gate is open (docs/design.md §5.8)."""
        args = self._args
        dep, ep_name = args.deployment, args.endpoint_name
        name, cfg, plan, cp = dep.name, dep.config, dep.plan, dep.copy_plan
        assert cp is not None and args.native is not None  # ModelConfig requires tcopy; define_stack made the provider
        spec = component_scaling_spec(cp, ep_name)
        if not dep.gate.enabled:
            # No scaling from a plan the gate refused: the instances stay at the floor, the copies at their start.
            floor = max(1, spec.instances.min_instance_count)
            spec = dataclasses.replace(spec, instances=InstanceScalingSpec(status=spec.instances.status,
                                                                           min_instance_count=floor,
                                                                           max_instance_count=floor))
        component = ComponentEndpoint(
            name,
            ComponentEndpointArgs(
                endpoint_name=ep_name,
                spec=spec,
                image=h.image,
                role_arn=h.foundation.role.arn,
                model_data_s3_uri=h.weights_s3_uri,
                instance_type=cfg.instance_type,
                environment=component_environment(
                    container_environment(name, cfg, plan, backend=h.backend, image_digest=h.image_digest,
                                          endpoint_name=ep_name),
                    spec),
                startup_health_check_timeout_s=startup_health_check_timeout_s(
                    cfg.measurements.ttotal if cfg.measurements is not None else None
                ),
                provider=args.native,
                rollback_alarm_names=h.observability.rollback_alarm_names,
                tags=h.tags,
                depends_on=[h.cache.invocation, h.foundation.role_policy],
            ),
            self._child(),
        )

        def scale(decision: GateDecision, scaling_tags: dict) -> GateDecision:
            if decision.enabled:
                CopyAutoscaling(f"{name}-copies", CopyAutoscalingArgs(spec=spec, tags=scaling_tags,
                                                                      depends_on=[component.inference_component]),
                                self._child())
            else:
                pulumi.log.warn(f"{name}: no copy scaling: {decision.reason}")
            return decision

        final = gate_after_receipts(dep, h.claims, h.reads, h.tags, scale)
        scaling = _scaling_of(final, lambda g: scaling_output(g, plan, dep.document_key, copy_plan=cp, budget=dep.budget))
        return self._client_access_and_outputs(
            h, component.endpoint, gate=final, scaling=scaling,
            inference_component=component.inference_component.inference_component_name)

    # --- the clients' access and the outputs -------------------------------------------------------------

    def _client_access_and_outputs(self, h: HostingArgs, endpoint: aws.sagemaker.Endpoint, *,
                                   gate: GateDecision | pulumi.Output[GateDecision], scaling: dict | pulumi.Output[dict],
                                   inference_component: pulumi.Input[str | None] = None, batch_io: BatchIO | None = None,
                                   max_concurrent: int | None = None) -> ModelOutputs:
        """The clients' invoke role and policy, and the model's parts of the stack outputs."""
        args = self._args
        dep, ep_name = args.deployment, args.endpoint_name
        name, cfg = dep.name, dep.config
        bucket = h.foundation.bucket
        # Clients assume this role (or attach the policy to their own): the two invoke calls on this
        # endpoint's ARN, nothing else.
        if batch_io is None:
            invoke_doc = endpoint.arn.apply(lambda arn: json.dumps(invoke_endpoint_policy(arn)))
            what = "InvokeEndpoint, InvokeEndpointWithResponseStream"
        else:
            prefixes = dict(input_prefix=batch_io.input_prefix, output_prefix=batch_io.output_prefix,
                            failure_prefix=batch_io.failure_prefix)
            invoke_doc = pulumi.Output.all(endpoint.arn, bucket.arn).apply(
                lambda a: json.dumps(async_invoke_policy(endpoint_arn=a[0], bucket_arn=a[1], **prefixes)))
            what = "InvokeEndpointAsync with its S3 request and response prefixes"
        invoke_policy = aws.iam.Policy(
            f"{name}-invoke-policy",
            description=f"Invoke {ep_name} ({what}) and nothing else",
            policy=invoke_doc,
            tags=h.base_tags,
            opts=self._child(),
        )
        invoke_role = aws.iam.Role(
            f"{name}-invoke",
            assume_role_policy=pulumi.Output.from_input(args.account_id).apply(
                lambda a: json.dumps(account_trust_policy(a))),
            description=f"Clients of {ep_name}: invoke it, nothing else",
            tags=h.base_tags,
            opts=self._child(),
        )
        aws.iam.RolePolicyAttachment(f"{name}-invoke-attachment", role=invoke_role.name, policy_arn=invoke_policy.arn,
                                     opts=self._child())

        async_io: pulumi.Input[dict | None] = None
        if batch_io is not None:
            async_io = pulumi.Output.all(bucket.bucket, batch_io.success_topic.arn, batch_io.error_topic.arn).apply(
                lambda v: async_output(bucket=v[0], input_prefix=batch_io.input_prefix,
                                       output_prefix=batch_io.output_prefix, failure_prefix=batch_io.failure_prefix,
                                       success_topic_arn=v[1], error_topic_arn=v[2],
                                       max_concurrent_invocations_per_instance=max_concurrent))
        endpoint_out = pulumi.Output.all(endpoint.name, endpoint.arn, args.region, invoke_role.arn,
                                         invoke_policy.arn, h.image, inference_component, async_io, bucket.bucket).apply(
            lambda v: endpoint_output(name=v[0], arn=v[1], region=v[2], invoke_role_arn=v[3], invoke_policy_arn=v[4],
                                      instance_type=cfg.instance_type, image=v[5], hosting=cfg.hosting,
                                      inference_component=v[6], async_io=v[7], provenance_bucket=v[8]))
        alarm_names = {k: a.name for k, a in h.observability.alarms.items()}
        if batch_io is not None and batch_io.delay_alarm is not None:
            alarm_names["batch_delay"] = batch_io.delay_alarm.name
        alarms = pulumi.Output.all(**alarm_names)
        dashboard = pulumi.Output.all(name=h.observability.dashboard.dashboard_name, url=h.observability.dashboard_url)
        return ModelOutputs(endpoint=endpoint_out, scaling=scaling, dashboard=dashboard, alarms=alarms, gate=gate)
