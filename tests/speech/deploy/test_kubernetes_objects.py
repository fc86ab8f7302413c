"""The rendered Kubernetes objects: valid against the official OpenAPI schemas (strict) of every
supported minor, free of what the API server and KEDA refuse beyond them, and carrying the plan's
numbers (read from the YAML ``render`` writes and from the plan, independently)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import kubernetes_validate
import pytest

from speech.deploy.gate import plan_model
from speech.deploy.hosting import startup_phase_s
from speech.deploy.kubernetes import rules, sizing
from speech.deploy.kubernetes.objects import model_objects
from speech.errors import ConfigError
from speech.plan.realtime import build_plan
from speech.schema.config import ModelConfig
from speech.schema.kubernetes import SUPPORTED_MINORS
from speech.stack.read import load_stack_file
from speech.stack.render import read_yaml, render_stack, to_yaml
from tests.stack_files import MODELS, embedded_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ["k8s-gpu", "k8s-keda", "k8s-cpu"]
BUILT_IN = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"}


def _model(stack: str, **k8s_changes) -> ModelConfig:
    entry = copy.deepcopy(embedded_config(ROOT / f"examples/Pulumi.{stack}.yaml")[MODELS]["kokoro-82m"])
    entry["kubernetes"].update(k8s_changes)
    return ModelConfig.model_validate(entry)


def _objects(model: ModelConfig, stack: str = "k8s-gpu") -> dict[str, dict]:
    dep = plan_model("kokoro-82m", model, endpoint=f"{stack}-kokoro-82m")
    # Through YAML and back: what kubectl would send.
    return {o["kind"]: o for o in read_yaml(to_yaml(model_objects(dep, f"{stack}-kokoro-82m")))}


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
@pytest.mark.parametrize("stack", EXAMPLES)
def test_every_built_in_object_passes_strict_validation_for_every_supported_minor(stack, minor):
    objects = _objects(_model(stack, version=minor), stack)
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(objects)
    for kind, obj in objects.items():
        if kind in BUILT_IN:
            # Raises kubernetes_validate.ValidationError naming the field on any unknown or mistyped one.
            assert kubernetes_validate.validate(obj, minor, strict=True) == minor


def test_strict_validation_is_strict():
    # The same check refuses a field the schema does not have, and tolerance on 1.32.
    hpa = _objects(_model("k8s-gpu", version="1.35"))["HorizontalPodAutoscaler"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hpa, "1.32", strict=True)
    deployment = _objects(_model("k8s-gpu"))["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.35", strict=True)


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
def test_tolerance_only_where_the_minor_has_it(minor):
    behavior = _objects(_model("k8s-gpu", version=minor))["HorizontalPodAutoscaler"]["spec"]["behavior"]
    has = tuple(int(p) for p in minor.split(".")) >= (1, 33)
    assert ("tolerance" in behavior["scaleUp"]) is has and ("tolerance" in behavior["scaleDown"]) is has


@pytest.mark.parametrize("stack", ["k8s-gpu", "k8s-keda"])
def test_rendered_autoscalers_pass_the_restated_server_rules(stack):
    objects = _objects(_model(stack), stack)
    assert rules.check_objects(objects.values()) == []


@pytest.mark.parametrize(("path", "value", "says"), [
    (("behavior", "scaleDown", "stabilizationWindowSeconds"), 3601, "within 0..3600"),
    (("behavior", "scaleUp", "stabilizationWindowSeconds"), -1, "within 0..3600"),
    (("behavior", "scaleDown", "policies", 0, "periodSeconds"), 1801, "within 1..1800"),
    (("behavior", "scaleDown", "policies", 0, "periodSeconds"), 0, "within 1..1800"),
    (("behavior", "scaleDown", "policies", 0, "type"), "Instances", "must be Pods or Percent"),
    (("behavior", "scaleDown", "policies", 0, "value"), 0, "greater than zero"),
    (("behavior", "scaleDown", "selectPolicy"), "Avg", "Max, Min, Disabled"),
    (("behavior", "scaleUp", "policies"), [], "at least one policy"),
    (("minReplicas",), 31, "must be >= minReplicas"),
    (("minReplicas",), 0, "at least 1"),
    (("metrics", 0, "pods", "target", "averageValue"), "0", "positive averageValue"),
])
def test_each_restated_hpa_rule_refuses(path, value, says):
    hpa = _objects(_model("k8s-gpu"))["HorizontalPodAutoscaler"]
    node = hpa["spec"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    problems = rules.hpa_problems(hpa)
    assert any(says in p for p in problems), problems


@pytest.mark.parametrize(("mutate", "says"), [
    (lambda s: s.pop("triggers"), "triggers is required"),
    (lambda s: s["scaleTargetRef"].pop("name"), "scaleTargetRef.name is required"),
    (lambda s: s["triggers"][0]["metadata"].pop("query"), "query is required by the prometheus scaler"),
    (lambda s: s["triggers"][1]["metadata"].pop("timezone"), "timezone is required by the cron scaler"),
    (lambda s: s["triggers"][1]["metadata"].update(desiredReplicas=12), "must be a string"),
    (lambda s: s.update(minReplicaCount=40), "must be >= minReplicaCount"),
    (lambda s: s["triggers"][1]["metadata"].update(end="30 7 * * *"), "needs them to differ"),
    (lambda s: s["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"].update(
        stabilizationWindowSeconds=7200), "within 0..3600"),
])
def test_each_restated_keda_rule_refuses(mutate, says):
    so = _objects(_model("k8s-keda"), "k8s-keda")["ScaledObject"]
    mutate(so["spec"])
    problems = rules.scaled_object_problems(so)
    assert any(says in p for p in problems), problems


def test_the_hpa_in_the_written_yaml_carries_the_plans_numbers(tmp_path):
    config = load_stack_file(ROOT / "examples/Pulumi.k8s-gpu.yaml")
    [rendered] = render_stack(config, "k8s-gpu", tmp_path)
    hpa = {o["kind"]: o for o in read_yaml(to_yaml(rendered.objects))}["HorizontalPodAutoscaler"]["spec"]
    m = config.models["kokoro-82m"]
    plan = build_plan(m.measurements.qmax, m.measurements.ttotal, m.plan)
    # Target: the plan's C_scale_max (client units), never above it, within a thousandth.
    target = float(hpa["metrics"][0]["pods"]["target"]["averageValue"])
    assert plan.thresholds.c_scale_max - 0.001 < target <= plan.thresholds.c_scale_max
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (plan.fleet.min_instances, plan.fleet.max_instances)
    down, up = hpa["behavior"]["scaleDown"], hpa["behavior"]["scaleUp"]
    assert down["stabilizationWindowSeconds"] == plan.scale_in.window_s
    assert {(p["type"], p["value"], p["periodSeconds"]) for p in down["policies"]} == {
        ("Percent", -plan.scale_in.step_percent, plan.cooldowns.scale_in_s),
        ("Pods", plan.scale_in.min_removed, plan.cooldowns.scale_in_s)}
    assert down["selectPolicy"] == "Max"  # the larger of the step share and the minimum step
    assert up["policies"] == [{"type": "Percent", "value": math.ceil(100 * (plan.inputs.surge_ratio - 1) - 1e-9),
                               "periodSeconds": plan.cooldowns.scale_out_s}]
    # Scale-in only at or below C_scale_min: 1 - tolerance <= C_scale_min / C_scale_max.
    assert 1 - float(down["tolerance"]) <= plan.thresholds.c_scale_min / plan.thresholds.c_scale_max
    assert float(up["tolerance"]) == 0


def test_keda_carries_the_same_numbers_and_the_scheduled_floors_as_cron():
    model = _model("k8s-keda")
    objects = _objects(model, "k8s-keda")
    so = objects["ScaledObject"]["spec"]
    plan = build_plan(model.measurements.qmax, model.measurements.ttotal, model.plan)
    hpa = _objects(_model("k8s-gpu", version="1.33"))["HorizontalPodAutoscaler"]["spec"]
    assert so["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == hpa["behavior"]
    assert so["triggers"][0]["metadata"]["threshold"] == hpa["metrics"][0]["pods"]["target"]["averageValue"]
    assert (so["minReplicaCount"], so["maxReplicaCount"]) == (plan.fleet.min_instances, plan.fleet.max_instances)
    # KEDA's cooldownPeriod governs scaling to zero only: never used as the scale-in window.
    assert "cooldownPeriod" not in so
    crons = [t["metadata"] for t in so["triggers"] if t["type"] == "cron"]
    raised = [f for f in plan.schedule.floors if f.min_instances > plan.fleet.min_instances]
    assert [(c["start"], c["desiredReplicas"]) for c in crons] == [
        (f"{int(f.at[3:])} {int(f.at[:2])} * * *", str(f.min_instances)) for f in raised]
    assert crons[0]["end"] == "0 20 * * *" and crons[0]["timezone"] == "Europe/Berlin"


def test_probes_and_drain_come_from_the_measurements():
    model = _model("k8s-gpu")
    plan = build_plan(model.measurements.qmax, model.measurements.ttotal, model.plan)
    pod = _objects(model)["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/ping"
    startup = c["startupProbe"]
    # The startup budget covers the measured start-up three times over.
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 3 * startup_phase_s(model.measurements.ttotal)
    drain = plan.queue_max_depth / next(lv.throughput_rps for lv in model.measurements.qmax.ladder
                                        if lv.concurrency == plan.queue_max_depth)
    wait = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= wait + math.ceil(drain)
    env = {e["name"]: e["value"] for e in c["env"]}
    assert int(env["DRAIN_TIMEOUT_S"]) + wait < pod["terminationGracePeriodSeconds"]
    assert env["QUEUE_MAX_DEPTH"] == str(plan.queue_max_depth)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_plan_past_kubernetes_limits_is_refused_naming_the_field():
    entry = copy.deepcopy(embedded_config(ROOT / "examples/Pulumi.k8s-gpu.yaml")[MODELS]["kokoro-82m"])
    entry["plan"]["scale_in_cooldown_s"] = 3000
    dep = plan_model("kokoro-82m", ModelConfig.model_validate(entry), endpoint="k8s-gpu-kokoro-82m")
    with pytest.raises(ConfigError, match=r"periodSeconds 3000 must be within 1..1800"):
        model_objects(dep, "k8s-gpu-kokoro-82m")


def test_unmeasured_model_gets_no_autoscaler_and_runs_its_floor():
    objects = _objects(_model("k8s-cpu"), "k8s-cpu")
    assert set(objects) == {"Deployment", "Service", "PodDisruptionBudget"}
    assert objects["Deployment"]["spec"]["replicas"] == 1


def test_quantity_never_exceeds_the_value():
    for value in (15.9904, 10.6667, 16.0, 0.0015, 2.5):
        q = sizing.quantity(value)
        assert float(q) <= value < float(q) + 0.001
        assert rules.positive_quantity(q) or value < 0.001


def test_the_shipped_adapter_rule_serves_the_metric_the_hpa_reads():
    from ruamel.yaml import YAML

    values = YAML(typ="safe").load((ROOT / "examples/kubernetes/prometheus-adapter-values.yaml").read_text())
    [rule] = values["rules"]["custom"]
    hpa = _objects(_model("k8s-gpu"))["HorizontalPodAutoscaler"]
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    assert rule["name"]["as"] == metric and rule["seriesQuery"].startswith(metric + "{")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
