"""The pack's Kubernetes rules in process: the example stacks pass every rule; one realistic edit of
what the engine would send violates each rule, with a message naming the value and the plan's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from policy.check import preview_resources
from tests.policy.policy_edits import messages, named, set_path
from tests.stack_files import MODELS, embedded_config

ROOT = Path(__file__).resolve().parents[3]
PLAN = "kubernetes-autoscaler-requires-measured-plan"


@pytest.fixture(scope="module")
def _k8s_resources():
    return {stack: preview_resources(ROOT / f"examples/Pulumi.{stack}.yaml", stack)[0]
            for stack in ("k8s-gpu", "k8s-keda", "k8s-cpu")}


@pytest.fixture
def gpu(_k8s_resources):
    return copy.deepcopy(_k8s_resources["k8s-gpu"])


@pytest.fixture
def keda(_k8s_resources):
    return copy.deepcopy(_k8s_resources["k8s-keda"])


@pytest.mark.parametrize("stack", ["k8s-gpu", "k8s-keda", "k8s-cpu"])
def test_the_example_stacks_pass_every_rule(pack, _k8s_resources, stack):
    report = pack.check(_k8s_resources[stack])
    assert [d.level for d in report.diagnostics] in ([], ["advisory"])
    # As for an endpoint: the advisory notice that the autoscaler rests on reference figures.
    notices = messages(report, "scaling-from-unmeasured-figures", "advisory")
    assert len(notices) == (0 if stack == "k8s-cpu" else 1)
    assert all("scales from 'reference' figures" in n for n in notices)


def test_a_target_above_the_plans_is_refused(pack, gpu):
    set_path(named(gpu, "kokoro-82m-horizontalpodautoscaler"), "spec.metrics.0.pods.target.averageValue", "37.5")
    [msg] = messages(pack.check(gpu), PLAN, "mandatory")
    assert "targets 37.5 in-flight requests per pod, above the plan's C_scale_max 15.9904" in msg


def test_a_keda_threshold_above_the_plans_is_refused(pack, keda):
    set_path(named(keda, "kokoro-82m-scaledobject"), "spec.triggers.0.metadata.threshold", "16")
    [msg] = messages(pack.check(keda), PLAN, "mandatory")
    assert "targets 16 in-flight requests per pod" in msg


def test_a_lower_target_passes(pack, gpu):
    # Scaling out earlier than the plan costs pods, not the SLO: not this rule's business.
    set_path(named(gpu, "kokoro-82m-horizontalpodautoscaler"), "spec.metrics.0.pods.target.averageValue", "12")
    assert messages(pack.check(gpu), PLAN) == []


def test_floor_and_cap_must_hold(pack, gpu):
    hpa = named(gpu, "kokoro-82m-horizontalpodautoscaler")
    set_path(hpa, "spec.minReplicas", 1)
    set_path(hpa, "spec.maxReplicas", 40)
    msgs = messages(pack.check(gpu), PLAN, "mandatory")
    assert any("min replicas 1 is below the plan's floor 2" in m for m in msgs)
    assert any("max replicas 40 is above the plan's cap 30" in m for m in msgs)


def test_an_autoscaler_without_its_provenance_document_is_refused(pack, gpu):
    gpu = [r for r in gpu if r.name != "kokoro-82m-configmap"]
    [msg] = messages(pack.check(gpu), PLAN, "mandatory")
    assert "no ConfigMap in this stack holds it" in msg


def test_an_edited_provenance_document_is_refused(pack, gpu):
    cm = named(gpu, "kokoro-82m-configmap")
    doc = json.loads(cm.props["data"]["provenance.json"])
    doc["inputs"]["peak_rps"] = 5000.0
    cm.props["data"]["provenance.json"] = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    msgs = messages(pack.check(gpu), PLAN, "mandatory")
    assert msgs and "no ConfigMap in this stack holds it" in msgs[0]


def test_a_hand_written_autoscaler_without_provenance_is_refused(pack, gpu):
    del named(gpu, "kokoro-82m-horizontalpodautoscaler").props["metadata"]["annotations"]
    [msg] = messages(pack.check(gpu), PLAN, "mandatory")
    assert "has no provenance annotations" in msg


def test_an_infeasible_plan_gets_no_autoscaler(pack, tmp_path):
    # An SLO below the uncontended p95 TTFAB: the plan has a stop finding, the gate stays closed
    # (no HPA is rendered), and an HPA added by hand for it is refused.
    config = embedded_config(ROOT / "examples/Pulumi.k8s-gpu.yaml")
    config[MODELS]["kokoro-82m"]["plan"]["slo_ms"] = 50.0
    path = tmp_path / "Pulumi.stop.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "stop")
    assert not [r for r in resources if r.type == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"]
    source = preview_resources(ROOT / "examples/Pulumi.k8s-gpu.yaml", "k8s-gpu")[0]
    hpa = copy.deepcopy(named(source, "kokoro-82m-horizontalpodautoscaler"))
    hpa.props["metadata"]["annotations"] = named(resources, "kokoro-82m-deployment").props["metadata"]["annotations"]
    hpa.urn = None
    msgs = messages(pack.check([*resources, hpa]), PLAN, "mandatory")
    assert any("scales a plan with stop findings" in m for m in msgs), msgs


def test_reference_figures_are_refused_when_config_forbids_them(pack, gpu):
    report = pack.check(gpu, {PLAN: {"allow-reference-artifacts": False}})
    [msg] = messages(report, PLAN, "mandatory")
    assert "from 'reference' figures" in msg and "allow-reference-artifacts is false" in msg


def test_a_grace_period_shorter_than_the_drain_is_refused(pack, gpu):
    dep = named(gpu, "kokoro-82m-deployment")
    set_path(dep, "spec.template.spec.terminationGracePeriodSeconds", 12)
    [msg] = messages(pack.check(gpu), "kubernetes-grace-covers-drain", "mandatory")
    # preStop 10 s + ceil(50 requests / 17.92 rps) = 13 s.
    assert "terminationGracePeriodSeconds 12 is shorter than the preStop wait 10 s + the measured drain 3 s" in msg
    assert "at least 13" in msg


def test_a_deployment_without_readiness_is_refused(pack, gpu):
    del named(gpu, "kokoro-82m-deployment").props["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    [msg] = messages(pack.check(gpu), "kubernetes-readiness-probe", "mandatory")
    assert "container 'speech' has no readinessProbe" in msg
