"""A Kubernetes scale-out, phase by phase, from what the API records about the new pod.

desired_set (this run scales the Deployment by one, the autoscaler paused) -> pod_created (the
pod's creationTimestamp) -> node_created / node_ready (only when the pod landed on a node created
after desired_set: the cluster autoscaler had to add one; the Node's creationTimestamp and Ready
condition) -> scheduled (PodScheduled condition) -> image_pulled (the kubelet's "Pulled" event)
-> container_started (the container's state.running.startedAt) -> ready (the Ready condition: the
pod joins the Service) -> first_audio_byte (a streamed POST /invocations to the pod, through the
API server's pod proxy, gives its first byte). Times are the API's own (second resolution), offset
from desired_set as this machine's clock saw it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.errors import BenchError, TargetError
from bench.k8s.client import Cluster
from bench.k8s.names import K8sTarget
from bench.k8s.pause import Pause, deployment_replicas
from speech.schema.artifacts import Phase

ORDER = ("desired_set", "pod_created", "node_created", "node_ready", "scheduled", "image_pulled", "container_started",
         "ready", "first_audio_byte")


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def condition_time(conditions: list | None, kind: str) -> datetime | None:
    """lastTransitionTime of the condition of this type when it is True."""
    for c in conditions or []:
        if c.type == kind and c.status == "True":
            return _utc(c.last_transition_time)
    return None


def selector_of(cluster: Cluster, target: K8sTarget) -> str:
    d = cluster.call(f"read Deployment {target.namespace}/{target.deployment}", cluster.apps.read_namespaced_deployment,
                     target.deployment, target.namespace)
    labels = (d.spec.selector.match_labels or {}) if d.spec and d.spec.selector else {}
    if not labels:
        raise TargetError(f"Deployment {target.namespace}/{target.deployment} has no matchLabels selector to find its pods by")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def pods(cluster: Cluster, target: K8sTarget, selector: str) -> list[Any]:
    got = cluster.call(f"list pods of {target.namespace}/{target.deployment}", cluster.core.list_namespaced_pod,
                       target.namespace, label_selector=selector)
    return [p for p in got.items if p.metadata.deletion_timestamp is None]


def pulled_at(cluster: Cluster, namespace: str, pod: str) -> datetime | None:
    """The kubelet's Pulled event of the pod ("Successfully pulled image" or "already present")."""
    ev = cluster.call(f"list events of pod {namespace}/{pod}", cluster.core.list_namespaced_event, namespace,
                      field_selector=f"involvedObject.name={pod}")
    times = [_utc(e.event_time or e.last_timestamp or e.first_timestamp) for e in ev.items if e.reason == "Pulled"]
    return min((t for t in times if t is not None), default=None)


def first_byte(cluster: Cluster, namespace: str, pod: str, port: int, text: str) -> datetime:
    """POST /invocations to the pod through the API server's proxy, streamed; when its first body byte came."""
    from kubernetes.client.exceptions import ApiException

    body = {"text": text, "speed": 1.0, "response_format": "pcm", "stream": True}
    try:
        resp = cluster.api_client.call_api(
            f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/invocations", "POST",
            header_params={"Content-Type": "application/json", "Accept": "*/*"}, body=json.loads(json.dumps(body)),
            auth_settings=["BearerToken"], _preload_content=False, _request_timeout=120)
    except ApiException as err:
        raise TargetError(f"POST /invocations to pod {namespace}/{pod}:{port} through the API server: {err.status} {err.reason}") from None
    r = resp[0] if isinstance(resp, tuple) else resp
    try:
        chunk = r.read(1)
    finally:
        r.release_conn()
    if not chunk:
        raise TargetError(f"pod {namespace}/{pod}: /invocations answered with an empty body")
    return datetime.now(UTC)


def measure(cluster: Cluster, target: K8sTarget, *, port: int, text: str, state_dir: Any = None, timeout_s: float = 1800.0,
            poll_s: float = 5.0, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
            log: Callable[[str], None] = lambda m: None) -> list[Phase]:
    """Scale the Deployment by one with its autoscaler paused, time the new pod's phases, restore."""
    selector = selector_of(cluster, target)
    before = {p.metadata.name for p in pods(cluster, target, selector)}
    n = deployment_replicas(cluster, target)
    pause = Pause(cluster, target, n + 1, tool="bench ttotal", state_dir=state_dir, wait_ready=False, log=log)
    t0 = datetime.now(UTC)  # desired_set: the scale patch follows at once (Pause pins the autoscaler, then scales)
    with pause:
        deadline = clock() + timeout_s
        new = None
        while True:
            fresh = [p for p in pods(cluster, target, selector) if p.metadata.name not in before]
            if fresh:
                new = fresh[0]
                if condition_time(new.status.conditions if new.status else None, "Ready") is not None:
                    break
            if clock() >= deadline:
                state = "no new pod" if new is None else f"pod {new.metadata.name} not Ready"
                raise BenchError(f"{target.namespace}/{target.deployment}: {state} after {timeout_s:g} s; nothing written")
            sleep(poll_s)
        name = new.metadata.name
        log(f"pod {name} is Ready; sending one request through the API server's proxy")
        fab = first_byte(cluster, target.namespace, name, port, text)
        times: dict[str, datetime | None] = {
            "desired_set": t0, "pod_created": _utc(new.metadata.creation_timestamp),
            "scheduled": condition_time(new.status.conditions, "PodScheduled"),
            "image_pulled": pulled_at(cluster, target.namespace, name),
            "container_started": next((_utc(c.state.running.started_at) for c in new.status.container_statuses or []
                                       if c.state and c.state.running and c.state.running.started_at), None),
            "ready": condition_time(new.status.conditions, "Ready"), "first_audio_byte": fab,
        }
        node_new = False
        if new.spec and new.spec.node_name:
            node = cluster.call(f"read node {new.spec.node_name}", cluster.core.read_node, new.spec.node_name)
            created = _utc(node.metadata.creation_timestamp)
            node_new = created is not None and created >= t0.replace(microsecond=0)
            times["node_created"] = created
            times["node_ready"] = condition_time(node.status.conditions if node.status else None, "Ready")
    out = []
    for key in ORDER:
        at = times.get(key)
        applicable = at is not None and (node_new or not key.startswith("node_"))
        offset = max(0.0, (at - t0).total_seconds()) if at is not None and applicable else None
        out.append(Phase(name=key, at=at if applicable else None, offset_s=None if offset is None else round(offset, 3),
                         source=SOURCES[key], bounded=key not in ("desired_set", "first_audio_byte"), applicable=applicable))
    # a phase recorded before desired_set (second resolution) is clamped to 0; the order stays the API's
    return out


SOURCES = {
    "desired_set": "Deployment scale patched (autoscaler paused)", "pod_created": "pod metadata.creationTimestamp",
    "node_created": "Node metadata.creationTimestamp (added by the cluster autoscaler)", "node_ready": "Node Ready condition",
    "scheduled": "pod PodScheduled condition", "image_pulled": "kubelet Pulled event",
    "container_started": "container state.running.startedAt", "ready": "pod Ready condition",
    "first_audio_byte": "first byte of POST /invocations through the API server's pod proxy",
}
