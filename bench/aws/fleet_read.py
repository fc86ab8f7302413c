"""Read a deployed inference-component endpoint into a fleet file (``bench capacity --from-endpoint``).

Read-only: DescribeEndpoint, DescribeEndpointConfig, ListInferenceComponents,
DescribeInferenceComponent and Application Auto Scaling's DescribeScalingPolicies. The session is
injected so tests drive it with botocore's Stubber (moto has no inference components).

SageMaker reports how many instances a variant runs and how many copies each component has, not
which instance holds which copy: the fleet file says ``placement: inferred`` and places the
existing copies with the evaluation's own best-fit, largest first, per variant.

Every resource a component's copy requests is read from its ComputeResourceRequirements:
``NumberOfCpuCoresRequired`` (cores), ``MinMemoryRequiredInMb`` (host memory) and
``NumberOfAcceleratorDevicesRequired`` (accelerator memory: whole devices x the device memory of
the instance type, because that is what SageMaker gives a copy). Each instance gets the vCPUs,
memory and accelerator memory of its type (:data:`speech.schema.instances.INSTANCE_SPECS`), so
CPU-only components on CPU instances (ml.c7i, ml.m7i, ...), GPU components, and CPU-only
components on GPU instances are all read. An adapter component (no requirements of its own: it
runs inside its base component's copies) holds nothing and is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bench.aws.client import client_error_message, describe_endpoint
from bench.errors import TargetError
from speech.deploy.scaling import SERVICE_NAMESPACE
from speech.plan.copies import COPY_METRIC_TYPE, COPY_SCALABLE_DIMENSION, copy_resource_id
from speech.plan.fleet import FleetInstance, FleetModel, FleetState
from speech.plan.placement import Amounts, place_best_fit_decreasing
from speech.schema.instances import INSTANCE_SPECS


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


@dataclass(frozen=True)
class _Request:
    """One component's copy, as read from its ComputeResourceRequirements."""

    accelerator_memory_mib: float
    cpu_cores: float | None
    host_memory_mib: float | None

    @property
    def amounts(self) -> Amounts:
        return Amounts(self.accelerator_memory_mib, self.cpu_cores or 0.0, self.host_memory_mib or 0.0)


def copy_request(name: str, ic: dict, spec: Any, variant: str) -> _Request | None:
    """What one copy of component ``name`` requests on ``spec`` (the instance type of its
    variant); None for an adapter component (it uses its base component's copies). A
    :class:`TargetError` for what the evaluation does not model, with the way out."""
    specification = ic.get("Specification")
    if specification is None and ic.get("Specifications"):
        raise TargetError(
            f"inference component {name} has one specification per instance type (instance pools); bench capacity "
            "reads a single specification: write the fleet file by hand for it (see --help)"
        )
    specification = specification or {}
    req = specification.get("ComputeResourceRequirements")
    if req is None:
        if specification.get("BaseInferenceComponentName"):
            return None  # an adapter: it runs inside its base component's copies and holds nothing of its own
        raise TargetError(f"inference component {name} reports no ComputeResourceRequirements; check that it is "
                          "InService (describe-inference-component), or write the fleet file by hand")
    if req.get("AcceleratorPartitionType"):
        raise TargetError(
            f"inference component {name} runs on accelerator partition {req['AcceleratorPartitionType']!r} (MIG); "
            "bench capacity models whole devices only: write the fleet file by hand with the partition's memory"
        )
    devices = req.get("NumberOfAcceleratorDevicesRequired")
    if devices and spec.accelerator_count == 0:
        raise TargetError(
            f"inference component {name} requests {devices:g} accelerator devices but variant {variant} runs "
            f"{spec.instance_type}, which has none; check the component's variant and requirements"
        )
    cores = req.get("NumberOfCpuCoresRequired")
    host_mb = req.get("MinMemoryRequiredInMb")
    if not devices and not cores and not host_mb:
        raise TargetError(f"inference component {name} requests no accelerators, CPU cores or memory; nothing to place")
    return _Request(
        accelerator_memory_mib=float(math.ceil(devices)) * spec.accelerator_memory_mib if devices else 0.0,
        cpu_cores=float(cores) if cores else None,
        # MinMemoryRequiredInMb is compared with the instance memory in the table's MiB (GiB x 1024)
        host_memory_mib=float(host_mb) if host_mb else None,
    )


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
    spec_of: dict[str, Any] = {}
    for variant, n in counts.items():
        itype = variant_types.get(variant)
        if itype not in INSTANCE_SPECS:
            raise TargetError(
                f"endpoint {endpoint} variant {variant} runs {itype!r}, which is not in the instance table "
                "(speech.schema.instances.INSTANCE_SPECS); write the fleet file by hand for it (see --help)"
            )
        spec = spec_of[variant] = INSTANCE_SPECS[itype]
        instances.extend(
            FleetInstance(
                name=f"{variant}-{k + 1}", instance_type=itype, variant=variant,
                accelerator_memory_mib=float(spec.total_accelerator_memory_mib),
                cpu_cores=float(spec.vcpus), host_memory_mib=float(spec.memory_mib),
            )
            for k in range(n)
        )

    summaries = _pages(f"inference components of {endpoint}", sm, "list_inference_components", "InferenceComponents",
                       EndpointNameEquals=endpoint)
    if not summaries:
        raise TargetError(f"endpoint {endpoint} has no inference components; bench capacity is for hosting: components")
    aas = sess.client("application-autoscaling")
    models: dict[str, FleetModel] = {}
    sizes: list[Amounts] = []
    owners: list[tuple[str, str]] = []  # (component, variant) per existing copy
    for s in sorted(summaries, key=lambda x: x["InferenceComponentName"]):
        name = s["InferenceComponentName"]
        ic = _call(f"inference component {name}", sm.describe_inference_component, InferenceComponentName=name)
        variant = ic.get("VariantName") or s.get("VariantName")
        if not isinstance(variant, str) or variant not in spec_of:
            raise TargetError(f"inference component {name} names variant {variant!r}, which endpoint {endpoint} does not report")
        spec = spec_of[variant]
        request = copy_request(name, ic, spec, variant)
        if request is None:
            continue
        current = int((ic.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0)
        sizes.extend([request.amounts] * current)
        owners.extend([(name, variant)] * current)
        target = concurrency_per_copy if concurrency_per_copy is not None else copy_target_value(aas, name)
        if target is None:
            raise TargetError(
                f"inference component {name} has no target-tracking policy on {COPY_METRIC_TYPE}; pass "
                "--concurrency-per-copy (the copy plan's C_scale_max)"
            )
        models[name] = FleetModel(
            copy_memory_mib=request.accelerator_memory_mib, copy_cpu_cores=request.cpu_cores,
            copy_host_memory_mib=request.host_memory_mib,
            concurrency_per_copy=target, t_copy_s=t_copy_s, t_total_s=t_total_s, variant=variant,
            new_instance_type=spec.instance_type, new_instance_accelerator_memory_mib=spec.total_accelerator_memory_mib,
            new_instance_cpu_cores=float(spec.vcpus), new_instance_host_memory_mib=float(spec.memory_mib),
        )
    if not models:
        raise TargetError(f"endpoint {endpoint}: every inference component is an adapter (no compute requirements of "
                          "its own); pass the base components' endpoint")

    # Placed per variant: a component's copies live on its own variant's instances.
    used: list[Amounts] = [Amounts() for _ in instances]
    placed: list[dict[str, int]] = [{} for _ in instances]
    for variant in counts:
        idx = [k for k, i in enumerate(instances) if i.variant == variant]
        mine = [(o, size) for o, size in zip(owners, sizes, strict=True) if o[1] == variant]
        where, _left = place_best_fit_decreasing([instances[k].free for k in idx], [sz for _, sz in mine])
        if any(w is None for w in where):
            raise TargetError(
                f"endpoint {endpoint}: the {len(mine)} current copies on variant {variant} do not fit its {len(idx)} "
                "instances by their compute requirements (a deployment in progress?); try again when it is InService"
            )
        for ((name, _), size), w in zip(mine, where, strict=True):
            assert w is not None
            k = idx[w]
            placed[k][name] = placed[k].get(name, 0) + 1
            used[k] = Amounts(*(u + q for u, q in zip(used[k], size, strict=True)))
    instances = [
        FleetInstance.model_validate({
            **i.model_dump(), "used_accelerator_memory_mib": used[k].accelerator_memory_mib,
            "used_cpu_cores": used[k].cpu_cores, "used_host_memory_mib": used[k].host_memory_mib, "copies": placed[k],
        })
        for k, i in enumerate(instances)
    ]
    return FleetState(source=f"sagemaker:{endpoint}", placement="inferred", instances=instances, models=models)
