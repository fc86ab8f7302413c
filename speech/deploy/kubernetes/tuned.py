"""The HPA ``bench tune --platform kubernetes`` found, as stack inputs, and what a rendering from them
differs in (pure).

A tuned HPA moves four knobs (speech.sim.hpa_tune): the target, minReplicas, the scale-down window
and the scale-down policy. The first two are plan inputs already (``plan.target_share`` x Q_max is
the target, ``plan.min_instances`` the floor), so the plan, the rendering and the policy pack agree
on them; the scale-down behavior, which the plan's inputs cannot express, is the stack's
``kubernetes.scale_down`` (:class:`speech.schema.kubernetes.ScaleDown`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from speech.deploy.kubernetes import sizing
from speech.errors import ConfigError, describe_validation_error
from speech.schema.kubernetes import KubernetesConfig, ScaleDown, TunedFrom
from speech.schema.plan_artifacts import PlanArtifact

_TARGET = re.compile(r"^(?P<number>[0-9]+(\.[0-9]+)?)(?P<milli>m)?$")


def target_per_pod(average_value: Any) -> Decimal:
    """The Pods metric's AverageValue, in requests in flight per pod: ``15990m`` -> 15.99 (the tune
    artifact writes milli-units; the renderer plain decimals). Raises :class:`ConfigError`."""
    m = _TARGET.match(str(average_value))
    if m is None or Decimal(m.group("number")) <= 0:
        raise ConfigError(f"target averageValue {average_value!r} is not a positive quantity like 15990m or 15.99")
    number = Decimal(m.group("number"))
    return number / 1000 if m.group("milli") else number


def tuned_target_share(average_value: Any, q_max: int) -> float:
    """``plan.target_share`` whose rendered target is the tuned one: target / Q_max (the plan's
    C_scale_max is target_share x Q_max, rendered rounded down to a thousandth, so this share
    renders the same thousandths)."""
    if q_max < 1:
        raise ConfigError(f"the plan's Q_max is {q_max}: no target share can be stored")
    return float(target_per_pod(average_value) / q_max)  # in decimal: 7.995 / 50 is 0.1599, not 0.15990000000000001


def hpa_spec(hpa: Mapping[str, Any]) -> tuple[Any, Any, Mapping[str, Any]]:
    """(target averageValue, minReplicas, behavior.scaleDown) of a tune artifact's ``hpa`` fields;
    :class:`ConfigError` when one is missing."""
    metrics = [m for m in hpa.get("metrics") or [] if isinstance(m, Mapping) and m.get("type") == "Pods"]
    target = ((metrics[0].get("pods") or {}).get("target") or {}).get("averageValue") if len(metrics) == 1 else None
    down = (hpa.get("behavior") or {}).get("scaleDown")
    if target is None or not isinstance(hpa.get("minReplicas"), int) or not isinstance(down, Mapping):
        raise ConfigError("the tuned HPA lacks one of metrics[Pods].target.averageValue, minReplicas, behavior.scaleDown; "
                          "re-run bench tune --platform kubernetes")
    return target, hpa["minReplicas"], down


def scale_down_block(hpa: Mapping[str, Any], tuned_from: TunedFrom | None) -> ScaleDown:
    """The tuned ``behavior.scaleDown`` as the stack's ``kubernetes.scale_down``, validated with the
    API server's limits (window 0..3600 s, Pods|Percent, value > 0, period 1..1800 s); the tolerance
    is left to the plan (it renders the plan's C_scale_min as the tune seed did)."""
    _, _, down = hpa_spec(hpa)
    try:
        return ScaleDown(window_s=down.get("stabilizationWindowSeconds", 300), select_policy=down.get("selectPolicy", "Max"),
                         policies=[{"type": p.get("type"), "value": p.get("value"), "period_s": p.get("periodSeconds")}
                                   for p in down.get("policies") or [] if isinstance(p, Mapping)],
                         tuned_from=tuned_from)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, "the tuned behavior.scaleDown")) from None


def rendered_fields(plan: PlanArtifact, k8s: KubernetesConfig) -> dict[str, Any]:
    """The autoscaler's spec fields a rendering of ``plan`` with ``k8s`` has, in the tune artifact's
    shape (speech.deploy.kubernetes.objects.hpa and scaled_object take the same numbers)."""
    return {"minReplicas": plan.fleet.min_instances, "maxReplicas": plan.fleet.max_instances,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": k8s.metric.name}, "target": {
                "type": "AverageValue", "averageValue": sizing.quantity(sizing.pods_target(plan))}}}],
            "behavior": sizing.behavior(plan, tolerance=k8s.has_tolerance, scale_down=k8s.scale_down)}


def differences(rendered: Mapping[str, Any], tuned: Mapping[str, Any]) -> list[str]:
    """Where the rendering differs from the tuned HPA, one phrase each ([] when it deploys the tuned
    one): target, minReplicas, maxReplicas, and each direction's window, selectPolicy and policies
    (a tolerance only where both have one: minors before 1.33 have none)."""
    out = []
    got, want = target_per_pod(hpa_spec(rendered)[0]), target_per_pod(hpa_spec(tuned)[0])
    if got != want:
        out.append(f"target {got} in flight/pod (tuned {want})")
    for key in ("minReplicas", "maxReplicas"):
        if rendered.get(key) != tuned.get(key):
            out.append(f"{key} {rendered.get(key)} (tuned {tuned.get(key)})")
    for direction in ("scaleUp", "scaleDown"):
        a = dict((rendered.get("behavior") or {}).get(direction) or {})
        b = dict((tuned.get("behavior") or {}).get(direction) or {})
        if "tolerance" not in a or "tolerance" not in b:
            a.pop("tolerance", None)
            b.pop("tolerance", None)
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"behavior.{direction}.{key} {a.get(key)!r} (tuned {b.get(key)!r})")
    return out
