"""gpu-instance-runs-gpu-backend: the model's backend matches the instance it runs on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.recompute import ProvenanceCache
from policy.resources import MISSING, T_ENDPOINT, UNKNOWN, Res, Stack, at, fmt
from policy.rules.common import PREVIEW, StackViolations, variant_model
from policy.rules.copies import component_model

CPU_ONLY_BACKENDS = ("onnx",)
"""Container backends that compute on the host CPU only (container/backends: onnx = onnxruntime's CPU
execution provider)."""


def _backend_of(model: Res) -> Any:
    env = model.get("primaryContainer.environment")
    if env is UNKNOWN:
        return UNKNOWN
    return at(env, "BACKEND") if isinstance(env, Mapping) else MISSING


def rule_backend_matches_instance(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """No GPU instance runs a CPU-only backend: the model an endpoint's variant (or its inference component)
    serves must not set BACKEND=onnx on an NVIDIA-GPU instance type (speech.schema.instances). The message
    quotes the price ratio to the cheapest CPU instance with as many vCPUs (speech.deploy.hosting), in the
    prices of policy config hourly-prices-usd. A BACKEND=torch variant there must run on a host with a
    CUDA 12 driver (its inferenceAmiVersion), or the GPU is unusable just the same."""
    from policy.config import DEFAULT_HOURLY_PRICES_USD
    from speech.deploy.hosting import CUDA12_INFERENCE_AMIS, GPU_INFERENCE_AMI, cheapest_cpu_alternative
    from speech.errors import ConfigError
    from speech.schema.instances import has_accelerator

    prices = dict(DEFAULT_HOURLY_PRICES_USD)
    prices.update(cfg.get("hourly-prices-usd") or {})
    for e in stack.of(T_ENDPOINT):
        configs, _ = stack.endpoint_config_of(e)
        if not configs:
            continue  # daily-cost-ceiling reports an endpoint without an identifiable configuration
        variants = configs[0].get("productionVariants")
        for v in variants if isinstance(variants, list) else []:
            itype = at(v, "instanceType")
            if not isinstance(itype, str):
                continue
            try:
                if not has_accelerator(itype):
                    continue
            except ConfigError:
                continue  # instance-type-allowed reports types outside the table
            model, _ = (variant_model(stack, configs[0], v) if at(v, "modelName") is not MISSING
                        else component_model(stack, e))
            if model is None:
                continue
            backend = _backend_of(model)
            if backend is UNKNOWN:
                yield (f"{PREVIEW}: {model.label} primaryContainer.environment is unknown; expected a GPU backend on "
                       f"{itype}", model.urn)
            elif backend == "torch" and at(v, "inferenceAmiVersion") not in (UNKNOWN, *CUDA12_INFERENCE_AMIS):
                yield (f"{configs[0].label} variant {fmt(at(v, 'variantName'))} ({itype}) runs BACKEND=torch with "
                       f"inferenceAmiVersion {fmt(at(v, 'inferenceAmiVersion'))}: SageMaker's default host for this "
                       "family has NVIDIA driver 470 (CUDA 11.4), on which the image's CUDA 12 torch sees no GPU; fix: "
                       f"inference_ami_version={GPU_INFERENCE_AMI!r} (the program sets it)", configs[0].urn)
            elif backend in CPU_ONLY_BACKENDS:
                alt = cheapest_cpu_alternative(itype, prices)
                cost = f"; {alt.sentence()}" if alt is not None else ""
                where = f" or move the model to {alt.cpu_instance_type}" if alt is not None else " or use a CPU instance"
                yield (f"{model.label} primaryContainer.environment.BACKEND is {fmt(backend)}, a CPU-only backend, on "
                       f"{e.label} variant {fmt(at(v, 'variantName'))} ({itype}, a GPU instance): the GPU sits idle"
                       f"{cost}; fix: deploy the upstream weights (weights_source hf:... or s3://..., BACKEND=torch)"
                       f"{where}", model.urn)
