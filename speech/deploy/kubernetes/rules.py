"""What the API server and KEDA refuse that the OpenAPI schemas do not say, restated (pure).

Sources (docs/design.md cites them):
- HorizontalPodAutoscaler: kubernetes/kubernetes pkg/apis/autoscaling/validation/validation.go
  (validateHorizontalPodAutoscalerSpec, validateBehavior, validateScalingRules,
  validateScalingPolicy, validateMetricSpec): minReplicas >= 1 (without the HPAScaleToZero gate),
  maxReplicas >= 1 and >= minReplicas, scaleTargetRef kind and name set,
  stabilizationWindowSeconds 0..3600 (MaxStabilizationWindowSeconds), at least one policy per
  direction, policy type Pods or Percent, value > 0, periodSeconds 1..1800 (MaxPeriodSeconds),
  selectPolicy Max, Min or Disabled, a Pods metric with a name and a positive averageValue;
  tolerance >= 0 (HPAScalingRules.tolerance's own description).
- KEDA ScaledObject: kedacore/keda config/crd/bases/keda.sh_scaledobjects.yaml (spec requires
  scaleTargetRef and triggers; scaleTargetRef requires name; each trigger requires type and metadata,
  whose values are strings), KEDA's admission webhook (minReplicaCount <= maxReplicaCount), and the
  scalers' documented required metadata: prometheus serverAddress, query, threshold; cron timezone,
  start, end, desiredReplicas, start differing from end (keda.sh/docs/2.17/scalers/prometheus, .../cron).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from speech.schema.kubernetes import MAX_PERIOD_S, MAX_STABILIZATION_WINDOW_S, POLICY_TYPES, SELECT_POLICIES

KEDA_REQUIRED_METADATA: dict[str, tuple[str, ...]] = {
    "prometheus": ("serverAddress", "query", "threshold"),
    "cron": ("timezone", "start", "end", "desiredReplicas"),
}
_QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


def positive_quantity(value: Any) -> bool:
    """True for a Quantity string (or number) above zero; suffixes other than none/m count as positive
    when the number is."""
    text = str(value)
    if not _QUANTITY.match(text):
        return False
    number = re.match(r"^[+-]?(\d+(\.\d*)?|\.\d+)", text)
    return number is not None and float(number.group(0)) > 0 and not text.startswith("-")


def scaling_rules_problems(rules: Mapping[str, Any] | None, where: str) -> list[str]:
    """validateScalingRules and validateScalingPolicy for one direction of a behavior."""
    if rules is None:
        return []
    out = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and not 0 <= window <= MAX_STABILIZATION_WINDOW_S:
        out.append(f"{where}.stabilizationWindowSeconds {window} must be within 0..{MAX_STABILIZATION_WINDOW_S}")
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        out.append(f"{where}.selectPolicy {select!r} must be one of {', '.join(SELECT_POLICIES)}")
    policies = rules.get("policies") or []
    if not policies:
        out.append(f"{where}.policies must specify at least one policy")
    for i, p in enumerate(policies):
        at = f"{where}.policies[{i}]"
        if p.get("type") not in POLICY_TYPES:
            out.append(f"{at}.type {p.get('type')!r} must be Pods or Percent")
        if not isinstance(p.get("value"), int) or p["value"] <= 0:
            out.append(f"{at}.value {p.get('value')!r} must be greater than zero")
        period = p.get("periodSeconds")
        if not isinstance(period, int) or not 1 <= period <= MAX_PERIOD_S:
            out.append(f"{at}.periodSeconds {period!r} must be within 1..{MAX_PERIOD_S}")
    tolerance = rules.get("tolerance")
    if tolerance is not None and (not _QUANTITY.match(str(tolerance)) or str(tolerance).startswith("-")):
        out.append(f"{where}.tolerance {tolerance!r} must be a quantity >= 0")
    return out


def replica_bounds_problems(low: Any, high: Any, where: str, low_name: str, high_name: str) -> list[str]:
    out = []
    if not isinstance(low, int) or low < 1:
        out.append(f"{where}.{low_name} {low!r} must be at least 1")
    if not isinstance(high, int) or high < 1:
        out.append(f"{where}.{high_name} {high!r} must be at least 1")
    elif isinstance(low, int) and high < low:
        out.append(f"{where}.{high_name} {high} must be >= {low_name} {low}")
    return out


def behavior_problems(behavior: Mapping[str, Any] | None, where: str) -> list[str]:
    if behavior is None:
        return []
    return scaling_rules_problems(behavior.get("scaleUp"), f"{where}.scaleUp") + \
        scaling_rules_problems(behavior.get("scaleDown"), f"{where}.scaleDown")


def hpa_problems(obj: Mapping[str, Any]) -> list[str]:
    """validateHorizontalPodAutoscalerSpec for an autoscaling/v2 HPA with Pods metrics."""
    spec = obj.get("spec") or {}
    where = f"HorizontalPodAutoscaler {obj.get('metadata', {}).get('name')!r} spec"
    out = replica_bounds_problems(spec.get("minReplicas"), spec.get("maxReplicas"), where, "minReplicas", "maxReplicas")
    ref = spec.get("scaleTargetRef") or {}
    if not ref.get("kind") or not ref.get("name"):
        out.append(f"{where}.scaleTargetRef needs kind and name")
    for i, m in enumerate(spec.get("metrics") or []):
        if m.get("type") == "Pods":
            pods = m.get("pods") or {}
            if not (pods.get("metric") or {}).get("name"):
                out.append(f"{where}.metrics[{i}].pods.metric.name is required")
            target = pods.get("target") or {}
            if target.get("type") != "AverageValue" or not positive_quantity(target.get("averageValue")):
                out.append(f"{where}.metrics[{i}].pods.target must be AverageValue with a positive averageValue")
    return out + behavior_problems(spec.get("behavior"), f"{where}.behavior")


def scaled_object_problems(obj: Mapping[str, Any]) -> list[str]:
    """KEDA's CRD required fields, its webhook's replica bounds and the scalers' required metadata."""
    spec = obj.get("spec")
    where = f"ScaledObject {obj.get('metadata', {}).get('name')!r} spec"
    if not isinstance(spec, Mapping):
        return [f"{where} is required"]
    out = []
    if not (spec.get("scaleTargetRef") or {}).get("name"):
        out.append(f"{where}.scaleTargetRef.name is required")
    triggers = spec.get("triggers")
    if not triggers:
        out.append(f"{where}.triggers is required (at least one)")
    for i, t in enumerate(triggers or []):
        at = f"{where}.triggers[{i}]"
        meta = t.get("metadata")
        if not t.get("type") or not isinstance(meta, Mapping):
            out.append(f"{at} needs type and metadata")
            continue
        out += [f"{at}.metadata.{k} must be a string" for k, v in meta.items() if not isinstance(v, str)]
        out += [f"{at}.metadata.{k} is required by the {t['type']} scaler"
                for k in KEDA_REQUIRED_METADATA.get(t["type"], ()) if not meta.get(k)]
        if t["type"] == "cron" and meta.get("start") and meta.get("start") == meta.get("end"):
            out.append(f"{at}.metadata start and end are both {meta['start']!r}; the cron scaler needs them to differ")
        if t["type"] == "prometheus" and meta.get("threshold") and not positive_quantity(meta["threshold"]):
            out.append(f"{at}.metadata.threshold {meta['threshold']!r} must be a positive number")
    low, high = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
    if low is not None or high is not None:
        out += replica_bounds_problems(low, high, where, "minReplicaCount", "maxReplicaCount")
    hpa_config = (spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
    return out + behavior_problems(hpa_config.get("behavior"), f"{where}.advanced.horizontalPodAutoscalerConfig.behavior")


def check_objects(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every server-side problem of the rendered objects (the autoscalers'); [] when none."""
    out: list[str] = []
    for obj in objects:
        if obj.get("kind") == "HorizontalPodAutoscaler":
            out += hpa_problems(obj)
        elif obj.get("kind") == "ScaledObject":
            out += scaled_object_problems(obj)
    return out
