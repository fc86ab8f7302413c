"""The copy plan artifact (hosting: components): what `bench copies` writes (pure pydantic models)."""

from __future__ import annotations

from typing import Final, Literal

from speech.schema.artifacts import Fingerprint, Frozen, Level, Provenance
from speech.schema.aws import COMPONENT_METRIC, COMPONENT_SCALABLE_DIMENSION, COMPONENT_SCALE_OUT_METRIC_TYPE, component_resource_id
from speech.schema.instances import InstanceSpec
from speech.schema.plan_artifacts import Capacity, Cooldowns, Finding, Surge, Thresholds, TTotalSummary

COPY_PLAN_SCHEMA_VERSION: Final = 1

# AWS names of copy scaling live with the other AWS names in speech.schema.aws (one place).
COPY_METRIC_TYPE: Final = COMPONENT_SCALE_OUT_METRIC_TYPE
COPY_SCALABLE_DIMENSION: Final = COMPONENT_SCALABLE_DIMENSION
COPY_METRIC = COMPONENT_METRIC
copy_resource_id = component_resource_id

# --- result model -----------------------------------------------------------------------------


class CopyPlanInputs(Frozen):
    slo_ms: float
    surge_ratio: float
    peak_rps: float
    trough_rps: float
    min_copies: int
    """Copy floor chosen; 0 = scale to zero copies when idle (a cold start is acceptable)."""
    min_instances: int
    metric_period_s: int
    datapoints_to_alarm: int
    qmax_derate: float
    footprint_margin: float
    qmax_sha256: str
    copy_sha256: str
    ttotal_sha256: str | None


class CopyCounts(Frozen):
    at_peak: int
    """ceil(peak_rps / X_copy(C_scale_max)): copies that carry the peak at the scale-out target."""
    at_trough: int
    """ceil(trough_rps / X_copy(C_scale_max)), at least 1."""
    min_copies: int
    """Scaling floor: 0 when scale-to-zero was chosen, else max(min_copies input, at_trough)."""
    max_copies: int
    """Scaling ceiling: max(min_copies, at_peak), or what the instance cap holds."""
    min_safe_copies: int
    """Smallest count whose scale-in by one cannot lift the rest past C_scale_max (as for instances)."""


class Packing(Frozen):
    """How many copies one instance holds, and what limits it."""

    instance: InstanceSpec
    reserved_accelerator_memory_mib: float | None
    """Measured accelerator footprint x (1 + margin), MiB; None for a CPU copy."""
    accelerator_devices_per_copy: int | None
    """Whole devices one copy takes on SageMaker: ceil(reserved / device memory), at least 1."""
    copies_by_accelerator_memory: int | None
    """Copies the accelerator memory alone would hold if copies shared a device:
    devices x floor(device memory / reserved). Not what SageMaker places without MIG."""
    copies_by_devices: int | None
    """floor(devices / devices per copy): what SageMaker places by accelerators."""
    reserved_host_memory_mib: int
    """MinMemoryRequiredInMb: ceil(RSS x (1 + margin)), at least 128."""
    copies_by_host_memory: int
    reserved_cpu_cores: float | None
    """NumberOfCpuCoresRequired: measured cores x (1 + margin) rounded up to 0.25; None when not measured."""
    copies_by_cpu: int | None
    copies_per_instance: int
    """The smallest of the limits that apply; 0: a copy does not fit at all."""
    limited_by: Literal["accelerator_devices", "host_memory", "cpu_cores"]
    memory_used_fraction: float
    """Packed copies' measured footprint / the instance's accelerator memory (host memory for CPU copies)."""


class ManagedInstances(Frozen):
    """Managed instance scaling's range for the endpoint's variant."""

    min_instances: int
    """ceil(min_copies / copies per instance), at least the floor input unless scaling to zero."""
    max_instances: int
    """ceil(max_copies / copies per instance), at least min_instances."""


class ComputeRequirements(Frozen):
    """The inference component's ComputeResourceRequirements (AWS names in the docstrings)."""

    number_of_accelerator_devices_required: float | None
    """NumberOfAcceleratorDevicesRequired (float, >= 1); None for a CPU copy."""
    min_memory_required_in_mb: int
    """MinMemoryRequiredInMb (required, >= 128): host memory per copy."""
    number_of_cpu_cores_required: float | None
    """NumberOfCpuCoresRequired (>= 0.25); None when the copy's CPU use was not measured."""

    def aws(self) -> dict[str, float | int]:
        """The AWS API / CloudFormation shape, unset members left out."""
        out: dict[str, float | int] = {"MinMemoryRequiredInMb": self.min_memory_required_in_mb}
        if self.number_of_accelerator_devices_required is not None:
            out["NumberOfAcceleratorDevicesRequired"] = self.number_of_accelerator_devices_required
        if self.number_of_cpu_cores_required is not None:
            out["NumberOfCpuCoresRequired"] = self.number_of_cpu_cores_required
        return out


class CopyScaling(Frozen):
    """Target tracking on the copy count."""

    metric_type: Literal["SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"] = COPY_METRIC_TYPE
    scalable_dimension: Literal["sagemaker:inference-component:DesiredCopyCount"] = COPY_SCALABLE_DIMENSION
    target_value: float
    """C_scale_max per copy in CloudWatch units: requests in flight per copy."""
    scale_in_threshold: float
    """C_scale_min per copy in CloudWatch units."""
    scale_out_cooldown_s: int
    scale_in_cooldown_s: int


class CopyPlan(Frozen):
    """Every number of a component-hosted model, each traceable to a measurement."""

    schema_version: Literal[1] = COPY_PLAN_SCHEMA_VERSION
    kind: Literal["copy-plan"] = "copy-plan"
    model: str
    fingerprint: Fingerprint
    """The per-copy qmax artifact's."""
    inputs: CopyPlanInputs
    q_max_per_copy: int
    thresholds: Thresholds
    """The instance plan's thresholds, per copy."""
    cooldowns: Cooldowns
    t_copy: TTotalSummary
    """Measured T_copy, its reaction bound and planning T_copy (planning_t_total with T_copy)."""
    t_total: TTotalSummary | None
    """The instance's, when a ttotal artifact was given: what the rest of a surge waits for."""
    queue_max_depth: int
    """QUEUE_MAX_DEPTH of each copy: Q_max per copy."""
    capacity: Capacity
    """Per copy: X_copy(C_scale_max), X_copy(C_scale_min), Little's law for comparison."""
    surge: Surge
    """Surge survival of one copy over planning T_copy (copies added into spare room)."""
    copies: CopyCounts
    packing: Packing
    instances: ManagedInstances
    compute: ComputeRequirements
    scaling: CopyScaling
    findings: list[Finding]
    verdict: Level
    provenance: Provenance

    def finding(self, name: str) -> Finding:
        for f in self.findings:
            if f.name == name:
                return f
        raise KeyError(name)


def copy_plan_filename(p: CopyPlan) -> str:
    return f"copy-plan-{p.model}.json"


