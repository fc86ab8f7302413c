"""Read a deployed inference-component endpoint into a fleet file (``bench capacity --from-endpoint``).

Read-only: DescribeEndpoint, DescribeEndpointConfig, ListInferenceComponents,
DescribeInferenceComponent and Application Auto Scaling's DescribeScalingPolicies. The session is
injected so tests drive it with botocore's Stubber (moto has no inference components).

SageMaker reports how many instances a variant runs and how many copies each component has, not
which instance holds which copy: the fleet file says ``placement: inferred`` and places the
existing copies with the evaluation's own best-fit, largest first. A copy's accelerator memory is
its whole devices (``NumberOfAcceleratorDevicesRequired`` x the device memory of the instance
type, :data:`speech.plan.copies.INSTANCE_SPECS`), because that is what SageMaker gives a copy.
"""

from __future__ import annotations

import math
from typing import Any

from speech.plan.capacity import FleetInstance, FleetModel, FleetState, place_best_fit_decreasing
from speech.plan.copies import COPY_METRIC_TYPE, COPY_SCALABLE_DIMENSION, copy_resource_id
from speech.schema.instances import INSTANCE_SPECS
from speech.deploy.scaling import SERVICE_NAMESPACE

from bench.aws import client_error_message, describe_endpoint
from bench.errors import TargetError


def _call(what: str, fn: Any, **kw: Any) -> dict:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(**kw)
    except ClientError as err:
        raise TargetError(f"{what}: {client_error_message(err)}; check the endpoint name and the region") from None
    except BotoCoreError as err:
        raise TargetError(f"{what}: {err}; check AWS credentials and region") from None


def _pages(what: str, client: Any, op: str, key: str, **kw: Any) -> list[dict]:
    items: list[dict] = []
    token = None
    while True:
        resp = _call(what, getattr(client, op), **kw, **({"NextToken": token} if token else {}))
        items.extend(resp.get(key, []))
        token = resp.get("NextToken")
        if not token:
            return items


def copy_target_value(aas: Any, component: str) -> float | None:
    """Target value of the component's target-tracking policy on ConcurrentRequestsPerCopy
    (CloudWatch units), or None when it has none."""
    policies = _pages(
        f"scaling policies of inference component {component}", aas, "describe_scaling_policies", "ScalingPolicies",
        ServiceNamespace=SERVICE_NAMESPACE, ResourceId=copy_resource_id(component), ScalableDimension=COPY_SCALABLE_DIMENSION,
    )
    for p in policies:
        conf = p.get("TargetTrackingScalingPolicyConfiguration") or {}
        metric = (conf.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        if metric == COPY_METRIC_TYPE and "TargetValue" in conf:
            return float(conf["TargetValue"])
    return None


def read_fleet(
    sess: Any,
    endpoint: str,
    *,
    t_copy_s: float,
    t_total_s: float,
    concurrency_per_copy: float | None = None,
) -> FleetState:
    """The endpoint's instances and components as a :class:`FleetState`. ``concurrency_per_copy``
    overrides every component's copy-scaling target; without it the target is read from each
    component's target-tracking policy. Raises :class:`TargetError` naming what could not be read."""
    sm = sess.client("sagemaker")
    ep = describe_endpoint(sess, endpoint)
    config_name = ep.get("EndpointConfigName", "")
    config = _call(f"endpoint configuration {config_name!r} of {endpoint}", sm.describe_endpoint_config,
                   EndpointConfigName=config_name)
    variant_types = {v["VariantName"]: v.get("InstanceType") for v in config.get("ProductionVariants", [])}
    counts = {v["VariantName"]: int(v.get("CurrentInstanceCount") or 0) for v in ep.get("ProductionVariants", [])}
    if not counts:
        raise TargetError(f"endpoint {endpoint} reports no production variants yet; wait until it is InService")

    instances: list[FleetInstance] = []
    variant_of: list[str] = []
    spec_of: dict[str, Any] = {}
    for variant, n in counts.items():
        itype = variant_types.get(variant)
        if itype not in INSTANCE_SPECS:
            raise TargetError(
                f"endpoint {endpoint} variant {variant} runs {itype!r}, which is not in the instance table "
                "(speech.plan.copies.INSTANCE_SPECS); write the fleet file by hand for it"
            )
        spec_of[variant] = INSTANCE_SPECS[itype]
        for k in range(n):
            variant_of.append(variant)
            instances.append(FleetInstance(
                name=f"{variant}-{k + 1}", instance_type=itype,
                accelerator_memory_mib=float(INSTANCE_SPECS[itype].total_accelerator_memory_mib or 1),
            ))
    if any(i.accelerator_memory_mib <= 1 for i in instances):
        raise TargetError(f"endpoint {endpoint} runs CPU instances: the capacity evaluation places by accelerator memory")

    summaries = _pages(f"inference components of {endpoint}", sm, "list_inference_components", "InferenceComponents",
                       EndpointNameEquals=endpoint)
    if not summaries:
        raise TargetError(f"endpoint {endpoint} has no inference components; bench capacity is for hosting: components")
    aas = sess.client("application-autoscaling")
    models: dict[str, FleetModel] = {}
    sizes: list[float] = []
    owners: list[tuple[str, str]] = []  # (component, variant) per existing copy
    for s in sorted(summaries, key=lambda x: x["InferenceComponentName"]):
        name = s["InferenceComponentName"]
        ic = _call(f"inference component {name}", sm.describe_inference_component, InferenceComponentName=name)
        variant = ic.get("VariantName") or s.get("VariantName")
        spec = spec_of.get(variant)
        if spec is None:
            raise TargetError(f"inference component {name} names variant {variant!r}, which endpoint {endpoint} does not report")
        req = (ic.get("Specification") or {}).get("ComputeResourceRequirements") or {}
        devices = req.get("NumberOfAcceleratorDevicesRequired")
        if not devices:
            continue  # a CPU-only component holds no accelerator memory
        copy_mib = float(math.ceil(devices)) * spec.accelerator_memory_mib
        current = int((ic.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0)
        sizes.extend([copy_mib] * current)
        owners.extend([(name, variant)] * current)
        target = concurrency_per_copy if concurrency_per_copy is not None else copy_target_value(aas, name)
        if target is None:
            raise TargetError(
                f"inference component {name} has no target-tracking policy on {COPY_METRIC_TYPE}; pass "
                "--concurrency-per-copy (the copy plan's C_scale_max)"
            )
        models[name] = FleetModel(
            copy_memory_mib=copy_mib, concurrency_per_copy=target, t_copy_s=t_copy_s, t_total_s=t_total_s,
            new_instance_type=spec.instance_type, new_instance_accelerator_memory_mib=spec.total_accelerator_memory_mib,
        )
    if not models:
        raise TargetError(f"endpoint {endpoint}: no inference component requests accelerators; nothing to place by memory")

    # Placed per variant: a component's copies live on its own variant's instances.
    used = [0.0] * len(instances)
    placed: list[dict[str, int]] = [{} for _ in instances]
    for variant in counts:
        idx = [k for k, v in enumerate(variant_of) if v == variant]
        mine = [(o, size) for o, size in zip(owners, sizes, strict=True) if o[1] == variant]
        where, left = place_best_fit_decreasing([instances[k].accelerator_memory_mib for k in idx], [sz for _, sz in mine])
        if any(w is None for w in where):
            raise TargetError(
                f"endpoint {endpoint}: the {len(mine)} current copies on variant {variant} do not fit its {len(idx)} "
                "instances by their compute requirements (a deployment in progress?); try again when it is InService"
            )
        for ((name, _), _size), w in zip(mine, where, strict=True):
            assert w is not None
            placed[idx[w]][name] = placed[idx[w]].get(name, 0) + 1
        for j, k in enumerate(idx):
            used[k] = instances[k].accelerator_memory_mib - left[j]
    instances = [
        FleetInstance.model_validate({**i.model_dump(), "used_accelerator_memory_mib": used[k], "copies": placed[k]})
        for k, i in enumerate(instances)
    ]
    return FleetState(source=f"sagemaker:{endpoint}", placement="inferred", instances=instances, models=models)
