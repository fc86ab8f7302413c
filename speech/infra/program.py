"""The Pulumi program: stack config -> plan (build_plan) -> gate -> components -> outputs.

``__main__.py`` calls :func:`main`; the offline preview and the tests call :func:`define_stack`
under Pulumi's mocks, so all three run exactly this code.
"""

from __future__ import annotations

import asyncio
from typing import cast
import dataclasses
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from speech.infra.components import (
    Autoscaling, AutoscalingArgs, Endpoint, EndpointArgs, Foundation, FoundationArgs, ModelCache, ModelCacheArgs, Observability,
    ObservabilityArgs,
)
from speech.infra.components.autoscaling import AsyncScaling, AsyncScalingArgs
from speech.infra.components.batch_io import BatchIO, BatchIOArgs
from speech.infra.components.endpoint import AsyncInference, container_environment
from speech.deploy.iam import account_trust_policy, async_invoke_policy, invoke_endpoint_policy
from speech.infra.components.inference import (
    ComponentEndpoint, ComponentEndpointArgs, CopyAutoscaling, CopyAutoscalingArgs, native_provider,
)
from speech.infra.components.observability import AlarmTopic, AlarmTopicArgs
from speech.infra.components.guard import ScalingGuard, ScalingGuardArgs
from speech.infra.components.image import ContainerImage, ContainerImageArgs, context_tag, dockerfile_for
from speech.schema.config import ECR_REPO_RE, StackConfig
from speech.errors import SpeechError
from speech.deploy.gate import GateDecision, ModelDeployment, apply_budget, image_matches_measurements, plan_model, with_receipts
from speech.deploy.hosting import endpoint_name as checked_endpoint_name
from speech.deploy.scaling import InstanceScalingSpec, component_scaling_spec, resource_id
from speech.deploy.hosting import startup_health_check_timeout_s
from speech.deploy.outputs import (
    OUTPUTS_VERSION, async_output, batch_scaling_output, endpoint_output, observability_output, scaling_output,
)
from speech.deploy.provenance import TAG_MODEL, provenance_tags
from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR
from speech.schema.receipts import NO_RECEIPT, RECEIPT_TAGS
from speech.deploy.receipts import ReceiptClaim, read_receipt, receipt_claims, receipt_problem
from speech.infra.stack_config import load_stack_config
from speech.deploy.weights import cache_inputs, cache_key, layout_for_instance


def endpoint_name(model: str) -> str:
    return checked_endpoint_name(pulumi.get_stack(), model)


def plan_stack(config: StackConfig) -> dict[str, ModelDeployment]:
    """Plan and gate every model before creating anything: a bad model stops the whole preview.
    With a daily budget, each model's fleet is capped at its allocation (speech.deploy.gate.apply_budget)."""
    deployments = {
        name: plan_model(name, model, endpoint=endpoint_name(name), allow_config_mismatch=config.allow_config_mismatch)
        for name, model in config.models.items()
    }
    deployments, _ = apply_budget(deployments, config, endpoints={name: endpoint_name(name) for name in deployments})
    prices = config.budget.prices() if config.budget is not None else DEFAULT_PRICES_USD_PER_HOUR
    for name, dep in deployments.items():
        endpoint_name(name)
        # The weights decide the backend, the instance decides which backend it can run: both, now.
        layout_for_instance(dep.config.instance_type, dep.config.weights_source, f"speech-endpoints:models.{name}",
                            prices)
    return deployments


def repository_arn(repository: str) -> str:
    """ARN of an ECR repository from its URI (``<account>.dkr.ecr.<region>.amazonaws.com/<name>``)."""
    m = ECR_REPO_RE.match(repository)
    assert m is not None  # ModelConfig validated it
    partition = "aws-cn" if repository.split("/", 1)[0].endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{m.group('region')}:{m.group('account')}:repository/{m.group('name')}"


@dataclass
class ModelOutputs:
    """One model's parts of the stack outputs (speech.deploy.outputs)."""

    endpoint: pulumi.Output[dict]
    scaling: dict | pulumi.Output[dict]
    dashboard: pulumi.Output[dict]
    alarms: pulumi.Output[dict]
    gate: GateDecision | pulumi.Output[GateDecision] | None = None
    """The final gate: the config gate, then the receipts once read (an Output while they are)."""


async def _invoke_data_source(token: str, args: dict) -> tuple[dict | None, bool]:
    """(result, known) of one data source, its failure raised to the caller (who turns it into a
    reason) instead of failing the program. The output form of an invoke (``get_objects_output``)
    would fail the whole program when the provider errors (every Output is awaited at the end);
    the plain form (``invoke_async``) does not declare its inputs' dependencies, so the engine would
    answer a bucket still to be created with a read that fails, not with "unknown". So the SDK's
    own invoke is called with the output form's dependency check (pulumi.runtime.invoke._invoke,
    check_dependencies=True): unknown while a dependency is pending creation, errors raised here."""
    from pulumi.runtime.invoke import _invoke

    result = await _invoke(token, args, pulumi.InvokeOutputOptions(), None, None, check_dependencies=True)
    return (result.value if result.is_known else None), bool(result.is_known)


def _read_receipt_object(claim: ReceiptClaim, bucket: pulumi.Input[str]) -> pulumi.Output[tuple]:
    """(tag value, why, bucket name) of one claim, read with the S3 data sources in the artifact's
    own region. A read that fails (no such bucket, another account's, another region's, access
    denied) is no receipt, with the provider's error as the reason: the gate then says
    receipt_missing and the preview goes on, where the failed data source used to fail the whole
    preview. A read the engine answers unknown (the bucket is created in this update) stays unknown."""
    region = {"region": claim.artifact.provenance.region} if claim.artifact.provenance.region else {}

    async def read() -> tuple[tuple | None, bool]:
        try:
            found, known = await _invoke_data_source("aws:s3/getObjects:getObjects",
                                                     {"bucket": bucket, "prefix": claim.key, **region})
            if not known or found is None:
                return None, False
            name = found.get("bucket")
            if claim.key not in (found.get("keys") or []):
                return (NO_RECEIPT, None, name), True
            obj, known = await _invoke_data_source("aws:s3/getObject:getObject",
                                                   {"bucket": name, "key": claim.key, **region})
            if not known or obj is None:
                return None, False
            return (*read_receipt(obj.get("body"), claim), name), True
        except Exception as err:  # noqa: BLE001  the SDK raises a failed invoke as a plain Exception
            name = await pulumi.Output.from_input(bucket).future()
            return (NO_RECEIPT, f"the read failed: {err}", name), True

    task = asyncio.ensure_future(read())

    async def value() -> tuple:
        # None while unknown, as inside Pulumi's own Outputs (the known future says which).
        return cast(tuple, (await task)[0])

    async def known() -> bool:
        return (await task)[1]

    return pulumi.Output(set(), value(), known())


def read_receipts(claims: list[ReceiptClaim], own_bucket: pulumi.Input[str]) -> dict[str, pulumi.Output[tuple]]:
    """Per artifact kind: (what was read, why it is not a receipt, bucket name), read with the S3
    data sources at preview (:func:`_read_receipt_object`). The object is listed first: ``getObject``
    on a missing key fails, while a missing receipt must only keep scaling off with its fix. While
    the bucket is still to be created (a new stack's first preview) the engine answers unknown, and
    so is this."""
    reads: dict[str, pulumi.Output[tuple]] = {}
    for claim in claims:
        bucket = claim.bucket or own_bucket
        if claim.key is None:
            reads[claim.kind] = pulumi.Output.from_input(bucket).apply(lambda b: (NO_RECEIPT, None, b))
            continue
        reads[claim.kind] = _read_receipt_object(claim, bucket)
    return reads


def deploy_model(dep: ModelDeployment, account_id: pulumi.Input[str], region: pulumi.Input[str],
                 topic_arn: pulumi.Input[str], allow_config_mismatch: bool = False,
                 native: pulumi.ProviderResource | None = None) -> ModelOutputs:
    """All resources of one model; returns its parts of the stack outputs."""
    name, cfg, plan = dep.name, dep.config, dep.plan
    ep_name = endpoint_name(name)
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
        FoundationArgs(model=name, endpoint_name=ep_name, account_id=account_id, region=region, tags=base_tags,
                       image_repository_arn=repository_arn(cfg.image_repository) if cfg.image_repository else None,
                       # The component is named like its endpoint (component_scaling_spec); its copies log there.
                       inference_component=ep_name if cfg.hosting == "components" else None),
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
    # compares them) and decide the gate (below).
    claims = (receipt_claims(cfg.measurements, cfg.measured_on)
              if (plan is not None or dep.batch is not None) and cfg.measurements else [])
    reads = read_receipts(claims, foundation.bucket.bucket)
    tags = {**tags, **{RECEIPT_TAGS[kind]: r.apply(lambda v: v[0]) for kind, r in reads.items()}}
    cache_args = ModelCacheArgs(
        model=name,
        layout=layout,
        inputs=inputs,
        cache_key=key,
        bucket_name=foundation.bucket.bucket,
        bucket_arn=foundation.bucket.arn,
        weights_root=foundation.weights_prefix,
        account_id=account_id,
        region=region,
        tags=base_tags,
    )
    cache = ModelCache(f"{name}-cache", cache_args)
    weights_s3_uri = pulumi.Output.concat("s3://", foundation.bucket.bucket, f"/{cache_args.weights_prefix}/")

    if cfg.image is not None:
        image: pulumi.Input[str] = cfg.image
        image_digest: pulumi.Input[str] = cfg.image_digest or ""
    else:
        assert foundation.repository is not None
        # The image of the backend the weights need: CUDA torch (Dockerfile) or onnxruntime (Dockerfile.cpu).
        tag = context_tag(dockerfile_for(layout.backend))
        built = ContainerImage(f"{name}-image", ContainerImageArgs(repository=foundation.repository, tag=tag,
                                                                  backend=layout.backend))
        image_digest = built.digest

        def checked(uri_digest: list[str]) -> str:
            # Runs once the push is done (or in a preview of an unchanged image): before the Model.
            problem = image_matches_measurements(name, plan, dep.gate.enabled, uri_digest[1],
                                                 allow_config_mismatch=allow_config_mismatch,
                                                 dockerfile=dockerfile_for(layout.backend))
            if problem:
                raise pulumi.RunError(f"ConfigError: {problem}")
            return uri_digest[0]

        image = pulumi.Output.all(built.uri, built.digest).apply(checked)

    observability = Observability(
        f"{name}-obs",
        ObservabilityArgs(model=name, endpoint_name=ep_name, region=region, plan=plan, slo_ms=cfg.plan.slo_ms,
                          topic_arn=topic_arn, hosting=cfg.hosting, tags=base_tags),
    )
    if cfg.hosting == "components":
        return _deploy_components(dep, ep_name=ep_name, image=image, image_digest=image_digest, role_arn=foundation.role.arn,
                                  weights_s3_uri=weights_s3_uri, backend=layout.backend, tags=tags, base_tags=base_tags,
                                  observability=observability, depends_on=[cache.invocation, foundation.role_policy],
                                  region=region, account_id=account_id, native=native, claims=claims, reads=reads,
                                  bucket=foundation.bucket)
    guard = ScalingGuard(
        f"{name}-scaling-guard",
        ScalingGuardArgs(endpoint_name=ep_name, resource_id=resource_id(ep_name), instance_type=cfg.instance_type,
                         account_id=account_id, region=region, tags=base_tags),
    )
    batch_io = None
    if cfg.hosting == "async":
        batch_io = BatchIO(f"{name}-async", BatchIOArgs(model=name, endpoint_name=ep_name,
                                                       bucket_name=foundation.bucket.bucket,
                                                       bucket_arn=foundation.bucket.arn, role_id=foundation.role.id,
                                                       max_delay_s=cfg.plan.max_delay_s, topic_arn=topic_arn,
                                                       tags=base_tags))
    max_concurrent = dep.batch.max_concurrent_invocations_per_instance if dep.batch is not None else None
    keep_capacity = batch_io is None and plan is not None and dep.gate.enabled
    environment = container_environment(name, cfg, plan, backend=layout.backend, image_digest=image_digest,
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
            image=image,
            role_arn=foundation.role.arn,
            model_data_s3_uri=weights_s3_uri,
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
            rollback_alarm_names=observability.rollback_alarm_names,
            tags=tags,
            # A batch route's model needs its async permissions (output prefix, topics) before it serves.
            depends_on=[cache.invocation, foundation.role_policy] + ([batch_io.role_policy] if batch_io else []),
            endpoint_depends_on=[guard.invocation],
            async_inference=None if batch_io is None else AsyncInference(
                s3_output_path=batch_io.s3_output_path, s3_failure_path=batch_io.s3_failure_path,
                success_topic_arn=batch_io.success_topic.arn, error_topic_arn=batch_io.error_topic.arn,
                max_concurrent_invocations_per_instance=max_concurrent),
        ),
    )

    def scale(decision: GateDecision, scaling_tags: dict) -> GateDecision:
        if decision.enabled and dep.batch is not None:
            AsyncScaling(name, AsyncScalingArgs(endpoint_name=ep_name, plan=dep.batch, instance_type=cfg.instance_type,
                                                tags=scaling_tags, depends_on=[endpoint.endpoint]))
        elif decision.enabled and plan is not None:
            Autoscaling(name, AutoscalingArgs(endpoint_name=ep_name, plan=plan, instance_type=cfg.instance_type,
                                              tags=scaling_tags, depends_on=[endpoint.endpoint]))
        else:
            pulumi.log.warn(f"{name}: no autoscaling: {decision.reason}")
        return decision

    final = gate_after_receipts(dep, claims, reads, tags, scale)

    def scaling_of(g: GateDecision) -> dict:
        return (batch_scaling_output(g, dep.batch, dep.document_key, dep.budget) if dep.batch is not None
                else scaling_output(g, plan, dep.document_key, budget=dep.budget))

    return _client_access_and_outputs(dep, endpoint.endpoint, account_id=account_id, region=region, image=image,
                                      base_tags=base_tags, observability=observability, gate=final,
                                      scaling=_scaling_of(final, scaling_of), batch_io=batch_io,
                                      bucket=foundation.bucket, max_concurrent=max_concurrent)


def _client_access_and_outputs(dep: ModelDeployment, endpoint: aws.sagemaker.Endpoint, *, account_id: pulumi.Input[str],
                               region: pulumi.Input[str], image: pulumi.Input[str], base_tags: dict[str, str],
                               observability: Observability, scaling: dict | pulumi.Output[dict],
                               gate: GateDecision | pulumi.Output[GateDecision],
                               bucket: aws.s3.Bucket, inference_component: pulumi.Input[str | None] = None,
                               batch_io: BatchIO | None = None, max_concurrent: int | None = None) -> ModelOutputs:
    """The clients' invoke role and policy, and the model's parts of the stack outputs."""
    name, cfg = dep.name, dep.config
    ep_name = endpoint_name(name)
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
        tags=base_tags,
    )
    invoke_role = aws.iam.Role(
        f"{name}-invoke",
        assume_role_policy=pulumi.Output.from_input(account_id).apply(lambda a: json.dumps(account_trust_policy(a))),
        description=f"Clients of {ep_name}: invoke it, nothing else",
        tags=base_tags,
    )
    aws.iam.RolePolicyAttachment(f"{name}-invoke-attachment", role=invoke_role.name, policy_arn=invoke_policy.arn)

    async_io: pulumi.Input[dict | None] = None
    if batch_io is not None:
        async_io = pulumi.Output.all(bucket.bucket, batch_io.success_topic.arn, batch_io.error_topic.arn).apply(
            lambda v: async_output(bucket=v[0], input_prefix=batch_io.input_prefix, output_prefix=batch_io.output_prefix,
                                   failure_prefix=batch_io.failure_prefix, success_topic_arn=v[1], error_topic_arn=v[2],
                                   max_concurrent_invocations_per_instance=max_concurrent))
    endpoint_out = pulumi.Output.all(endpoint.name, endpoint.arn, region, invoke_role.arn,
                                     invoke_policy.arn, image, inference_component, async_io, bucket.bucket).apply(
        lambda v: endpoint_output(name=v[0], arn=v[1], region=v[2], invoke_role_arn=v[3], invoke_policy_arn=v[4],
                                  instance_type=cfg.instance_type, image=v[5], hosting=cfg.hosting,
                                  inference_component=v[6], async_io=v[7], provenance_bucket=v[8]))
    alarm_names = {k: a.name for k, a in observability.alarms.items()}
    if batch_io is not None and batch_io.delay_alarm is not None:
        alarm_names["batch_delay"] = batch_io.delay_alarm.name
    alarms = pulumi.Output.all(**alarm_names)
    dashboard = pulumi.Output.all(name=observability.dashboard.dashboard_name, url=observability.dashboard_url)
    return ModelOutputs(endpoint=endpoint_out, scaling=scaling, dashboard=dashboard, alarms=alarms, gate=gate)


def _deploy_components(dep: ModelDeployment, *, ep_name: str, image: pulumi.Input[str], image_digest: pulumi.Input[str],
                       role_arn: pulumi.Input[str], weights_s3_uri: pulumi.Input[str], backend: str,
                       tags: dict[str, pulumi.Input[str]], base_tags: dict[str, str], observability: Observability,
                       depends_on: list[pulumi.Resource], region: pulumi.Input[str], account_id: pulumi.Input[str],
                       native: pulumi.ProviderResource | None, claims: list[ReceiptClaim],
                       reads: dict[str, pulumi.Output[tuple]], bucket: aws.s3.Bucket) -> ModelOutputs:
    """``hosting: components``: the endpoint with managed instance scaling, the model as an inference
    component sized by the copy plan, and copy scaling when the gate is open (docs/design.md §5.8)."""
    name, cfg, plan, cp = dep.name, dep.config, dep.plan, dep.copy_plan
    assert cp is not None and native is not None  # ModelConfig requires tcopy; define_stack made the provider
    spec = component_scaling_spec(cp, ep_name)
    if not dep.gate.enabled:
        # No scaling from a plan the gate refused: the instances stay at the floor, the copies at their start.
        floor = max(1, spec.instances.min_instance_count)
        spec = dataclasses.replace(spec, instances=InstanceScalingSpec(status=spec.instances.status,
                                                                       min_instance_count=floor, max_instance_count=floor))
    component = ComponentEndpoint(
        name,
        ComponentEndpointArgs(
            endpoint_name=ep_name,
            spec=spec,
            image=image,
            role_arn=role_arn,
            model_data_s3_uri=weights_s3_uri,
            instance_type=cfg.instance_type,
            environment=component_environment(
                container_environment(name, cfg, plan, backend=backend, image_digest=image_digest, endpoint_name=ep_name),
                spec),
            startup_health_check_timeout_s=startup_health_check_timeout_s(
                cfg.measurements.ttotal if cfg.measurements is not None else None
            ),
            provider=native,
            rollback_alarm_names=observability.rollback_alarm_names,
            tags=tags,
            depends_on=depends_on,
        ),
    )

    def scale(decision: GateDecision, scaling_tags: dict) -> GateDecision:
        if decision.enabled:
            CopyAutoscaling(f"{name}-copies", CopyAutoscalingArgs(spec=spec, tags=scaling_tags,
                                                                  depends_on=[component.inference_component]))
        else:
            pulumi.log.warn(f"{name}: no copy scaling: {decision.reason}")
        return decision

    final = gate_after_receipts(dep, claims, reads, tags, scale)
    return _client_access_and_outputs(dep, component.endpoint, account_id=account_id, region=region, image=image,
                                      bucket=bucket,
                                      base_tags=base_tags, observability=observability, gate=final,
                                      scaling=_scaling_of(final, lambda g: scaling_output(g, plan, dep.document_key,
                                                                                          copy_plan=cp, budget=dep.budget)),
                                      inference_component=component.inference_component.inference_component_name)


def component_environment(env: dict[str, pulumi.Input[str]], spec) -> dict[str, pulumi.Input[str]]:
    """A copy's environment: ``CPU_CORES`` is the component's NumberOfCpuCoresRequired, the cores
    SageMaker reserves for one copy; the container sizes its engine and threads from it (it would
    otherwise see the host's cores and run every packed copy on all of them). Fractional values are
    passed as they are (the container rounds down, at least 1). A variant (one container per
    instance) gets none: its container owns the instance, and the affinity and cgroup it reads are
    the instance's vCPUs, with no table of ours to drift from the host. Without a measured CPU use
    the component reserves no cores, and none are set."""
    cores = spec.compute.cpu_cores
    return {**env, "CPU_CORES": f"{cores:g}"} if cores else env


def gate_after_receipts(dep: ModelDeployment, claims: list[ReceiptClaim], reads: dict[str, pulumi.Output[tuple]],
                        tags: dict, scale) -> GateDecision | pulumi.Output[GateDecision]:
    """Call ``scale`` with the final gate: the config gate, then every receipt (read from the
    bucket) matching its artifact. With receipts to read, scaling is created once they have been
    read (at preview for an existing bucket; at up for one created in the same update), tagged with
    what was read for the pack; without, at once."""
    if not (dep.gate.enabled and reads):
        return scale(dep.gate, tags)
    cfg = dep.config

    def decide(values: dict[str, tuple]) -> GateDecision:
        problems = [p for c in claims if (p := receipt_problem(
            dep.name, c, values[c.kind][0], bucket=values[c.kind][2], stack=pulumi.get_stack(),
            inputs=cfg.plan, max_instances=cfg.max_instances, why=values[c.kind][1]))]
        plain = {**{k: v for k, v in tags.items() if k not in RECEIPT_TAGS.values()},
                 **{RECEIPT_TAGS[k]: v[0] for k, v in values.items()}}
        return scale(with_receipts(dep.gate, problems), plain)

    return pulumi.Output.all(**reads).apply(decide)


def _scaling_of(gate: GateDecision | pulumi.Output[GateDecision], output) -> dict | pulumi.Output[dict]:
    """``scaling.<model>`` from the final gate, resolved or still to be read."""
    return gate.apply(output) if isinstance(gate, pulumi.Output) else output(gate)


def define_stack(config: StackConfig, gates: dict | None = None) -> dict[str, pulumi.Output]:
    """Create every model's resources and export the outputs contract (speech.deploy.outputs, README).

    ``gates``: filled with each model's final gate decision (an Output while receipts are read)."""
    deployments = plan_stack(config)
    account_id = aws.get_caller_identity_output().account_id
    region = aws.get_region_output().region
    topic = AlarmTopic("alarms", AlarmTopicArgs(alerts=config.alerts, account_id=account_id,
                                                tags={"speech:stack": pulumi.get_stack()}))
    # pulumi-aws-native only for the inference components, in pulumi-aws's region.
    native = (native_provider("aws-native", region)
              if any(dep.config.hosting == "components" for dep in deployments.values()) else None)
    parts = {
        name: deploy_model(dep, account_id, region, topic.topic.arn, allow_config_mismatch=config.allow_config_mismatch,
                           native=native)
        for name, dep in deployments.items()
    }
    if gates is not None:
        gates.update({m: p.gate for m, p in parts.items()})
    outputs: dict[str, pulumi.Output] = {
        "outputs_version": pulumi.Output.from_input(OUTPUTS_VERSION),
        "endpoints": pulumi.Output.all(**{m: p.endpoint for m, p in parts.items()}),
        "scaling": pulumi.Output.from_input({m: p.scaling for m, p in parts.items()}),
        "observability": pulumi.Output.all(
            topic.topic.arn,
            pulumi.Output.all(**{m: p.dashboard for m, p in parts.items()}),
            pulumi.Output.all(**{m: p.alarms for m, p in parts.items()}),
        ).apply(lambda v: observability_output(topic_arn=v[0], dashboards=v[1], alarms=v[2])),
    }
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def main() -> None:
    """Entry point of ``pulumi preview/up``: user mistakes end as one clean line, no traceback."""
    try:
        define_stack(load_stack_config())
    except SpeechError as err:
        raise pulumi.RunError(f"{err.__class__.__name__}: {err}") from None
