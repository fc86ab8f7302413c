"""gpu-instance-runs-gpu-backend (policy/rules/backend.py): the model's backend matches the instance
it runs on."""
from __future__ import annotations

from tests.policy.policy_edits import messages, named, set_path


def test_gpu_instance_forced_to_the_cpu_backend_is_blocked_with_the_cost_ratio(pack, dev):
    # The hand edit a program of one's own could make: the dev stack's g5 model told to run onnx.
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    report = pack.check(dev)
    [d] = report.of("gpu-instance-runs-gpu-backend")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-model"
    assert "primaryContainer.environment.BACKEND is 'onnx', a CPU-only backend" in d.message
    # The price table: ml.g5.xlarge $1.408/h against ml.c6i.xlarge $0.204/h.
    assert "ml.g5.xlarge costs $1.408/h, 6.9x the $0.204/h of ml.c6i.xlarge" in d.message and "fix:" in d.message


def test_a_torch_variant_on_the_default_cuda_11_host_is_blocked(pack, dev):
    variant = named(dev, "kokoro-82m-config").props["productionVariants"][0]
    assert variant["inferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    del variant["inferenceAmiVersion"]
    report = pack.check(dev)
    [d] = report.of("gpu-instance-runs-gpu-backend")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-config"
    assert "driver 470 (CUDA 11.4)" in d.message and "inference_ami_version='al2-ami-sagemaker-inference-gpu-3-1'" in d.message


def test_the_cost_ratio_is_in_the_configured_prices(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    report = pack.check(dev, {"gpu-instance-runs-gpu-backend": {"hourly-prices-usd": {"ml.g5.xlarge": 2.0,
                                                                                        "ml.c7i.xlarge": 0.1}}})
    [msg] = messages(report, "gpu-instance-runs-gpu-backend", "mandatory")
    assert "ml.g5.xlarge costs $2.000/h, 20.0x the $0.100/h of ml.c7i.xlarge" in msg


def test_a_cpu_instance_may_run_the_cpu_backend(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.c7i.xlarge")
    report = pack.check(dev)
    assert messages(report, "gpu-instance-runs-gpu-backend") == []
    # ... while the measured fingerprint (ml.g5.xlarge) still tells the change apart.
    assert messages(report, "deployment-matches-fingerprint", "mandatory")
