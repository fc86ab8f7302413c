"""The plan for copies: a model hosted as an inference component, scaled copy by copy.

Pure arithmetic (docs/design.md §3.8). Inputs: a qmax artifact whose ladder ran against ONE copy
(Q_max per copy), the copy artifact (footprint and T_copy, ``bench tcopy``), the team's
:class:`~speech.schema.config.PlanInputs`, and the instance type's size (:data:`INSTANCE_SPECS`).

The copy thresholds and cooldowns are the instance plan's formulas (:mod:`speech.plan.realtime`, reused,
not restated) with T_copy in place of T_total: a new copy on a running instance serves after
T_copy, not after an instance is provisioned. Copies per instance follow from packing the
measured footprint, plus :data:`FOOTPRINT_MARGIN`, into the instance; managed instance scaling's
min/max follow from that packing. The result (:class:`CopyPlan`) is what the Pulumi program and
the policy pack read.

SageMaker places inference-component copies by whole accelerator devices
(``NumberOfAcceleratorDevicesRequired`` is at least 1 unless the endpoint declares MIG
partitions), host memory (``MinMemoryRequiredInMb``) and CPU cores (``NumberOfCpuCoresRequired``),
per botocore's sagemaker service model. So a copy far smaller than a GPU still takes the whole
GPU there: the plan reports both what accelerator memory alone would allow and what SageMaker
places, and warns when most of the memory stays idle.
"""

from __future__ import annotations

import math

from speech.errors import PlanInputError
from speech.plan.copy_findings import (
    finding_copy_fingerprint,
    finding_copy_fits,
    finding_copy_fleet,
    finding_copy_provenance,
    finding_copy_scale_in,
    finding_copy_surge,
    finding_hot_loading,
    finding_packing,
)
from speech.plan.findings import finding_bracketed, finding_invocation, finding_slo, require_one_model, verdict, weakest_origin
from speech.plan.formulas import (
    capacity_at,
    instances_for,
    planning_t_total,
    scale_in_cooldown_s,
    scale_out_cooldown_s,
    surge_at_target,
    to_cloudwatch,
    unit_sizing,
    w_max_s,
)
from speech.plan.measured_findings import finding_cloudwatch_ratio, finding_derate
from speech.plan.survival import saturation_rps
from speech.schema.artifacts import CopyArtifact, Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.schema.copy_plan import (  # noqa: F401
    COPY_METRIC,
    COPY_METRIC_TYPE,
    COPY_PLAN_SCHEMA_VERSION,
    COPY_SCALABLE_DIMENSION,
    ComputeRequirements,
    CopyCounts,
    CopyPlan,
    CopyPlanInputs,
    CopyScaling,
    ManagedInstances,
    Packing,
    copy_resource_id,
)
from speech.schema.instances import InstanceSpec, instance_spec
from speech.schema.plan_artifacts import Cooldowns, Thresholds
from speech.schema.units import EPS

# --- chosen constants ---------------------------------------------------------------------------

FOOTPRINT_MARGIN = 0.10
"""Reserve the measured footprint + 10 % per copy: allocator growth, a longer text than the ladder's,
a driver that reports a little more than the process saw. Applied to accelerator memory, host
memory and CPU cores alike."""
MIN_MEMORY_REQUIRED_MB = 128
"""Smallest ``MinMemoryRequiredInMb`` SageMaker accepts (botocore: min 128)."""
MIN_CPU_CORES_REQUIRED = 0.25
"""Smallest ``NumberOfCpuCoresRequired`` SageMaker accepts (botocore: min 0.25); requests are
rounded up to a multiple of it."""


# --- steps ------------------------------------------------------------------------------------


def reserve(measured: float, margin: float = FOOTPRINT_MARGIN) -> float:
    """measured x (1 + margin): what one copy is given of a resource."""
    return measured * (1.0 + margin)


def accelerator_devices_per_copy(reserved_mib: float, device_memory_mib: int) -> int:
    """ceil(reserved / one device's memory), at least 1: SageMaker gives a copy whole devices."""
    return max(1, math.ceil(reserved_mib / device_memory_mib - EPS))


def copies_sharing_devices(reserved_mib: float, devices: int, device_memory_mib: int) -> int:
    """devices x floor(device memory / reserved): what accelerator memory alone would hold if copies
    shared a device (a copy bigger than one device spans ceil(reserved/device) of them)."""
    if reserved_mib <= device_memory_mib:
        return devices * int(device_memory_mib // reserved_mib)
    return devices // accelerator_devices_per_copy(reserved_mib, device_memory_mib)


def min_memory_required_mb(host_memory_mib: float, margin: float = FOOTPRINT_MARGIN) -> int:
    """MinMemoryRequiredInMb: ceil(RSS x (1 + margin)), at least 128."""
    return max(MIN_MEMORY_REQUIRED_MB, math.ceil(reserve(host_memory_mib, margin) - EPS))


def cpu_cores_required(cores: float, margin: float = FOOTPRINT_MARGIN) -> float:
    """NumberOfCpuCoresRequired: cores x (1 + margin) rounded up to a multiple of 0.25, at least 0.25."""
    steps = math.ceil(reserve(cores, margin) / MIN_CPU_CORES_REQUIRED - EPS)
    return max(1, steps) * MIN_CPU_CORES_REQUIRED


def packing(footprint_copy: CopyArtifact, spec: InstanceSpec, margin: float = FOOTPRINT_MARGIN) -> Packing:
    """Copies per instance: the smallest of the limits by accelerator devices (GPU copies), host
    memory and CPU cores (when measured). 0 when a copy does not fit at all."""
    fp = footprint_copy.footprint
    limits: dict[str, int] = {}
    reserved_acc = devices_per = by_acc = by_dev = None
    if fp.device == "cuda":
        assert fp.accelerator_memory_mib is not None  # the artifact validates it
        reserved_acc = round(reserve(fp.accelerator_memory_mib, margin), 3)
        if spec.accelerator_count == 0:
            by_acc = by_dev = 0
        else:
            devices_per = accelerator_devices_per_copy(reserved_acc, spec.accelerator_memory_mib)
            by_acc = copies_sharing_devices(reserved_acc, spec.accelerator_count, spec.accelerator_memory_mib)
            by_dev = spec.accelerator_count // devices_per
        limits["accelerator_devices"] = by_dev
    host_mb = min_memory_required_mb(fp.host_memory_mib, margin)
    by_host = spec.memory_mib // host_mb
    limits["host_memory"] = by_host
    cores = by_cpu = None
    if fp.cpu_cores is not None:
        cores = cpu_cores_required(fp.cpu_cores, margin)
        by_cpu = int(spec.vcpus // cores + EPS)
        limits["cpu_cores"] = by_cpu
    limited_by = min(limits, key=lambda k: limits[k])
    per_instance = limits[limited_by]
    if fp.device == "cuda":
        total = spec.total_accelerator_memory_mib
        used = per_instance * fp.packing_memory_mib / total if total else 0.0
    else:
        used = per_instance * fp.packing_memory_mib / spec.memory_mib
    return Packing(
        instance=spec,
        reserved_accelerator_memory_mib=reserved_acc,
        accelerator_devices_per_copy=devices_per,
        copies_by_accelerator_memory=by_acc,
        copies_by_devices=by_dev,
        reserved_host_memory_mib=host_mb,
        copies_by_host_memory=by_host,
        reserved_cpu_cores=cores,
        copies_by_cpu=by_cpu,
        copies_per_instance=per_instance,
        limited_by=limited_by,
        memory_used_fraction=round(used, 6),
    )


def compute_requirements(p: Packing) -> ComputeRequirements:
    """The inference component's requirements: the packing's reservations, in AWS's units."""
    return ComputeRequirements(
        number_of_accelerator_devices_required=float(p.accelerator_devices_per_copy)
        if p.accelerator_devices_per_copy is not None
        else None,
        min_memory_required_in_mb=p.reserved_host_memory_mib,
        number_of_cpu_cores_required=p.reserved_cpu_cores,
    )


def instances_for_copies(copies: int, per_instance: int) -> int:
    """ceil(copies / copies per instance (>= 1)); 0 copies need 0 instances."""
    return math.ceil(copies / per_instance) if copies > 0 else 0


def copy_floor(min_copies: int, trough_copies: int) -> int:
    """The copy count's floor: 0 when scale-to-zero was chosen, else max(chosen floor, trough need)."""
    return 0 if min_copies == 0 else max(min_copies, trough_copies)



# --- the plan ---------------------------------------------------------------------------------


def build_copy_plan(
    qmax: QmaxArtifact,
    copy: CopyArtifact,
    inputs: PlanInputs,
    *,
    instance: InstanceSpec | str | None = None,
    ttotal: TtotalArtifact | None = None,
    min_copies: int = 1,
    max_instances_cap: int | None = None,
    margin: float = FOOTPRINT_MARGIN,
) -> CopyPlan:
    """Copy-level scaling numbers, packing, managed instance range and compute requirements.

    ``qmax`` must be a ladder against one copy. ``instance`` defaults to the qmax fingerprint's
    instance type (a local one has no size: pass the SageMaker type). Raises
    :class:`PlanInputError` for what cannot be planned (models differ, unknown instance type,
    surge ratio out of range, a negative floor); infeasible but well-formed inputs give a plan
    whose verdict is ``stop``.
    """
    require_one_model(qmax, copy, "the copy artifact")
    if ttotal is not None and ttotal.model != qmax.model:
        raise PlanInputError(f"ttotal artifact is for model {ttotal.model!r}, not {qmax.model!r}")
    if min_copies < 0:
        raise PlanInputError(f"min_copies {min_copies} is negative; use 0 (scale to zero) or more")
    if not 0.0 <= margin < 1.0:
        raise PlanInputError(f"footprint margin {margin} is outside [0, 1); e.g. {FOOTPRINT_MARGIN}")
    if instance is None:
        instance = qmax.fingerprint.instance_type
    spec = instance_spec(instance) if isinstance(instance, str) else instance

    # The instance plan's unit sizing (speech.plan.formulas.unit_sizing) with a copy as the unit:
    # the ladder ran against one copy, so Q_max and the SLO-share target are per copy.
    unit = unit_sizing(qmax, inputs)
    q, levels, c_max, c_min = unit.q_max, unit.levels, unit.c_scale_max, unit.c_scale_min
    ratio = qmax.cloudwatch_ratio

    out_cd = scale_out_cooldown_s(copy.t_copy_s)
    t_copy = planning_t_total(copy.t_copy_s, inputs.reaction)
    in_cd = scale_in_cooldown_s(t_copy.planning_s)
    t_total = planning_t_total(ttotal.measured_total_s, inputs.reaction) if ttotal is not None else None

    at_peak = instances_for(inputs.peak_rps, unit.per_unit_rps)
    at_trough = instances_for(inputs.trough_rps, unit.per_unit_rps)
    capacity = capacity_at(unit, peak_rps=inputs.peak_rps, units_at_peak=at_peak, trough_rps=inputs.trough_rps,
                           units_at_trough=at_trough)
    safe = unit.min_safe_units

    pack = packing(copy, spec, margin)
    # With no copy fitting (a stop finding) the counts assume one copy per instance so the model
    # stays valid; nothing deploys from a stop plan.
    per = max(1, pack.copies_per_instance)
    floor = copy_floor(min_copies, at_trough)
    needed_instances = instances_for_copies(max(floor, at_peak), per)
    min_inst = 0 if floor == 0 else max(inputs.min_instances, instances_for_copies(floor, per))
    max_inst = needed_instances if max_instances_cap is None else min(needed_instances, max_instances_cap)
    max_inst = max(max_inst, min_inst, 1)
    max_copies = min(max(floor, at_peak), max_inst * per)
    counts = CopyCounts(at_peak=at_peak, at_trough=at_trough, min_copies=floor, max_copies=max_copies, min_safe_copies=safe)
    managed = ManagedInstances(min_instances=min_inst, max_instances=max_inst)

    surge = surge_at_target(levels, q, c_max, t_copy.planning_s, inputs.surge_ratio)
    sat = saturation_rps(levels)
    findings = [
        finding_copy_fits(pack, copy),
        finding_packing(pack, copy),
        finding_hot_loading(t_copy, t_total, pack.copies_per_instance),
        finding_slo(inputs.slo_ms, qmax.service_time.p95_ms, q),
        finding_copy_surge(surge, c_max, q, t_copy.planning_s, inputs.surge_ratio),
        finding_copy_scale_in(floor, safe, c_max, c_min),
        finding_bracketed(qmax),
        finding_copy_fleet(counts, managed, needed_instances, max_instances_cap),
        finding_invocation(q, sat, qmax.service_time.p95_ms),
        finding_copy_fingerprint(qmax, copy, spec),
        finding_copy_provenance(qmax, copy),
        finding_cloudwatch_ratio(qmax),
    ]
    if inputs.qmax_derate < 1.0:
        findings.append(finding_derate(qmax.q_max, q, inputs.qmax_derate))

    return CopyPlan(
        model=qmax.model,
        fingerprint=qmax.fingerprint,
        inputs=CopyPlanInputs(
            slo_ms=inputs.slo_ms,
            surge_ratio=inputs.surge_ratio,
            peak_rps=inputs.peak_rps,
            trough_rps=inputs.trough_rps,
            min_copies=min_copies,
            min_instances=inputs.min_instances,
            metric_period_s=inputs.reaction.metric_period_s,
            datapoints_to_alarm=inputs.reaction.datapoints_to_alarm,
            qmax_derate=inputs.qmax_derate,
            footprint_margin=margin,
            qmax_sha256=canonical_sha256(qmax),
            copy_sha256=canonical_sha256(copy),
            ttotal_sha256=canonical_sha256(ttotal) if ttotal is not None else None,
        ),
        q_max_per_copy=q,
        thresholds=Thresholds(
            c_scale_max=round(c_max, 4),
            c_scale_min=round(c_min, 4),
            w_max_s=round(w_max_s(inputs.slo_ms, qmax.service_time.p95_ms), 3),
            scaling_target_value=round(to_cloudwatch(c_max, ratio), 4),
            scale_in_threshold=round(to_cloudwatch(c_min, ratio), 4),
        ),
        cooldowns=Cooldowns(scale_out_s=out_cd, scale_in_s=in_cd),
        t_copy=t_copy,
        t_total=t_total,
        queue_max_depth=q,
        capacity=capacity,
        surge=surge,
        copies=counts,
        packing=pack,
        instances=managed,
        compute=compute_requirements(pack),
        scaling=CopyScaling(
            target_value=round(to_cloudwatch(c_max, ratio), 4),
            scale_in_threshold=round(to_cloudwatch(c_min, ratio), 4),
            scale_out_cooldown_s=out_cd,
            scale_in_cooldown_s=in_cd,
        ),
        findings=findings,
        verdict=verdict(findings),
        provenance=Provenance(
            origin=weakest_origin(qmax.provenance.origin, copy.provenance.origin),
            source="speech.plan.copies.build_copy_plan",
            tool="speech.plan.copies.build_copy_plan",
        ),
    )
