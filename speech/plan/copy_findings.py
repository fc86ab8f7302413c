"""The copy plan's findings (:func:`speech.plan.copies.build_copy_plan`), beside the instance plan's
(:mod:`speech.plan.findings`), whose rules several of them reuse with a copy as the unit: each
function judges one thing and returns one :class:`~speech.schema.plan_artifacts.Finding` whose
message names the fix (docs/design.md §3.8)."""

from __future__ import annotations

from speech.plan.findings import SURVIVAL_OK, UTILIZATION_OK, ScaleInWording, scale_in_safety
from speech.plan.formulas import hot_load_gain
from speech.schema.artifacts import CopyArtifact, QmaxArtifact
from speech.schema.copy_plan import CopyCounts, ManagedInstances, Packing
from speech.schema.instances import InstanceSpec
from speech.schema.plan_artifacts import Finding, Surge, TTotalSummary

IDLE_MEMORY_WARN = 0.5
"""packing_utilization warns when the placed copies use less than half the accelerator memory
(host memory for a CPU copy) of an instance."""
HOT_LOAD_GAIN_MIN = 2.0
"""hot_loading warns unless planning T_total is at least twice planning T_copy: below that a copy
is not much faster to add than an instance."""


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
