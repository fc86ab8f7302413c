"""The Pulumi component and the YAML come from one spec: the resources the program registers under
Pulumi's mocks carry exactly the objects ``python -m speech render`` writes; a Kubernetes stack makes
no AWS call; a SageMaker stack's outputs are unchanged by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speech.infra.preview import run_preview
from speech.stack.read import load_stack_file
from speech.stack.render import read_yaml, render_stack, to_yaml

ROOT = Path(__file__).resolve().parents[3]


def _numbers_as_floats(value):
    # The engine carries every number as a double (protobuf Struct): compare values, not int vs float.
    return json.loads(json.dumps(value), parse_int=float)


@pytest.mark.parametrize("stack", ["k8s-gpu", "k8s-keda", "k8s-cpu"])
def test_registered_resources_equal_the_rendered_yaml(stack, tmp_path):
    path = ROOT / f"examples/Pulumi.{stack}.yaml"
    result = run_preview(path, stack)
    registered = {(r.inputs["kind"], r.inputs["metadata"]["name"]): _numbers_as_floats(r.inputs)
                  for r in result.resources if r.type.startswith("kubernetes:")}
    [rendered] = render_stack(load_stack_file(path, stack), stack, tmp_path)
    written = {(o["kind"], o["metadata"]["name"]): _numbers_as_floats(o) for o in read_yaml(to_yaml(rendered.objects))}
    assert registered.keys() == written.keys()
    for key, obj in written.items():
        assert registered[key] == obj, key
    # Every Kubernetes resource is a child of the model's component.
    component = next(r for r in result.resources if r.type == "speech:index:KubernetesModel")
    assert all(r.parent == component.urn for r in result.resources if r.type.startswith("kubernetes:"))


def test_a_kubernetes_stack_makes_no_aws_call_and_exports_its_workloads():
    result = run_preview(ROOT / "examples/Pulumi.k8s-gpu.yaml", "k8s-gpu")
    assert not [r for r in result.resources if r.type.startswith("aws")]
    assert not [token for token, _ in result.invokes if token.startswith("aws")]
    out = result.outputs["kubernetes"]["kokoro-82m"]
    assert out["autoscaler"] == "HorizontalPodAutoscaler" and out["gate"]["enabled"] is True
    assert [g.model for g in result.gates] == ["kokoro-82m"]


def test_a_closed_gate_registers_no_autoscaler():
    result = run_preview(ROOT / "examples/Pulumi.k8s-cpu.yaml", "k8s-cpu")
    kinds = {r.inputs.get("kind") for r in result.resources if r.type.startswith("kubernetes:")}
    assert kinds == {"Deployment", "Service", "PodDisruptionBudget"}
    assert result.outputs["kubernetes"]["kokoro-82m"]["autoscaler"] is None


def test_a_stack_mixing_sagemaker_and_kubernetes_models_deploys_both(tmp_path):
    # The dev stack's SageMaker model and the k8s-gpu model under another name, in one stack file.
    from tests.stack_files import MODELS, embedded_config

    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    k8s = embedded_config(ROOT / "examples/Pulumi.k8s-gpu.yaml")[MODELS]["kokoro-82m"]
    config[MODELS]["kokoro-k8s"] = k8s
    for art in ("qmax", "ttotal"):
        k8s["measurements"][art]["model"] = "kokoro-k8s"
    path = tmp_path / "Pulumi.mixed.yaml"
    path.write_text(json.dumps({"config": config}))
    result = run_preview(path, "mixed")
    assert set(result.outputs["endpoints"]) == {"kokoro-82m"}
    assert set(result.outputs["kubernetes"]) == {"kokoro-k8s"}
    assert {g.model: g.enabled for g in result.gates} == {"kokoro-82m": True, "kokoro-k8s": True}
    assert any(r.type == "aws:sagemaker/endpoint:Endpoint" for r in result.resources)
    assert any(r.type == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler" for r in result.resources)
