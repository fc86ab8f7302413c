"""Kubernetes models (``hosting: kubernetes``): the autoscaler (autoscaling/v2 HPA or KEDA
ScaledObject) exists only for a measured, feasible plan and never targets more than it; the
Deployment drains for at least the measured drain and has its readiness probe.

The plan is recomputed as for an endpoint (speech.plan.realtime.build_plan) from the provenance
document the program stores in the model's ConfigMap (``data["provenance.json"]``), found by the
``speech-endpoints/provenance-sha256`` annotation the autoscaler and the Deployment carry.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from policy.recompute import FIX_PROVENANCE, NoProvenance
from policy.resources import UNKNOWN, Res, Stack, is_unknown
from policy.rules.common import StackViolations
from speech.deploy import provenance as pv
from speech.deploy.kubernetes.objects import PROVENANCE_KEY, annotation_key
from speech.deploy.kubernetes.sizing import drain_s, min_grace_period_s, pods_target
from speech.errors import SpeechError
from speech.plan.realtime import build_plan
from speech.schema.plan_artifacts import PlanArtifact

T_K8S_CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
T_K8S_DEPLOYMENT = "kubernetes:apps/v1:Deployment"
T_K8S_HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
T_K8S_SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
FIX_K8S = "fix: let the program render it from the plan (bench plan --stack, then pulumi preview or python -m speech render)"


def label(res: Res) -> str:
    return res.label


def annotations_of(res: Res) -> Mapping[str, Any]:
    value = res.get("metadata.annotations")
    if is_unknown(value):
        raise NoProvenance(f"cannot verify during preview: the annotations of {label(res)} are unknown", preview=True)
    return value if isinstance(value, Mapping) else {}


def k8s_origin(res: Res) -> Any:
    """The ``speech-endpoints/origin`` annotation of an autoscaler (None when absent or unknown)."""
    notes = res.get("metadata.annotations")
    return notes.get(annotation_key(pv.TAG_ORIGIN)) if isinstance(notes, Mapping) else None


def k8s_plan(stack: Stack, res: Res) -> tuple[PlanArtifact, pv.ProvenanceDocument]:
    """The plan recomputed from the provenance document ``res`` points at, or :class:`NoProvenance`."""
    notes = annotations_of(res)
    sha, model = notes.get(annotation_key(pv.TAG_DOC_SHA)), notes.get(annotation_key(pv.TAG_MODEL))
    if not isinstance(sha, str) or not isinstance(model, str):
        raise NoProvenance(f"{label(res)} has no provenance annotations ({annotation_key(pv.TAG_DOC_SHA)}, "
                           f"{annotation_key(pv.TAG_MODEL)}); {FIX_PROVENANCE}")
    texts = [_data(m) for m in stack.of(T_K8S_CONFIG_MAP)]
    if any(t is UNKNOWN for t in texts):
        raise NoProvenance(f"cannot verify during preview: a provenance ConfigMap's data is unknown for {label(res)}", preview=True)
    matching = [t for t in texts if isinstance(t, str) and pv.document_sha256(t) == sha]
    if not matching:
        raise NoProvenance(f"{label(res)} points at provenance document {sha[:19]}..., but no ConfigMap in this stack "
                           f"holds it (data {PROVENANCE_KEY!r}); the document or the annotation was edited; {FIX_PROVENANCE}")
    try:
        doc = pv.parse_document(matching[0], f"provenance ConfigMap of {label(res)}")
        plan = build_plan(doc.measurements.qmax, doc.measurements.ttotal, doc.inputs,
                          allow_config_mismatch=doc.allow_config_mismatch, max_instances_cap=doc.max_instances_cap)
    except SpeechError as err:
        raise NoProvenance(f"the plan cannot be recomputed for {label(res)}: {err}") from None
    if doc.budget is not None:
        from speech.plan.budget import cap_plan

        plan = cap_plan(plan, doc.budget)
    if doc.model != model:
        raise NoProvenance(f"{label(res)} is annotated for model {model!r}, its provenance document is for {doc.model!r}")
    expected = {annotation_key(k): v for k, v in pv.plan_tags(plan, doc.measurements).items()}
    wrong = [f"{k}={notes.get(k)!r} (plan: {v!r})" for k, v in expected.items() if notes.get(k) != v]
    if wrong:
        raise NoProvenance(f"{label(res)} annotations disagree with the plan recomputed from its provenance document: "
                           f"{'; '.join(wrong)}; {FIX_K8S}")
    return plan, doc


def _data(config_map: Res) -> Any:
    data = config_map.get("data")
    if is_unknown(data):
        return UNKNOWN
    return data.get(PROVENANCE_KEY) if isinstance(data, Mapping) else None


def quantity(value: Any) -> Decimal | None:
    from kubernetes.utils.quantity import parse_quantity

    try:
        return Decimal(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation):
        return None


def autoscaler_view(res: Res) -> tuple[Any, Any, Any]:
    """(target per pod, min, max) of an HPA or a ScaledObject as deployed."""
    if res.type == T_K8S_HPA:
        metrics = res.get("spec.metrics") or []
        pods = [m for m in metrics if isinstance(m, Mapping) and m.get("type") == "Pods"]
        target = ((pods[0].get("pods") or {}).get("target") or {}).get("averageValue") if len(pods) == 1 else None
        return target, res.get("spec.minReplicas"), res.get("spec.maxReplicas")
    triggers = res.get("spec.triggers") or []
    prom = [t for t in triggers if isinstance(t, Mapping) and t.get("type") == "prometheus"]
    target = (prom[0].get("metadata") or {}).get("threshold") if len(prom) == 1 else None
    return target, res.get("spec.minReplicaCount"), res.get("spec.maxReplicaCount")


def _show(value: Any) -> str:
    """A number as a user wrote it (the engine sends every number as a double)."""
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else repr(value)


def _replicas(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and float(value).is_integer() else None


def rule_k8s_autoscaler_plan(stack: Stack, cfg: Mapping[str, Any], cache: Any) -> StackViolations:
    """``kubernetes-autoscaler-requires-measured-plan``: every HPA and ScaledObject has a measured,
    feasible plan (provenance, no stop finding, an allowed origin), targets at most the plan's
    C_scale_max per pod and keeps the plan's floor and cap."""
    allow = {"measured": True, "reference": bool(cfg.get("allow-reference-artifacts", True)),
             "assumption": bool(cfg.get("allow-assumption-artifacts", False))}
    for res in stack.of(T_K8S_HPA, T_K8S_SCALED_OBJECT):
        try:
            plan, _ = k8s_plan(stack, res)
        except NoProvenance as err:
            yield err.message, res.urn
            continue
        yield from _plan_problems(res, plan, allow)


def _plan_problems(res: Res, plan: PlanArtifact, allow: Mapping[str, bool]) -> Iterator[tuple[str, str | None]]:
    if plan.verdict == "stop":
        stops = [f for f in plan.findings if f.level == "stop"]
        yield (f"{label(res)} scales a plan with stop findings ({', '.join(f.name for f in stops)}): {stops[0].message}; "
               "fix the plan's inputs or measurements first"), res.urn
    if not allow.get(plan.provenance.origin, False):
        key = "allow-reference-artifacts" if plan.provenance.origin == "reference" else "allow-assumption-artifacts"
        yield (f"{label(res)} scales from {plan.provenance.origin!r} figures, not measurements of this model; policy "
               f"config {key} is false; fix: run bench qmax and bench ttotal against one pod and re-plan"), res.urn
    target, low, high = autoscaler_view(res)
    want = Decimal(str(pods_target(plan)))
    got = quantity(target)
    if got is None:
        yield f"{label(res)} has no single per-pod target on the in-flight metric (got {target!r}); {FIX_K8S}", res.urn
    elif got > want:
        yield (f"{label(res)} targets {target} in-flight requests per pod, above the plan's C_scale_max {want} "
               f"(Q_max {plan.q_max}): pods would queue past the SLO before the fleet grows; {FIX_K8S}"), res.urn
    if _replicas(low) is None or _replicas(low) < plan.fleet.min_instances:  # type: ignore[operator]
        yield f"{label(res)} min replicas {_show(low)} is below the plan's floor {plan.fleet.min_instances}; {FIX_K8S}", res.urn
    if _replicas(high) is None or _replicas(high) > plan.fleet.max_instances:  # type: ignore[operator]
        yield f"{label(res)} max replicas {_show(high)} is above the plan's cap {plan.fleet.max_instances}; {FIX_K8S}", res.urn


def rule_k8s_drain(stack: Stack, cfg: Mapping[str, Any], cache: Any) -> StackViolations:
    """``kubernetes-grace-covers-drain``: a measured model's Deployment gives every pod at least its
    preStop wait + the measured drain (queue depth / measured throughput) before the kill."""
    for res in stack.of(T_K8S_DEPLOYMENT):
        try:
            notes = annotations_of(res)
        except NoProvenance as err:
            yield err.message, res.urn
            continue
        if annotation_key(pv.TAG_DOC_SHA) not in notes:
            continue  # unmeasured: no autoscaler may exist (the rule above), the container's own drain applies
        try:
            plan, doc = k8s_plan(stack, res)
        except NoProvenance as err:
            yield err.message, res.urn
            continue
        pod = res.get("spec.template.spec") or {}
        wait = max([_sleep_s(c) for c in pod.get("containers") or []] or [0])
        drain = drain_s(doc.measurements.qmax, plan.queue_max_depth)
        need = min_grace_period_s(drain, wait)
        grace = pod.get("terminationGracePeriodSeconds", 30)  # the API's default when absent
        if not isinstance(grace, int | float) or grace < need:
            yield (f"{label(res)} terminationGracePeriodSeconds {_show(grace)} is shorter than the preStop wait {wait} s + the "
                   f"measured drain {math.ceil(drain)} s ({plan.queue_max_depth} requests at the measured throughput): "
                   f"scale-in would cut streams; at least {need}; {FIX_K8S}"), res.urn


def _sleep_s(container: Mapping[str, Any]) -> int:
    sleep = ((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
    seconds = sleep.get("seconds", 0)
    return int(seconds) if isinstance(seconds, int | float) else 0


def rule_k8s_readiness(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    """``kubernetes-readiness-probe``: every container of a Deployment has a readiness probe (the
    project's container: GET /ping, 503 while loading and draining), so no pod gets traffic before
    its model is loaded or after it began to drain."""
    if res.type != T_K8S_DEPLOYMENT:
        return
    containers = res.get("spec.template.spec.containers")
    if is_unknown(containers):
        return
    for c in containers or []:
        probe = c.get("readinessProbe") if isinstance(c, Mapping) else None
        if not isinstance(probe, Mapping) or not probe:
            yield (f"{label(res)} container {c.get('name') if isinstance(c, Mapping) else c!r} has no readinessProbe: "
                   f"pods would get requests while the model loads and while they drain; add httpGet /ping; {FIX_K8S}")
