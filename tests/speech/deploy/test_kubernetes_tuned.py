"""The stack's ``kubernetes.scale_down`` (a tuned HPA's scale-down): validated with the API server's
limits (the same numbers speech.deploy.kubernetes.rules restates), rendered by both autoscalers from
the one spec and valid against the official schemas; the tune artifact's fields read back."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

import kubernetes_validate
import pytest
from pydantic import ValidationError

from speech.deploy.gate import plan_model
from speech.deploy.kubernetes import rules
from speech.deploy.kubernetes.objects import model_objects
from speech.deploy.kubernetes.tuned import differences, rendered_fields, scale_down_block, target_per_pod
from speech.errors import ConfigError
from speech.schema.config import ModelConfig
from speech.schema.kubernetes import SUPPORTED_MINORS
from speech.stack.render import read_yaml, to_yaml
from tests.stack_files import MODELS, embedded_config

ROOT = Path(__file__).resolve().parents[3]
TUNED = {"window_s": 600, "select_policy": "Max", "policies": [{"type": "Pods", "value": 1, "period_s": 60}]}


def _model(stack: str, scale_down: dict | None = TUNED, **k8s_changes) -> ModelConfig:
    entry = copy.deepcopy(embedded_config(ROOT / f"examples/Pulumi.{stack}.yaml")[MODELS]["kokoro-82m"])
    entry["kubernetes"].update(k8s_changes)
    if scale_down is not None:
        entry["kubernetes"]["scale_down"] = scale_down
    return ModelConfig.model_validate(entry)


def _autoscaler(model: ModelConfig, stack: str) -> dict:
    dep = plan_model("kokoro-82m", model, endpoint=f"{stack}-kokoro-82m")
    objects = {o["kind"]: o for o in read_yaml(to_yaml(model_objects(dep, f"{stack}-kokoro-82m")))}
    return objects.get("HorizontalPodAutoscaler") or objects["ScaledObject"]


def _behavior(obj: dict) -> dict:
    spec = obj["spec"]
    return spec["behavior"] if "behavior" in spec else spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]


@pytest.mark.parametrize("stack", ["k8s-gpu", "k8s-keda"])
def test_both_autoscalers_render_the_stored_scale_down_with_the_plans_tolerance(stack):
    plain, tuned = _autoscaler(_model(stack, None), stack), _autoscaler(_model(stack), stack)
    down = _behavior(tuned)["scaleDown"]
    assert {k: v for k, v in down.items() if k != "tolerance"} == {
        "stabilizationWindowSeconds": 600, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    # The tolerance (scale in only at C_scale_min) and scale-up stay the plan's; the rest of the spec too.
    assert down["tolerance"] == _behavior(plain)["scaleDown"]["tolerance"]
    assert _behavior(tuned)["scaleUp"] == _behavior(plain)["scaleUp"]
    assert {k: v for k, v in tuned["spec"].items() if k not in ("behavior", "advanced")} == \
        {k: v for k, v in plain["spec"].items() if k not in ("behavior", "advanced")}
    assert rules.check_objects([tuned]) == []


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
def test_the_rendered_hpa_with_a_stored_scale_down_passes_strict_validation(minor):
    hpa = _autoscaler(_model("k8s-gpu", version=minor), "k8s-gpu")
    kubernetes_validate.validate(hpa, f"{minor}.0", strict=True)


@pytest.mark.parametrize("edit, field", [
    ({"window_s": rules.MAX_STABILIZATION_WINDOW_S + 1}, "window_s"),
    ({"window_s": -1}, "window_s"),
    ({"policies": []}, "policies"),
    ({"policies": [{"type": "Replicas", "value": 1, "period_s": 60}]}, "type"),
    ({"policies": [{"type": "Pods", "value": 0, "period_s": 60}]}, "value"),
    ({"policies": [{"type": "Pods", "value": 1, "period_s": 0}]}, "period_s"),
    ({"policies": [{"type": "Pods", "value": 1, "period_s": rules.MAX_PERIOD_S + 1}]}, "period_s"),
    ({"select_policy": "Average"}, "select_policy"),
    ({"period": 60}, "period"),
])
def test_the_block_refuses_what_the_api_server_refuses(edit, field):
    with pytest.raises(ValidationError) as err:
        _model("k8s-gpu", {**TUNED, **edit})
    assert field in str(err.value)
    # The same value, rendered without the schema's check, is what the restated server rules refuse.
    if field in ("window_s", "period_s", "value", "type", "select_policy"):
        rendered = {"stabilizationWindowSeconds": edit.get("window_s", 600), "selectPolicy": edit.get("select_policy", "Max"),
                    "policies": [{"type": p["type"], "value": p["value"], "periodSeconds": p["period_s"]}
                                 for p in edit.get("policies", TUNED["policies"])]}
        assert rules.scaling_rules_problems(rendered, "scaleDown")


def test_the_limits_themselves_are_accepted():
    at = {"window_s": rules.MAX_STABILIZATION_WINDOW_S,
          "policies": [{"type": "Percent", "value": 100, "period_s": rules.MAX_PERIOD_S}]}
    hpa = _autoscaler(_model("k8s-gpu", at), "k8s-gpu")
    assert _behavior(hpa)["scaleDown"]["stabilizationWindowSeconds"] == 3600


def test_targets_read_in_both_notations():
    assert target_per_pod("15990m") == target_per_pod("15.99") == Decimal("15.99")
    for bad in ("abc", "-1", "0", "1e3"):
        with pytest.raises(ConfigError):
            target_per_pod(bad)


def test_a_tuned_scale_down_is_read_from_the_artifacts_fields_and_its_rendering_compared():
    model = _model("k8s-gpu", None)
    from speech.plan.realtime import build_plan

    plan = build_plan(model.measurements.qmax, model.measurements.ttotal, model.plan)
    fields = rendered_fields(plan, model.kubernetes)
    assert differences(fields, fields) == []
    tuned = copy.deepcopy(fields)
    tuned["behavior"]["scaleDown"].update(stabilizationWindowSeconds=900, policies=[{"type": "Pods", "value": 1, "periodSeconds": 60}])
    tuned["metrics"][0]["pods"]["target"]["averageValue"] = "7995m"
    said = differences(fields, tuned)
    assert len(said) == 3 and any(s.startswith("target ") for s in said)
    block = scale_down_block(tuned, None)
    stored = model.kubernetes.model_copy(update={"scale_down": block})
    assert [s for s in differences(rendered_fields(plan, stored), tuned) if "scaleDown" in s] == []
    with pytest.raises(ConfigError, match="scaleDown"):
        scale_down_block({**tuned, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 4000, "policies": []}}}, None)
