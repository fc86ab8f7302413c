"""The live HorizontalPodAutoscaler or KEDA ScaledObject against the HPA the plan (or ``bench tune
--platform kubernetes``) says to run: replicas, the metric and its target, the behavior, the
scheduled floors, and whether it is paused or unable to scale."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from bench.errors import TargetError
from bench.k8s.client import KEDA_GROUP, KEDA_PLURAL, KEDA_VERSION, Cluster
from bench.k8s.names import K8sTarget
from bench.k8s.pause import PAUSED_REPLICAS

TARGET_REL_TOLERANCE = 0.005
"""A live target within 0.5 % of the planned one is the same (quantities are rounded to milli-units)."""
DEFAULT_BEHAVIOR: dict[str, dict[str, Any]] = {
    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}, {"type": "Pods", "value": 4, "periodSeconds": 15}]},
    "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                  "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
}
"""What the API server defaults an absent behavior (or direction) to."""


@dataclass(frozen=True)
class Issue:
    kind: str
    """missing | mismatch | paused | not_scaling"""
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def quantity(v: Any) -> float | None:
    from kubernetes.utils import parse_quantity

    try:
        return float(parse_quantity(str(v)))
    except (ValueError, TypeError, ArithmeticError):
        return None


def _rules(live: Mapping[str, Any] | None, direction: str) -> dict[str, Any]:
    d: dict[str, Any] = dict(DEFAULT_BEHAVIOR[direction])
    if live:
        d.update({k: v for k, v in live.items() if k in d and v is not None})
    return {"stabilizationWindowSeconds": d["stabilizationWindowSeconds"], "selectPolicy": d["selectPolicy"],
            "policies": sorted(({"type": p["type"], "value": p["value"], "periodSeconds": p["periodSeconds"]}
                                for p in d["policies"]), key=lambda p: (p["type"], p["periodSeconds"], p["value"]))}


def behavior_issues(live: Mapping[str, Any] | None, want: Mapping[str, Any], where: str) -> list[Issue]:
    out = []
    for direction in ("scaleUp", "scaleDown"):
        got, exp = _rules((live or {}).get(direction), direction), _rules(want.get(direction), direction)
        for key in ("stabilizationWindowSeconds", "selectPolicy", "policies"):
            if got[key] != exp[key]:
                out.append(Issue("mismatch", f"{where} behavior.{direction}.{key} is {got[key]}, the plan says {exp[key]}"))
        want_tol = (want.get(direction) or {}).get("tolerance")
        live_tol = ((live or {}).get(direction) or {}).get("tolerance")
        if want_tol is not None and (quantity(live_tol) is None or abs((quantity(live_tol) or 0.0) - (quantity(want_tol) or 0.0)) > 1e-3):
            out.append(Issue("mismatch", f"{where} behavior.{direction}.tolerance is {live_tol}, the plan says {want_tol} "
                                         "(an absent tolerance is the cluster's, 0.1 by default; the field needs Kubernetes 1.33+)"))
    return out


def _target_issue(live: Any, want: float, where: str) -> list[Issue]:
    got = quantity(live)
    if got is None or abs(got - want) > TARGET_REL_TOLERANCE * want:
        return [Issue("mismatch", f"{where} is {live!r}, the plan says {want:g} requests in flight per pod")]
    return []


def hpa_issues(obj: Mapping[str, Any], want: Mapping[str, Any], metric: str) -> list[Issue]:
    """An autoscaling/v2 HPA (as the API serializes it) against :func:`speech.sim.hpa_artifact.hpa_fields`."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    name = f"HorizontalPodAutoscaler {obj.get('metadata', {}).get('name')}"
    out = [Issue("mismatch", f"{name} {k} is {spec.get(k, 1 if k == 'minReplicas' else None)}, the plan says {want[k]}")
           for k in ("minReplicas", "maxReplicas") if spec.get(k, 1 if k == "minReplicas" else None) != want[k]]
    pods = [m for m in spec.get("metrics") or []
            if m.get("type") == "Pods" and ((m.get("pods") or {}).get("metric") or {}).get("name") == metric]
    if not pods:
        out.append(Issue("mismatch", f"{name} has no Pods metric {metric!r} (it scales on something the plan did not measure)"))
    else:
        target = pods[0]["pods"].get("target") or {}
        want_value = quantity(want["metrics"][0]["pods"]["target"]["averageValue"]) or 0.0
        if target.get("type") != "AverageValue":
            out.append(Issue("mismatch", f"{name} metric {metric} target type is {target.get('type')}, the plan says AverageValue"))
        else:
            out += _target_issue(target.get("averageValue"), want_value, f"{name} metric {metric} averageValue")
    out += behavior_issues(spec.get("behavior"), want["behavior"], name)
    for c in status.get("conditions") or []:
        if c.get("type") in ("AbleToScale", "ScalingActive") and c.get("status") == "False":
            out.append(Issue("not_scaling", f"{name} {c['type']} is False: {c.get('reason')}: {c.get('message', '')}".rstrip(": ")))
    return out


def scaled_object_issues(obj: Mapping[str, Any], want: Mapping[str, Any]) -> list[Issue]:
    """A KEDA ScaledObject against the same expectations: replica counts, the Prometheus trigger's
    AverageValue threshold, the HPA behavior it passes on, cron floors, and the pause annotation."""
    spec = obj.get("spec") or {}
    name = f"ScaledObject {obj.get('metadata', {}).get('name')}"
    out = []
    for key, k in (("minReplicaCount", "minReplicas"), ("maxReplicaCount", "maxReplicas")):
        got = spec.get(key, 0 if key == "minReplicaCount" else 100)
        if got != want[k]:
            out.append(Issue("mismatch", f"{name} {key} is {got}, the plan says {want[k]}"))
    prom = [t for t in spec.get("triggers") or [] if t.get("type") == "prometheus"]
    if not prom:
        out.append(Issue("mismatch", f"{name} has no prometheus trigger (it scales on something the plan did not measure)"))
    else:
        t = prom[0]
        if t.get("metricType", "AverageValue") != "AverageValue":
            out.append(Issue("mismatch", f"{name} prometheus trigger metricType is {t.get('metricType')}, the plan says AverageValue"))
        want_value = quantity(want["metrics"][0]["pods"]["target"]["averageValue"]) or 0.0
        out += _target_issue((t.get("metadata") or {}).get("threshold"), want_value, f"{name} prometheus threshold")
    live_behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior")
    out += behavior_issues(live_behavior, want["behavior"], name)
    floors = want.get("scheduledFloors") or {}
    crons = [t for t in spec.get("triggers") or [] if t.get("type") == "cron"]
    if floors and len(crons) * 2 < len(floors):
        out.append(Issue("mismatch", f"{name} has {len(crons)} cron triggers for {len(floors)} scheduled floor changes"))
    paused = ((obj.get("metadata") or {}).get("annotations") or {})
    for key in (PAUSED_REPLICAS, "autoscaling.keda.sh/paused"):
        if key in paused:
            out.append(Issue("paused", f"{name} has {key}={paused[key]!r}: KEDA is not scaling it (a measurement not restored? "
                                       "python -m bench thaw --kubernetes ...)"))
    return out


def read_issues(cluster: Cluster, target: K8sTarget, want: Mapping[str, Any], metric: str) -> list[Issue]:
    """Read the live object and compare; a missing object is an issue, not an error (it is drift)."""
    from kubernetes.client.exceptions import ApiException

    try:
        if target.autoscaler == "keda":
            obj = cluster.custom.get_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, target.namespace, KEDA_PLURAL, target.scaler)
            return scaled_object_issues(obj, want)
        hpa = cluster.autoscaling.read_namespaced_horizontal_pod_autoscaler(target.scaler, target.namespace)
    except ApiException as err:
        kind = "ScaledObject" if target.autoscaler == "keda" else "HorizontalPodAutoscaler"
        if err.status == 404:
            return [Issue("missing", f"{kind} {target.namespace}/{target.scaler} does not exist: the Deployment is not autoscaled")]
        raise TargetError(f"Kubernetes API: read {kind} {target.namespace}/{target.scaler}: {err.status} {err.reason}") from None
    return hpa_issues(cluster.api_client.sanitize_for_serialization(hpa), want, metric)
