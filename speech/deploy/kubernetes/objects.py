"""One model's Kubernetes objects as plain dicts: the one spec the Pulumi component and
``python -m speech render`` both build from (speech.infra.components.kubernetes, speech.render).

The objects (docs/kubernetes.md maps every number to the plan):
- a ConfigMap holding the provenance document (the policy pack recomputes the plan from it);
- the Deployment: the project's container, startup probe sized from the measured start-up,
  readiness on /ping, liveness on the port, preStop wait and a grace period from the measured drain;
- a Service and a PodDisruptionBudget;
- with a measured, feasible plan (the gate): an autoscaling/v2 HorizontalPodAutoscaler on a Pods
  metric, or a KEDA ScaledObject (Prometheus trigger, the same behavior, scheduled floors as cron).
"""

from __future__ import annotations

from typing import Any

from speech.deploy.gate import ModelDeployment
from speech.deploy.kubernetes import sizing
from speech.deploy.provenance import TAG_DOC_SHA, TAG_PREFIX, document_sha256, provenance_tags
from speech.errors import ConfigError
from speech.schema.config import WEEKDAYS, FloorSchedule, ModelConfig, ScheduledFloor
from speech.schema.instances import backend_for_instance
from speech.schema.kubernetes import KubernetesConfig

ANNOTATION_PREFIX = "speech-endpoints/"
"""Provenance annotations: ``speech:q-max`` becomes ``speech-endpoints/q-max``."""
PROVENANCE_KEY = "provenance.json"
"""The ConfigMap's data key holding the provenance document."""
CONTAINER = "speech"
HPA_API, KEDA_API = "autoscaling/v2", "keda.sh/v1alpha1"


def annotation_key(tag: str) -> str:
    """``speech:<name>`` -> ``speech-endpoints/<name>`` (a qualified annotation key)."""
    return ANNOTATION_PREFIX + tag.removeprefix(TAG_PREFIX)


def provenance_annotations(dep: ModelDeployment) -> dict[str, str]:
    """The provenance tags of the SageMaker path as annotations (the same values)."""
    plan = dep.plan
    if plan is None or dep.document_text is None or dep.config.measurements is None:
        return {}
    tags = provenance_tags(dep.name, plan, dep.document_text, dep.config.measurements)
    return {annotation_key(k): v for k, v in tags.items()}


def labels(dep: ModelDeployment, fullname: str) -> dict[str, str]:
    k8s = _k8s(dep.config)
    return {**k8s.labels, "app.kubernetes.io/name": dep.name, "app.kubernetes.io/instance": fullname,
            "app.kubernetes.io/part-of": "speech-endpoints", "app.kubernetes.io/managed-by": "speech-endpoints"}


def selector(dep: ModelDeployment, fullname: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": dep.name, "app.kubernetes.io/instance": fullname}


def _k8s(model: ModelConfig) -> KubernetesConfig:
    if model.kubernetes is None:
        raise ConfigError("a Kubernetes rendering needs hosting: kubernetes and its kubernetes block")
    return model.kubernetes


def _meta(dep: ModelDeployment, name: str, fullname: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": _k8s(dep.config).namespace, "labels": labels(dep, fullname)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def container_env(dep: ModelDeployment) -> list[dict[str, str]]:
    """The container's settings, the user's environment first so the plan's values win."""
    model, plan, k8s = dep.config, dep.plan, _k8s(dep.config)
    env = dict(model.environment)
    env.update({"PORT": str(k8s.port), "MODEL_NAME": dep.name, "BACKEND": backend_for_instance(model.instance_type),
                "SLO_MS": f"{model.plan.slo_ms:g}", "IMAGE_DIGEST": k8s.image_digest})
    if plan is not None and model.measurements is not None:
        drain = sizing.drain_s(model.measurements.qmax, plan.queue_max_depth)
        env["QUEUE_MAX_DEPTH"] = str(plan.queue_max_depth)
        env["PRESSURE_CAPACITY_RPS"] = f"{plan.capacity.throughput_at_target_rps:g}"
        env["DRAIN_TIMEOUT_S"] = str(sizing.drain_timeout_s(drain))
    return [{"name": k, "value": v} for k, v in env.items()]


def grace_period_s(dep: ModelDeployment) -> int:
    k8s = _k8s(dep.config)
    if dep.plan is None or dep.config.measurements is None:
        return k8s.endpoint_removal_wait_s + sizing.DRAIN_TIMEOUT_MIN_S + sizing.DRAIN_MARGIN_S
    drain = sizing.drain_s(dep.config.measurements.qmax, dep.plan.queue_max_depth)
    return sizing.termination_grace_period_s(drain, k8s.endpoint_removal_wait_s)


def pod_spec(dep: ModelDeployment) -> dict[str, Any]:
    k8s, model = _k8s(dep.config), dep.config
    r = k8s.resources
    amounts = {"cpu": r.cpu, "memory": r.memory, **({"nvidia.com/gpu": str(r.gpu)} if r.gpu else {})}
    ttotal = model.measurements.ttotal if model.measurements is not None else None
    ping = {"path": "/ping", "port": "http"}
    container = {
        "name": CONTAINER,
        "image": k8s.image,
        "ports": [{"name": "http", "containerPort": k8s.port, "protocol": "TCP"}],
        "env": container_env(dep),
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "startupProbe": {"httpGet": ping, "periodSeconds": sizing.PROBE_PERIOD_S, "timeoutSeconds": sizing.PROBE_TIMEOUT_S,
                         "failureThreshold": sizing.startup_failure_threshold(ttotal)},
        "readinessProbe": {"httpGet": ping, "periodSeconds": sizing.PROBE_PERIOD_S, "timeoutSeconds": sizing.PROBE_TIMEOUT_S,
                           "failureThreshold": 1},
        "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": sizing.LIVENESS_PERIOD_S,
                          "failureThreshold": sizing.LIVENESS_FAILURES},
    }
    if k8s.endpoint_removal_wait_s:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": k8s.endpoint_removal_wait_s}}}
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": grace_period_s(dep), "containers": [container]}
    if k8s.node_selector:
        spec["nodeSelector"] = dict(k8s.node_selector)
    if k8s.tolerations:
        spec["tolerations"] = [t.model_dump(exclude_none=True) for t in k8s.tolerations]
    return spec


def deployment(dep: ModelDeployment, fullname: str, *, autoscaled: bool) -> dict[str, Any]:
    """The Deployment; without an autoscaler it runs the plan's floor (or min_instances unmeasured)."""
    k8s = _k8s(dep.config)
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector(dep, fullname)},
        # Surge a pod, never remove one before its replacement is ready: capacity stays at least the plan's.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {
            "metadata": {"labels": labels(dep, fullname), "annotations": {
                "prometheus.io/scrape": "true", "prometheus.io/port": str(k8s.port), "prometheus.io/path": "/metrics"}},
            "spec": pod_spec(dep),
        },
    }
    if not autoscaled:
        spec["replicas"] = dep.min_instances
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(dep, fullname, fullname, provenance_annotations(dep)),
            "spec": spec}


def service(dep: ModelDeployment, fullname: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(dep, fullname, fullname), "spec": {
        "type": "ClusterIP", "selector": selector(dep, fullname),
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}


def pdb(dep: ModelDeployment, fullname: str) -> dict[str, Any]:
    """Guards node drains (evictions); HPA scale-in deletes pods directly and does not consult it."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(dep, fullname, fullname), "spec": {
        "maxUnavailable": sizing.pdb_max_unavailable(dep.plan), "selector": {"matchLabels": selector(dep, fullname)}}}


def provenance_config_map(dep: ModelDeployment, fullname: str) -> dict[str, Any] | None:
    if dep.document_text is None:
        return None
    sha = {annotation_key(TAG_DOC_SHA): document_sha256(dep.document_text)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(dep, f"{fullname}-provenance", fullname, sha),
            "data": {PROVENANCE_KEY: dep.document_text}}


def hpa(dep: ModelDeployment, fullname: str) -> dict[str, Any]:
    k8s, plan = _k8s(dep.config), dep.plan
    assert plan is not None
    return {"apiVersion": HPA_API, "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(dep, fullname, fullname, provenance_annotations(dep)), "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": fullname},
                "minReplicas": plan.fleet.min_instances, "maxReplicas": plan.fleet.max_instances,
                "metrics": [{"type": "Pods", "pods": {
                    "metric": {"name": k8s.metric.name},
                    "target": {"type": "AverageValue", "averageValue": sizing.quantity(sizing.pods_target(plan))}}}],
                "behavior": sizing.behavior(plan, tolerance=k8s.has_tolerance, scale_down=k8s.scale_down)}}


def cron_triggers(schedule: FloorSchedule, floor: int) -> list[dict[str, Any]]:
    """KEDA cron triggers for the floors above the plan's floor: from each entry to the next one
    (wrapping at midnight, or at Sunday's end for a weekly schedule), ``desiredReplicas`` pods at
    least, in the schedule's time zone. ``start``/``end`` are standard five-field crons (minute hour
    day-of-month month day-of-week): ``M H * * *`` every day, ``M H * * 1`` on Mondays."""
    floors = schedule.floors
    out = []
    for i, f in enumerate(floors):
        if f.min_instances <= floor:
            continue
        nxt = floors[(i + 1) % len(floors)]
        name = f"floor-{'' if f.weekday is None else f.weekday.lower() + '-'}{f.at.replace(':', '')}"
        out.append({"type": "cron", "name": name, "metadata": {
            "timezone": schedule.timezone, "start": _cron(f), "end": _cron(nxt), "desiredReplicas": str(f.min_instances)}})
    return out


def _cron(f: ScheduledFloor) -> str:
    """Five-field cron of an entry; the day of week as cron counts it (0 or 7 Sunday, 1 Monday)."""
    hh, mm = f.at.split(":")
    dow = "*" if f.weekday is None else str((WEEKDAYS.index(f.weekday) + 1) % 7)
    return f"{int(mm)} {int(hh)} * * {dow}"


def prometheus_query(dep: ModelDeployment, fullname: str) -> str:
    """Sum of the gauge over the Deployment's pods; KEDA's AverageValue divides it by the pod count."""
    k8s = _k8s(dep.config)
    return f'sum({k8s.metric.name}{{namespace="{k8s.namespace}",pod=~"{fullname}-.*"}})'


def scaled_object(dep: ModelDeployment, fullname: str) -> dict[str, Any]:
    k8s, plan = _k8s(dep.config), dep.plan
    assert plan is not None and k8s.metric.prometheus_url is not None
    triggers: list[dict[str, Any]] = [{"type": "prometheus", "name": "in-flight", "metricType": "AverageValue", "metadata": {
        "serverAddress": k8s.metric.prometheus_url, "query": prometheus_query(dep, fullname),
        "threshold": sizing.quantity(sizing.pods_target(plan))}}]
    if plan.schedule is not None:
        triggers += cron_triggers(plan.schedule, plan.fleet.min_instances)
    return {"apiVersion": KEDA_API, "kind": "ScaledObject", "metadata": _meta(dep, fullname, fullname, provenance_annotations(dep)),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": fullname},
                     "minReplicaCount": plan.fleet.min_instances, "maxReplicaCount": plan.fleet.max_instances,
                     "advanced": {"horizontalPodAutoscalerConfig": {
                         "behavior": sizing.behavior(plan, tolerance=k8s.has_tolerance, scale_down=k8s.scale_down)}},
                     "triggers": triggers}}


def model_objects(dep: ModelDeployment, fullname: str) -> list[dict[str, Any]]:
    """Every object of one model, in apply order; the autoscaler only when the gate is open. Objects
    the API server would refuse (speech.deploy.kubernetes.rules) are a :class:`ConfigError`."""
    from speech.deploy.kubernetes.rules import check_objects

    autoscaled = dep.gate.enabled and dep.plan is not None
    objects = [o for o in (provenance_config_map(dep, fullname),) if o is not None]
    objects += [deployment(dep, fullname, autoscaled=autoscaled), service(dep, fullname), pdb(dep, fullname)]
    if autoscaled:
        objects.append(scaled_object(dep, fullname) if _k8s(dep.config).autoscaler == "keda" else hpa(dep, fullname))
    problems = check_objects(objects)
    if problems:
        raise ConfigError(f"speech-endpoints:models.{dep.name}: the rendered objects would be refused by the API server: "
                          + "; ".join(problems) + "; fix: re-plan within Kubernetes' limits (plan.scale_in_cooldown_s "
                          "and scale_out_cooldown_s at most 1800 s, plan.scale_in_window_s at most 3600 s)")
    return objects
