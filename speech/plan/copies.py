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

from speech.schema.units import EPS, UNBOUNDED
from speech.schema.plan_artifacts import Capacity, Cooldowns, Finding, Surge, Thresholds, TTotalSummary
from speech.schema.artifacts import CopyArtifact, Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.errors import PlanInputError
from speech.plan.findings import SURVIVAL_OK, UTILIZATION_OK
from speech.plan.realtime import _surge
from speech.plan.findings import (
    finding_bracketed, finding_cloudwatch_ratio, finding_derate, finding_invocation, finding_slo, verdict, weakest_origin,
    ScaleInWording, require_one_model, scale_in_safety,
)
from speech.plan.formulas import (
    per_instance_rps, scale_out_target, slo_sizing, tuned_c_scale_min, c_scale_max, c_scale_min, derated_q_max, headroom,
    instances_for, littles_law_instances, min_safe_instances, planning_t_total, scale_in_cooldown_s, scale_out_cooldown_s,
    to_cloudwatch, w_max_s,
)
from speech.schema.copy_plan import (  # noqa: F401
    COPY_METRIC, COPY_METRIC_TYPE, COPY_PLAN_SCHEMA_VERSION, COPY_SCALABLE_DIMENSION, copy_resource_id,
)
from speech.plan.survival import saturation_rps, throughput_at
from speech.schema.copy_plan import ComputeRequirements, CopyCounts, CopyPlan, CopyPlanInputs, CopyScaling, ManagedInstances, Packing
from speech.schema.instances import InstanceSpec, instance_spec



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
IDLE_MEMORY_WARN = 0.5
"""packing_utilization warns when the placed copies use less than half the accelerator memory
(host memory for a CPU copy) of an instance."""
HOT_LOAD_GAIN_MIN = 2.0
"""hot_loading warns unless planning T_total is at least twice planning T_copy: below that a copy
is not much faster to add than an instance."""


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


def hot_load_gain(planning_t_copy_s: float, planning_t_total_s: float) -> float:
    """planning T_total / planning T_copy: how many times sooner an added copy serves than an instance."""
    return planning_t_total_s / planning_t_copy_s if planning_t_copy_s > 0 else float("inf")


# --- findings ---------------------------------------------------------------------------------


def finding_copy_fits(p: Packing, copy: CopyArtifact) -> Finding:
    spec, fp = p.instance, copy.footprint
    if p.copies_per_instance >= 1:
        return Finding(
            name="copy_fits",
            level="ok",
            message=f"{p.copies_per_instance} cop{'y' if p.copies_per_instance == 1 else 'ies'} per "
            f"{spec.instance_type} (limited by {p.limited_by.replace('_', ' ')})",
        )
    if fp.device == "cuda" and spec.accelerator_count == 0:
        why = f"the copy was measured on a GPU (cuda) but {spec.instance_type} has no accelerator"
        fix = "choose a GPU instance type or measure a CPU copy (bench tcopy on a CPU server)"
    elif p.limited_by == "accelerator_devices":
        why = (
            f"a copy reserves {p.reserved_accelerator_memory_mib:.0f} MiB of accelerator memory = "
            f"{p.accelerator_devices_per_copy} x {spec.accelerator_memory_mib} MiB devices, but "
            f"{spec.instance_type} has {spec.accelerator_count}"
        )
        fix = "choose an instance type with more or larger accelerators"
    elif p.limited_by == "host_memory":
        why = f"a copy reserves {p.reserved_host_memory_mib} MiB of host memory, {spec.instance_type} has {spec.memory_mib}"
        fix = "choose an instance type with more memory"
    else:
        why = f"a copy reserves {p.reserved_cpu_cores:g} CPU cores, {spec.instance_type} has {spec.vcpus} vCPUs"
        fix = "choose an instance type with more vCPUs"
    return Finding(name="copy_fits", level="stop", message=f"the copy does not fit an instance at all: {why}; {fix}")


def finding_packing(p: Packing, copy: CopyArtifact) -> Finding:
    spec, fp = p.instance, copy.footprint
    what = "accelerator memory" if fp.device == "cuda" else "host memory"
    base = f"{p.copies_per_instance} copies use {100 * p.memory_used_fraction:.1f}% of a {spec.instance_type}'s {what}"
    if p.copies_per_instance == 0 or p.memory_used_fraction >= IDLE_MEMORY_WARN:
        return Finding(name="packing_utilization", level="ok", message=base)
    if p.limited_by == "accelerator_devices" and (p.copies_by_accelerator_memory or 0) > p.copies_per_instance:
        why = (
            f"SageMaker gives each copy a whole device (NumberOfAcceleratorDevicesRequired >= 1), while "
            f"memory alone would hold {p.copies_by_accelerator_memory}: declare MIG partitions where the GPU "
            "supports them, run more work per copy (batching), or choose an instance with smaller accelerators"
        )
    else:
        why = f"the copies are limited by {p.limited_by.replace('_', ' ')}; choose an instance type with more of it"
    return Finding(name="packing_utilization", level="warn", message=f"{base}: most of it stays idle; {why}")


def finding_hot_loading(t_copy: TTotalSummary, t_total: TTotalSummary | None, copies_per_instance: int = 2) -> Finding:
    """ok when a copy serves at least :data:`HOT_LOAD_GAIN_MIN` times sooner than an instance AND
    a running instance has room for a second copy; with one copy per instance every added copy
    waits for a new instance (T_total) whatever T_copy is."""
    if t_total is None:
        return Finding(
            name="hot_loading",
            level="warn",
            message=f"planning T_copy {t_copy.planning_s:.1f} s is not compared with an instance's T_total (no ttotal "
            "artifact): run bench ttotal to know what adding copies first buys",
        )
    gain = hot_load_gain(t_copy.planning_s, t_total.planning_s)
    base = (
        f"planning T_copy {t_copy.planning_s:.1f} s vs planning T_total {t_total.planning_s:.1f} s "
        f"(measured {t_copy.measured_s:.1f} s vs {t_total.measured_s:.1f} s)"
    )
    if gain >= HOT_LOAD_GAIN_MIN and copies_per_instance <= 1:
        return Finding(
            name="hot_loading",
            level="warn",
            message=f"{base}: a copy would serve {gain:.1f}x sooner, but only one copy fits an instance, so every added "
            "copy waits for a new instance (T_total): choose an instance type with room for several copies, or a "
            "plain real-time variant",
        )
    if gain >= HOT_LOAD_GAIN_MIN:
        return Finding(name="hot_loading", level="ok", message=f"{base}: a copy serves {gain:.1f}x sooner than an instance")
    return Finding(
        name="hot_loading",
        level="warn",
        message=f"{base}: a copy serves only {gain:.1f}x sooner (< {HOT_LOAD_GAIN_MIN:g}x), so hot loading buys little; "
        "a plain real-time variant scales almost as fast and is simpler",
    )


def finding_copy_surge(surge: Surge, c_max: float, q_max: int, planning_t_copy_s: float, surge_ratio: float) -> Finding:
    """The instance plan's surge rule (SURVIVAL_OK, UTILIZATION_OK) for one copy over planning T_copy:
    the wait when the next copy fits into spare room. A surge that needs instances waits T_total."""
    ok = surge.survival >= SURVIVAL_OK and surge.utilization <= UTILIZATION_OK
    msg = (
        f"at the scale-out point ({c_max:g} in flight) a copy is {100 * surge.utilization:.1f}% utilized; with traffic "
        f"rising x{surge_ratio:g} over the planning T_copy {planning_t_copy_s:.1f} s it reaches Q_max {q_max} with "
        f"probability {100 * surge.reach_qmax_probability:.1f}%"
    )
    if ok:
        return Finding(name="surge_survival", level="ok", message=msg)
    return Finding(
        name="surge_survival",
        level="warn",
        message=msg + "; expect 503 queue_saturated during surges: raise Q_max per copy, lower the surge ratio, "
        "or shorten T_copy (smaller weights, shorter warm-up)",
    )


COPY_SCALE_IN = ScaleInWording(
    ok="copy floor {floor} >= {safe}: removing a copy at {c_min:g} never lifts the rest past {c_max:g}",
    warn="copy floor {floor} < min safe {safe}: removing a copy from fewer than {safe} at C_scale_min {c_min:g} can "
         "push the rest past C_scale_max {c_max:g} (flap); raise min_copies to {safe}",
)


def finding_copy_scale_in(floor: int, safe: int, c_max: float, c_min: float) -> Finding:
    if floor == 0:
        return Finding(
            name="scale_in_safety",
            level="warn",
            message="min_copies 0 (scale to zero): the first request after an idle spell waits for a copy "
            "(T_copy) or an instance (T_total), and SageMaker needs a step policy on "
            "NoCapacityInvocationFailures to leave zero; choose it only where that cold start is acceptable",
        )
    return scale_in_safety(floor, safe, c_max, c_min, COPY_SCALE_IN)


def finding_copy_fleet(copies: CopyCounts, instances: ManagedInstances, needed_instances: int, cap: int | None) -> Finding:
    base = f"{copies.at_peak} copies at peak -> {needed_instances} instances"
    if cap is not None and cap < needed_instances:
        return Finding(
            name="fleet_capacity",
            level="stop",
            message=f"{base}, but max_instances is capped at {cap} ({copies.max_copies} copies): raise the cap to "
            f"{needed_instances} or lower peak_rps",
        )
    return Finding(
        name="fleet_capacity",
        level="ok",
        message=f"{base}; managed instance scaling {instances.min_instances}..{instances.max_instances}",
    )


def finding_copy_fingerprint(q: QmaxArtifact, c: CopyArtifact, spec: InstanceSpec) -> Finding:
    if q.fingerprint != c.fingerprint:
        return Finding(
            name="fingerprint",
            level="warn",
            message=f"qmax was measured on {q.fingerprint.slug} but the copy on {c.fingerprint.slug}: measure both "
            "on the same instance type and image",
        )
    if q.fingerprint.instance_type != spec.instance_type:
        return Finding(
            name="fingerprint",
            level="warn",
            message=f"measured on {q.fingerprint.instance_type}, planned for {spec.instance_type}: Q_max and T_copy "
            f"hold for the instance they were measured on; re-measure on {spec.instance_type}",
        )
    return Finding(name="fingerprint", level="ok", message=f"qmax and copy both measured on {q.fingerprint.slug}")


def finding_copy_provenance(q: QmaxArtifact, c: CopyArtifact) -> Finding:
    if {q.provenance.origin, c.provenance.origin} == {"measured"}:
        return Finding(name="provenance", level="ok", message="both artifacts were measured")
    return Finding(
        name="provenance",
        level="warn",
        message=f"artifact origins are qmax={q.provenance.origin}, copy={c.provenance.origin}: not measurements of "
        "your copies; run bench qmax against one copy and bench tcopy before deploying copy scaling",
    )


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

    h = headroom(inputs.surge_ratio)
    q = derated_q_max(qmax.q_max, inputs.qmax_derate)
    # The same SLO-share target as the instance plan (speech.plan.realtime.scale_out_target): a copy
    # is the gated chain with Q_max per copy.
    slo = slo_sizing(qmax, q, inputs.slo_ms, inputs.slo_share)
    c_max, rule = scale_out_target(q, h, inputs.target_share, slo.occupancy)
    c_min = c_scale_min(q, h) if rule == "surge rule" else tuned_c_scale_min(c_max, h)
    ratio = qmax.cloudwatch_ratio

    out_cd = scale_out_cooldown_s(copy.t_copy_s)
    t_copy = planning_t_total(copy.t_copy_s, inputs.reaction)
    in_cd = scale_in_cooldown_s(t_copy.planning_s)
    t_total = planning_t_total(ttotal.measured_total_s, inputs.reaction) if ttotal is not None else None

    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    x_target = throughput_at(levels, c_max)
    x_in = throughput_at(levels, c_min)
    little = littles_law_instances(inputs.peak_rps, qmax.service_time.mean_ms / 1000.0, c_scale_max(q, h))
    per_copy = per_instance_rps(c_max, x_target, slo.rates)
    at_peak = instances_for(inputs.peak_rps, per_copy)
    at_trough = instances_for(inputs.trough_rps, per_copy)
    peak_shares = slo.shares_at(inputs.peak_rps / at_peak)
    trough_shares = slo.shares_at(inputs.trough_rps / at_trough)
    capacity = Capacity(
        throughput_at_target_rps=round(x_target, 4),
        throughput_at_scale_in_rps=round(x_in, 4),
        littles_law_instances=little,
        littles_law_capacity_rps=round(little * x_target, 2),
        per_instance_rps=round(per_copy, 4),
        slo_rate_rps=None if slo.rate_rps is None else round(slo.rate_rps, 4),
        slo_share_at_peak=round(peak_shares[0], 6),
        refused_share_at_peak=round(peak_shares[1], 6),
        slo_share_at_trough=round(trough_shares[0], 6),
        refused_share_at_trough=round(trough_shares[1], 6),
    )
    safe = min_safe_instances(c_max, c_min) if c_min > 0 else UNBOUNDED

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

    surge = _surge(levels, q, c_max, t_copy.planning_s, inputs.surge_ratio)
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
