"""Instance sizes SageMaker hosts: accelerators, their memory, vCPUs and host memory (pure)."""

from __future__ import annotations
from speech.schema.artifacts import Frozen
from speech.errors import PlanInputError

# --- instance sizes ---------------------------------------------------------------------------


class InstanceSpec(Frozen):
    """Size of one SageMaker instance type: what copies are packed into."""

    instance_type: str
    accelerator: str | None
    """GPU model, None for a CPU instance."""
    accelerator_count: int
    """Accelerator devices per instance (0 on CPU instances)."""
    accelerator_memory_mib: int
    """Memory of ONE device, MiB (nominal GiB x 1024; the driver reports a few hundred MiB less)."""
    vcpus: int
    memory_mib: int
    """Host memory, MiB (nominal GiB x 1024)."""

    @property
    def total_accelerator_memory_mib(self) -> int:
        return self.accelerator_count * self.accelerator_memory_mib


def _spec(t: str, gpu: str | None, n: int, gpu_gib: int, vcpus: int, mem_gib: int) -> InstanceSpec:
    return InstanceSpec(
        instance_type=t, accelerator=gpu, accelerator_count=n, accelerator_memory_mib=gpu_gib * 1024,
        vcpus=vcpus, memory_mib=mem_gib * 1024,
    )


INSTANCE_SPECS: dict[str, InstanceSpec] = {
    s.instance_type: s
    for s in (
        _spec("ml.g4dn.xlarge", "NVIDIA T4", 1, 16, 4, 16),
        _spec("ml.g4dn.2xlarge", "NVIDIA T4", 1, 16, 8, 32),
        _spec("ml.g4dn.12xlarge", "NVIDIA T4", 4, 16, 48, 192),
        _spec("ml.g5.xlarge", "NVIDIA A10G", 1, 24, 4, 16),
        _spec("ml.g5.2xlarge", "NVIDIA A10G", 1, 24, 8, 32),
        _spec("ml.g5.4xlarge", "NVIDIA A10G", 1, 24, 16, 64),
        _spec("ml.g5.8xlarge", "NVIDIA A10G", 1, 24, 32, 128),
        _spec("ml.g5.12xlarge", "NVIDIA A10G", 4, 24, 48, 192),
        _spec("ml.g5.24xlarge", "NVIDIA A10G", 4, 24, 96, 384),
        _spec("ml.g5.48xlarge", "NVIDIA A10G", 8, 24, 192, 768),
        _spec("ml.g6.xlarge", "NVIDIA L4", 1, 24, 4, 16),
        _spec("ml.g6.2xlarge", "NVIDIA L4", 1, 24, 8, 32),
        _spec("ml.g6.4xlarge", "NVIDIA L4", 1, 24, 16, 64),
        _spec("ml.g6.12xlarge", "NVIDIA L4", 4, 24, 48, 192),
        _spec("ml.g6.48xlarge", "NVIDIA L4", 8, 24, 192, 768),
        _spec("ml.g6e.xlarge", "NVIDIA L40S", 1, 48, 4, 32),
        _spec("ml.g6e.2xlarge", "NVIDIA L40S", 1, 48, 8, 64),
        _spec("ml.g6e.12xlarge", "NVIDIA L40S", 4, 48, 48, 384),
        _spec("ml.g6e.48xlarge", "NVIDIA L40S", 8, 48, 192, 1536),
        _spec("ml.p4d.24xlarge", "NVIDIA A100", 8, 40, 96, 1152),
        _spec("ml.p5.48xlarge", "NVIDIA H100", 8, 80, 192, 2048),
        _spec("ml.c5.xlarge", None, 0, 0, 4, 8),
        _spec("ml.c5.2xlarge", None, 0, 0, 8, 16),
        _spec("ml.c6i.xlarge", None, 0, 0, 4, 8),
        _spec("ml.c6i.2xlarge", None, 0, 0, 8, 16),
        _spec("ml.m5.xlarge", None, 0, 0, 4, 16),
        _spec("ml.m5.2xlarge", None, 0, 0, 8, 32),
    )
}
"""Nominal sizes from the Amazon EC2 instance type specifications (accelerated computing and
compute/general purpose pages) and the SageMaker AI pricing page's instance details, as of
2026-11-30; a SageMaker ``ml.X`` instance has the size of EC2's ``X``. Pass an
:class:`InstanceSpec` for a type not listed."""


def instance_spec(instance_type: str) -> InstanceSpec:
    """The table's spec, or :class:`PlanInputError` naming the known types and the way out."""
    try:
        return INSTANCE_SPECS[instance_type]
    except KeyError:
        raise PlanInputError(
            f"instance type {instance_type!r} is not in the instance table (speech.plan.copies.INSTANCE_SPECS: "
            f"{', '.join(sorted(INSTANCE_SPECS))}); choose one of those or pass its InstanceSpec "
            "(accelerators, memory per accelerator, vCPUs, memory) from the EC2 instance type specifications"
        ) from None


