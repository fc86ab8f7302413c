"""Instance sizes SageMaker hosts: accelerators, their memory, vCPUs and host memory; and which
instance families have a CUDA accelerator, so which container backend an instance runs (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from speech.errors import ConfigError, PlanInputError
from speech.schema.artifacts import Frozen

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
        _spec("ml.c5.4xlarge", None, 0, 0, 16, 32),
        _spec("ml.c6i.large", None, 0, 0, 2, 4),
        _spec("ml.c6i.xlarge", None, 0, 0, 4, 8),
        _spec("ml.c6i.2xlarge", None, 0, 0, 8, 16),
        _spec("ml.c6i.4xlarge", None, 0, 0, 16, 32),
        _spec("ml.c7i.large", None, 0, 0, 2, 4),
        _spec("ml.c7i.xlarge", None, 0, 0, 4, 8),
        _spec("ml.c7i.2xlarge", None, 0, 0, 8, 16),
        _spec("ml.c7i.4xlarge", None, 0, 0, 16, 32),
        _spec("ml.c7i.8xlarge", None, 0, 0, 32, 64),
        _spec("ml.m5.xlarge", None, 0, 0, 4, 16),
        _spec("ml.m5.2xlarge", None, 0, 0, 8, 32),
        _spec("ml.m6i.xlarge", None, 0, 0, 4, 16),
        _spec("ml.m6i.2xlarge", None, 0, 0, 8, 32),
        _spec("ml.m7i.xlarge", None, 0, 0, 4, 16),
        _spec("ml.m7i.2xlarge", None, 0, 0, 8, 32),
        _spec("ml.m7i.4xlarge", None, 0, 0, 16, 64),
        _spec("ml.r7i.xlarge", None, 0, 0, 4, 32),
        _spec("ml.r7i.2xlarge", None, 0, 0, 8, 64),
    )
}
"""Nominal sizes from the Amazon EC2 instance type specifications (accelerated computing and
compute/general purpose pages) and the SageMaker AI pricing page's instance details, as of
2026-11-30; a SageMaker ``ml.X`` instance has the size of EC2's ``X``: c5/c6i/c7i have 2 GiB
per vCPU, m5/m6i/m7i 4 GiB, r7i 8 GiB (docs.aws.amazon.com/ec2/latest/instancetypes/co.html,
gp.html, mo.html). Pass an :class:`InstanceSpec` for a type not listed."""


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


# --- families: accelerator or CPU, and the backend each runs ------------------------------------

Backend = Literal["torch", "onnx"]
Kind = Literal["cuda", "cpu", "neuron", "arm"]


@dataclass(frozen=True)
class Family:
    """One instance family: what its instances compute on, and where that is written."""

    family: str
    """``g5``, ``c7i``, ... (the part between ``ml.`` and the size)."""
    kind: Kind
    """``cuda``: NVIDIA GPUs (the torch backend on CUDA); ``cpu``: x86-64 cores only (the onnx
    backend); ``neuron``: AWS Inferentia/Trainium (neither backend: no Neuron build); ``arm``:
    Graviton (the images are linux/amd64 only)."""
    processor: str
    source: str
    """The AWS page that says so."""


_ACCELERATED = "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (accelerated computing)"
_COMPUTE = "docs.aws.amazon.com/ec2/latest/instancetypes/co.html (compute optimized)"
_GENERAL = "docs.aws.amazon.com/ec2/latest/instancetypes/gp.html (general purpose)"
_MEMORY = "docs.aws.amazon.com/ec2/latest/instancetypes/mo.html (memory optimized)"

FAMILIES: dict[str, Family] = {
    f.family: f
    for f in (
        Family("g4dn", "cuda", "NVIDIA T4", _ACCELERATED),
        Family("g5", "cuda", "NVIDIA A10G", _ACCELERATED),
        Family("g6", "cuda", "NVIDIA L4", _ACCELERATED),
        Family("g6e", "cuda", "NVIDIA L40S", _ACCELERATED),
        Family("p3", "cuda", "NVIDIA V100", _ACCELERATED),
        Family("p4d", "cuda", "NVIDIA A100", _ACCELERATED),
        Family("p4de", "cuda", "NVIDIA A100 80GB", _ACCELERATED),
        Family("p5", "cuda", "NVIDIA H100", _ACCELERATED),
        Family("p5e", "cuda", "NVIDIA H200", _ACCELERATED),
        Family("inf1", "neuron", "AWS Inferentia", _ACCELERATED),
        Family("inf2", "neuron", "AWS Inferentia2", _ACCELERATED),
        Family("trn1", "neuron", "AWS Trainium", _ACCELERATED),
        Family("c5", "cpu", "Intel Xeon Platinum (Skylake/Cascade Lake)", _COMPUTE),
        Family("c6i", "cpu", "3rd generation Intel Xeon Scalable", _COMPUTE),
        Family("c7i", "cpu", "4th generation Intel Xeon Scalable", _COMPUTE),
        Family("m5", "cpu", "Intel Xeon Platinum (Skylake/Cascade Lake)", _GENERAL),
        Family("m6i", "cpu", "3rd generation Intel Xeon Scalable", _GENERAL),
        Family("m7i", "cpu", "4th generation Intel Xeon Scalable", _GENERAL),
        Family("t2", "cpu", "Intel Xeon (burstable)", _GENERAL),
        Family("t3", "cpu", "Intel Xeon Platinum (burstable)", _GENERAL),
        Family("r5", "cpu", "Intel Xeon Platinum (Skylake/Cascade Lake)", _MEMORY),
        Family("r6i", "cpu", "3rd generation Intel Xeon Scalable", _MEMORY),
        Family("r7i", "cpu", "4th generation Intel Xeon Scalable", _MEMORY),
        Family("c6g", "arm", "AWS Graviton2", _COMPUTE),
        Family("c7g", "arm", "AWS Graviton3", _COMPUTE),
        Family("m6g", "arm", "AWS Graviton2", _GENERAL),
        Family("m7g", "arm", "AWS Graviton3", _GENERAL),
        Family("r6g", "arm", "AWS Graviton2", _MEMORY),
        Family("r7g", "arm", "AWS Graviton3", _MEMORY),
    )
}
"""Instance families by what they compute on. SageMaker's ``ml.<family>.<size>`` runs on EC2's
``<family>.<size>`` (the SageMaker API's ProductionVariantInstanceType lists the ``ml.`` names)."""

BACKEND_OF_KIND: dict[str, Backend] = {"cuda": "torch", "cpu": "onnx"}
"""What each kind of instance runs: torch on CUDA for NVIDIA GPUs, int8 ONNX on the CPU cores."""

_TYPE_RE = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")


def instance_family(instance_type: str, key: str = "instance_type") -> Family:
    """``ml.g5.xlarge`` -> the g5 row, or a :class:`ConfigError` naming the type and the known families."""
    m = _TYPE_RE.match(instance_type)
    family = FAMILIES.get(m.group("family")) if m else None
    if family is None:
        raise ConfigError(
            f"{key}: {instance_type!r} is not an instance family this project knows (known: "
            f"{', '.join(sorted(FAMILIES))}); use ml.<family>.<size> of one of those, or add the family "
            "to speech.schema.instances.FAMILIES with its AWS instance-type page"
        )
    return family


def has_accelerator(instance_type: str) -> bool:
    """True for an NVIDIA-GPU (CUDA) instance type, False for a CPU-only one; ConfigError when unknown."""
    return instance_family(instance_type).kind == "cuda"


def backend_for_instance(instance_type: str, key: str = "instance_type") -> Backend:
    """The backend an instance runs: ``torch`` (CUDA) on a GPU family, ``onnx`` on a CPU family; a
    :class:`ConfigError` for a family neither image can use (Inferentia/Trainium, Graviton)."""
    family = instance_family(instance_type, key)
    if family.kind in BACKEND_OF_KIND:
        return BACKEND_OF_KIND[family.kind]
    why = ("its accelerators run AWS Neuron, and neither image has a Neuron build of Kokoro"
           if family.kind == "neuron" else "its Graviton cores are arm64 and the images are built for linux/amd64")
    raise ConfigError(
        f"{key}: {instance_type!r} ({family.processor}) cannot run this project's images: {why}; "
        "use an NVIDIA GPU family (ml.g5, ml.g6, ...) or an x86-64 CPU family (ml.c7i, ml.m7i, ...)"
    )

