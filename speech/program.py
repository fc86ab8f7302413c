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
    ModelDeployment,
    Observability,
    ObservabilityArgs,
    plan_model,
)
from .components.autoscaling import surge_adjustment
from .components.endpoint import container_environment
from .config import StackConfig
from .errors import SpeechError
from .provenance import TAG_MODEL, provenance_tags
from .stack import load_stack_config


def endpoint_name(model: str) -> str:
    return f"{pulumi.get_stack()}-{model}"


def plan_stack(config: StackConfig) -> dict[str, ModelDeployment]:
    """Plan and gate every model before creating anything: a bad model stops the whole preview."""
    return {
        name: plan_model(name, model, allow_config_mismatch=config.allow_config_mismatch)
        for name, model in config.models.items()
    }


def deploy_model(dep: ModelDeployment, account_id: pulumi.Input[str], region: pulumi.Input[str]) -> pulumi.Output[dict]:
    """All resources of one model; returns its stack output (a dict)."""
    name, cfg, plan = dep.name, dep.config, dep.plan
    ep_name = endpoint_name(name)
    base_tags = {TAG_MODEL: name, "speech:stack": pulumi.get_stack()}
    tags = (
        {**base_tags, **provenance_tags(name, plan, dep.document_text, cfg.measurements)}
        if plan is not None and dep.document_text is not None and cfg.measurements is not None
        else base_tags
    )

    foundation = Foundation(
        name, FoundationArgs(model=name, endpoint_name=ep_name, account_id=account_id, region=region, tags=base_tags)
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
    cache = ModelCache(
        f"{name}-cache",
        ModelCacheArgs(
            model=name,
            weights_source=cfg.weights_source,
            bucket_name=foundation.bucket.bucket,
            bucket_arn=foundation.bucket.arn,
            weights_prefix=foundation.weights_prefix,
            account_id=account_id,
            region=region,
            tags=base_tags,
        ),
    )
    observability = Observability(
        f"{name}-obs",
        ObservabilityArgs(model=name, endpoint_name=ep_name, region=region, plan=plan, slo_ms=cfg.plan.slo_ms, tags=base_tags),
    )
    endpoint = Endpoint(
        name,
        EndpointArgs(
            endpoint_name=ep_name,
            image=foundation.repository.repository_url.apply(lambda url: f"{url}@{cfg.image_digest}"),
            role_arn=foundation.role.arn,
            model_data_s3_uri=foundation.weights_s3_uri,
            instance_type=cfg.instance_type,
            initial_instance_count=dep.min_instances,
            environment=container_environment(name, cfg, plan),
            rollback_alarm_names=observability.rollback_alarm_names,
            tags=tags,
            depends_on=[cache.invocation, foundation.role_policy],
        ),
    )

    if dep.gate.enabled and plan is not None:
        Autoscaling(name, AutoscalingArgs(endpoint_name=ep_name, plan=plan, tags=tags, depends_on=[endpoint.endpoint]))
    else:
        pulumi.log.warn(f"{name}: no autoscaling: {dep.gate.reason}")

    out: dict[str, Any] = {
        "endpoint_name": endpoint.endpoint.name,
        "endpoint_arn": endpoint.endpoint.arn,
        "image_repository_url": foundation.repository.repository_url,
        "weights_s3_uri": foundation.weights_s3_uri,
        "instance_type": cfg.instance_type,
        "slo_ms": cfg.plan.slo_ms,
        "gate": {"enabled": dep.gate.enabled, "reason": dep.gate.reason},
    }
    if plan is not None:
        step = surge_adjustment(plan)
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
                "surge_step": {"percent": step.percent, "min_instances_added": step.min_instances_added},
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
        outputs[name] = deploy_model(dep, account_id, region)
        pulumi.export(name, outputs[name])
    return outputs


def main() -> None:
    """Entry point of ``pulumi preview/up``: user mistakes end as one clean line, no traceback."""
    try:
        define_stack(load_stack_config())
    except SpeechError as err:
        raise pulumi.RunError(f"{err.__class__.__name__}: {err}") from None
