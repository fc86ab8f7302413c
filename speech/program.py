"""The Pulumi program: stack config -> plan (build_plan) -> gate -> components -> outputs.

``__main__.py`` calls :func:`main`; the offline preview and the tests call :func:`define_stack`
under Pulumi's mocks, so all three run exactly this code.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from .components import (
    Autoscaling,
    AutoscalingArgs,
    Endpoint,
    EndpointArgs,
    Foundation,
    FoundationArgs,
    ModelCache,
    ModelCacheArgs,
    Observability,
    ObservabilityArgs,
)
from .components.endpoint import container_environment
from .components.guard import ScalingGuard, ScalingGuardArgs
from .components.image import ContainerImage, ContainerImageArgs, context_tag
from .config import ECR_REPO_RE, StackConfig
from .errors import SpeechError
from .gate import ModelDeployment, image_matches_measurements, plan_model
from .hosting import endpoint_name as checked_endpoint_name
from .scaling import resource_id, surge_adjustment
from .hosting import startup_health_check_timeout_s
from .provenance import TAG_MODEL, provenance_tags
from .stack import load_stack_config
from .weights import cache_inputs, cache_key, weights_layout


def endpoint_name(model: str) -> str:
    return checked_endpoint_name(pulumi.get_stack(), model)


def plan_stack(config: StackConfig) -> dict[str, ModelDeployment]:
    """Plan and gate every model before creating anything: a bad model stops the whole preview."""
    deployments = {
        name: plan_model(name, model, endpoint=endpoint_name(name), allow_config_mismatch=config.allow_config_mismatch)
        for name, model in config.models.items()
    }
    for name, dep in deployments.items():
        endpoint_name(name)
        weights_layout(dep.config.weights_source, f"speech-endpoints:models.{name}.weights_source")
    return deployments


def repository_arn(repository: str) -> str:
    """ARN of an ECR repository from its URI (``<account>.dkr.ecr.<region>.amazonaws.com/<name>``)."""
    m = ECR_REPO_RE.match(repository)
    assert m is not None  # ModelConfig validated it
    partition = "aws-cn" if repository.split("/", 1)[0].endswith(".cn") else "aws"
    return f"arn:{partition}:ecr:{m.group('region')}:{m.group('account')}:repository/{m.group('name')}"


def deploy_model(dep: ModelDeployment, account_id: pulumi.Input[str], region: pulumi.Input[str],
                 allow_config_mismatch: bool = False) -> pulumi.Output[dict]:
    """All resources of one model; returns its stack output (a dict)."""
    name, cfg, plan = dep.name, dep.config, dep.plan
    ep_name = endpoint_name(name)
    layout = weights_layout(cfg.weights_source, f"speech-endpoints:models.{name}.weights_source")
    inputs = cache_inputs()
    key = cache_key(layout, inputs)
    base_tags = {TAG_MODEL: name, "speech:stack": pulumi.get_stack()}
    tags = (
        {**base_tags, **provenance_tags(name, plan, dep.document_text, cfg.measurements)}
        if plan is not None and dep.document_text is not None and cfg.measurements is not None
        else base_tags
    )

    foundation = Foundation(
        name,
        FoundationArgs(model=name, endpoint_name=ep_name, account_id=account_id, region=region, tags=base_tags,
                       image_repository_arn=repository_arn(cfg.image_repository) if cfg.image_repository else None),
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
        built = ContainerImage(f"{name}-image", ContainerImageArgs(repository=foundation.repository, tag=context_tag()))
        image_digest = built.digest

        def checked(uri_digest: list[str]) -> str:
            # Runs once the push is done (or in a preview of an unchanged image): before the Model.
            problem = image_matches_measurements(name, plan, dep.gate.enabled, uri_digest[1],
                                                 allow_config_mismatch=allow_config_mismatch)
            if problem:
                raise pulumi.RunError(f"ConfigError: {problem}")
            return uri_digest[0]

        image = pulumi.Output.all(built.uri, built.digest).apply(checked)

    observability = Observability(
        f"{name}-obs",
        ObservabilityArgs(model=name, endpoint_name=ep_name, region=region, plan=plan, slo_ms=cfg.plan.slo_ms, tags=base_tags),
    )
    guard = ScalingGuard(
        f"{name}-scaling-guard",
        ScalingGuardArgs(endpoint_name=ep_name, resource_id=resource_id(ep_name), instance_type=cfg.instance_type,
                         account_id=account_id, region=region, tags=base_tags),
    )
    endpoint = Endpoint(
        name,
        EndpointArgs(
            endpoint_name=ep_name,
            image=image,
            role_arn=foundation.role.arn,
            model_data_s3_uri=weights_s3_uri,
            instance_type=cfg.instance_type,
            initial_instance_count=dep.min_instances,
            environment=container_environment(name, cfg, plan, backend=layout.backend, image_digest=image_digest),
            startup_health_check_timeout_s=startup_health_check_timeout_s(
                cfg.measurements.ttotal if cfg.measurements is not None else None
            ),
            rollback_alarm_names=observability.rollback_alarm_names,
            tags=tags,
            depends_on=[cache.invocation, foundation.role_policy],
            endpoint_depends_on=[guard.invocation],
        ),
    )

    if dep.gate.enabled and plan is not None:
        Autoscaling(name, AutoscalingArgs(endpoint_name=ep_name, plan=plan, instance_type=cfg.instance_type, tags=tags,
                                          depends_on=[endpoint.endpoint]))
    else:
        pulumi.log.warn(f"{name}: no autoscaling: {dep.gate.reason}")

    out: dict[str, Any] = {
        "endpoint_name": endpoint.endpoint.name,
        "endpoint_arn": endpoint.endpoint.arn,
        "image": image,
        "image_repository_url": foundation.repository.repository_url if foundation.repository else cfg.image_repository,
        "weights_s3_uri": weights_s3_uri,
        "backend": layout.backend,
        "instance_type": cfg.instance_type,
        "slo_ms": cfg.plan.slo_ms,
        "gate": {"enabled": dep.gate.enabled, "reason": dep.gate.reason},
    }
    if plan is not None:
        # Q_max 0 (nothing met the SLO) is a stop plan without a surge step to show.
        step = surge_adjustment(plan) if plan.thresholds.c_scale_max > 0 else None
        out.update(
            {
                "q_max": plan.q_max,
                "t_total_planning_s": plan.t_total.planning_s,
                "t_total_measured_s": plan.t_total.measured_s,
                "thresholds": plan.thresholds.model_dump(),
                "cooldowns": plan.cooldowns.model_dump(),
                "fleet": plan.fleet.model_dump(),
                "queue_max_depth": plan.queue_max_depth,
                "alarms": plan.alarms.model_dump(),
                "surge_step": {"percent": step.percent, "min_instances_added": step.min_instances_added} if step else None,
                "origin": plan.provenance.origin,
                "verdict": plan.verdict,
                "findings": [f.model_dump() for f in plan.findings],
                "provenance_key": dep.document_key,
            }
        )
    else:
        out.update({"verdict": "unmeasured", "findings": []})
    return pulumi.Output.from_input(out)


def define_stack(config: StackConfig) -> dict[str, pulumi.Output[dict]]:
    """Create every model's resources and export one dict output per model."""
    deployments = plan_stack(config)
    account_id = aws.get_caller_identity_output().account_id
    region = aws.get_region_output().region
    outputs = {}
    for name, dep in deployments.items():
        outputs[name] = deploy_model(dep, account_id, region, allow_config_mismatch=config.allow_config_mismatch)
        pulumi.export(name, outputs[name])
    return outputs


def main() -> None:
    """Entry point of ``pulumi preview/up``: user mistakes end as one clean line, no traceback."""
    try:
        define_stack(load_stack_config())
    except SpeechError as err:
        raise pulumi.RunError(f"{err.__class__.__name__}: {err}") from None
