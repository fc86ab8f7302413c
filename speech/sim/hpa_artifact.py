"""What ``bench tune --platform kubernetes`` writes: the tuned HPA in the API's own shape
(autoscaling/v2 fields), its promise on the training draws and its checks on held-out draws."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from speech.schema.artifacts import Frozen
from speech.sim.hpa import ScalingRules
from speech.sim.kube import HpaSpec


class HpaPromise(Frozen):
    """One HPA's simulated result over the draws (shares are fractions; hours per draw)."""

    within_slo_share: float
    """Mean over the draws."""
    slo_share_low: float
    slo_share_bound: float
    """The share an unseen draw is predicted to keep (speech.sim.tune.unseen_share_bound)."""
    instance_hours: float
    cost_vs_floor: float
    draws: int


class HpaKnob(Frozen):
    knob: str
    seed: str
    tuned: str


class HpaCheck(Frozen):
    day: str
    seed_within_slo_share: float
    tuned_within_slo_share: float
    tuned_instance_hours: float
    tuned_keeps_share: bool


class HpaTuneArtifact(Frozen):
    kind: Literal["hpa-tune"] = "hpa-tune"
    model: str
    autoscaler: Literal["hpa", "keda"]
    trace: str
    trace_sha256: str
    seed: int
    slo_share_target: float
    plan_sha256: str
    """The measured plan the seed HPA was rendered from."""
    qmax_sha256: str | None = None
    ttotal_sha256: str | None = None
    """The sha256 of the measurement files' bytes (as a stack file's references record them), so
    ``bench plan --hpa`` stores the tuned HPA only into an entry of the same measurements; None in
    artifacts written before they were recorded."""
    knobs: list[HpaKnob]
    seed_promise: HpaPromise
    promise: HpaPromise
    checks: list[HpaCheck]
    held: bool
    """The tuned HPA kept the target on every training draw's bound and every check."""
    evaluations: int
    hpa: dict[str, Any]
    """The tuned HPA's spec fields as autoscaling/v2 takes them (minReplicas, maxReplicas, the Pods
    metric's AverageValue target, behavior), plus scheduledFloors (HH:MM -> minReplicas) when tuned."""
    created_at: datetime


def _rules(r: ScalingRules) -> dict[str, Any]:
    out: dict[str, Any] = {"stabilizationWindowSeconds": r.stabilization_window_s, "selectPolicy": r.select_policy,
                           "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_s} for p in r.policies]}
    if r.tolerance is not None:
        out["tolerance"] = f"{r.tolerance:.3f}".rstrip("0").rstrip(".") or "0"
    return out


def hpa_fields(spec: HpaSpec, metric: str = "speech_concurrent_requests") -> dict[str, Any]:
    """The spec as an autoscaling/v2 HorizontalPodAutoscalerSpec's fields (no scaleTargetRef: the
    deployment renders that), the target as a Quantity string in milli-units."""
    out: dict[str, Any] = {
        "minReplicas": spec.min_replicas, "maxReplicas": spec.max_replicas,
        "metrics": [{"type": "Pods", "pods": {"metric": {"name": metric},
                                               "target": {"type": "AverageValue",
                                                          "averageValue": f"{round(spec.target_per_pod * 1000)}m"}}}],
        "behavior": {"scaleUp": _rules(spec.scale_up), "scaleDown": _rules(spec.scale_down)},
    }
    if spec.floors:
        out["scheduledFloors"] = {f"{at // 60:02d}:{at % 60:02d}": n for at, n in sorted(spec.floors)}
    return out
