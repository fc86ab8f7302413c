"""A stand-in Kubernetes API server for the tests: plain HTTP on 127.0.0.1, serving recorded
responses (``recorded/*.json``, shaped as the real API serializes a Deployment, an autoscaling/v2
HorizontalPodAutoscaler, a KEDA ScaledObject and a Node), the pods of a scale-out as the API shows
them over time (Pending and unscheduled, scheduled, Running not ready, Ready), the kubelet's
events, merge patches applied to what it serves, and the pod proxy's streamed /invocations.

No Kubernetes API server can be installed here; the official client talks to this one through a
kubeconfig like any cluster's, so every request path, verb, content type and response shape the
tools use goes through the client's own (de)serialization."""

from __future__ import annotations

import copy
import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

RECORDED = Path(__file__).parent / "recorded"
NS, NAME = "speech", "dev-kokoro-82m"
LABELS = {"app.kubernetes.io/instance": NAME, "app.kubernetes.io/name": "kokoro-82m"}
NODE = "ip-10-0-3-17.eu-west-1.compute.internal"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{name}.json").read_text())


def merge(base: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (a strategic merge patch of these fields is the same)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """What the stand-in holds: the objects, the pods, and what was asked of it."""

    def __init__(self, digest: str, *, new_node: bool = True, ready_after_polls: int = 3, hpa: bool = True,
                 keda: bool = False) -> None:
        self.lock = threading.Lock()
        dep = recorded("deployment")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        c["image"] = c["image"].replace("DIGEST", digest)
        self.objects: dict[str, Any] = {"deployment": dep}
        if hpa:
            self.objects["hpa"] = recorded("hpa")
        if keda:
            self.objects["scaledobject"] = recorded("scaledobject")
        self.replicas = dep["spec"]["replicas"]
        self.pods = [self._pod(f"{NAME}-7d9f8c6b5-{s}", datetime(2026, 6, 1, 11, 40, 5, tzinfo=UTC), stage=3)
                     for s in ("a1b2c", "d3e4f")]
        self.new_node = new_node
        self.ready_after_polls = ready_after_polls
        self.requests: list[tuple[str, str, Any]] = []
        self.scaled_at: datetime | None = None
        self.scale_ups: list[datetime] = []
        """When each scale-up patch arrived (the pods' recorded times follow from it)."""
        self.polls = 0

    # --- pods of a scale-out, stage by stage (what successive lists show) ---
    def _pod(self, name: str, created: datetime, stage: int) -> dict[str, Any]:
        """stage 0: Pending, unscheduled; 1: scheduled, image pulling; 2: Running, not ready; 3: Ready."""
        t = {k: iso(created + timedelta(seconds=s)) for k, s in
             (("created", 0), ("scheduled", 41), ("started", 186), ("ready", 212))}
        conditions = [{"type": "PodScheduled", "status": "True" if stage >= 1 else "False", "lastProbeTime": None,
                       "lastTransitionTime": t["scheduled"] if stage >= 1 else t["created"],
                       **({} if stage >= 1 else {"reason": "Unschedulable",
                                                 "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."})}]
        if stage >= 1:
            conditions += [{"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": t["scheduled"]},
                           {"type": "ContainersReady", "status": "True" if stage >= 3 else "False", "lastProbeTime": None,
                            "lastTransitionTime": t["ready"] if stage >= 3 else t["started"]},
                           {"type": "Ready", "status": "True" if stage >= 3 else "False", "lastProbeTime": None,
                            "lastTransitionTime": t["ready"] if stage >= 3 else t["started"]}]
        state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        if stage >= 2:
            state = {"running": {"startedAt": t["started"]}}
        status: dict[str, Any] = {"phase": "Running" if stage >= 2 else "Pending", "conditions": conditions,
                                  "qosClass": "Guaranteed", "startTime": t["scheduled"] if stage >= 1 else None}
        if stage >= 1:
            status["containerStatuses"] = [{"name": "speech", "ready": stage >= 3, "restartCount": 0, "started": stage >= 2,
                                            "image": "registry.example.com/speech/kokoro", "imageID": "", "state": state}]
        return {"metadata": {"name": name, "namespace": NS, "labels": dict(LABELS), "creationTimestamp": t["created"],
                             "uid": f"uid-{name}"},
                "spec": {"nodeName": NODE if stage >= 1 else None,
                         "containers": [{"name": "speech", "image": "registry.example.com/speech/kokoro"}]},
                "status": status}

    def pod_list(self) -> dict[str, Any]:
        items = list(self.pods)
        extra = self.replicas - len(self.pods)
        if extra > 0 and self.scaled_at is not None:
            self.polls += 1
            stage = min(3, self.polls * 3 // max(1, self.ready_after_polls)) if self.ready_after_polls else 0
            if self.ready_after_polls < 0:  # never ready: stays Running, not ready
                stage = 2
            items.append(self._pod(f"{NAME}-7d9f8c6b5-x9y8z", self.scaled_at + timedelta(seconds=1), stage))
        return {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "49000"}, "items": items}

    def node(self) -> dict[str, Any]:
        text = json.dumps(recorded("node"))
        base = self.scaled_at or datetime(2026, 6, 1, 11, 40, tzinfo=UTC)
        created = base + timedelta(seconds=20) if self.new_node else datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
        text = text.replace("NODE_CREATED", iso(created)).replace("NODE_READY", iso(created + timedelta(seconds=30)))
        return json.loads(text)

    def events(self, pod: str) -> dict[str, Any]:
        items = []
        if self.scaled_at is not None and pod.endswith("x9y8z"):
            pulled = iso(self.scaled_at + timedelta(seconds=170))
            items.append({"metadata": {"name": f"{pod}.1", "namespace": NS}, "involvedObject": {"kind": "Pod", "name": pod,
                          "namespace": NS}, "reason": "Pulled", "type": "Normal",
                          "message": "Successfully pulled image \"registry.example.com/speech/kokoro\" in 2m8.1s",
                          "firstTimestamp": pulled, "lastTimestamp": pulled, "count": 1,
                          "source": {"component": "kubelet", "host": NODE}})
        return {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items}

    def scale(self) -> dict[str, Any]:
        sel = ",".join(f"{k}={v}" for k, v in sorted(LABELS.items()))
        return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": NAME, "namespace": NS},
                "spec": {"replicas": self.replicas}, "status": {"replicas": len(self.pods), "selector": sel}}

    def deployment(self) -> dict[str, Any]:
        d = copy.deepcopy(self.objects["deployment"])
        d["spec"]["replicas"] = self.replicas
        d["status"]["replicas"] = self.replicas
        d["status"]["readyReplicas"] = min(self.replicas, len(self.pods))
        return d


def handler_for(cluster: Cluster) -> type[BaseHTTPRequestHandler]:
    base = f"/namespaces/{NS}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, obj: Any) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _missing(self, what: str) -> None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                             "message": f"{what} not found"})

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"null")

        def _route(self, method: str) -> None:
            url = urlparse(self.path)
            path, query = url.path, parse_qs(url.query)
            body = self._body() if method in ("PATCH", "POST") else None
            with cluster.lock:
                cluster.requests.append((method, path, body))
                if self.headers.get("Authorization") != "Bearer stand-in-token":
                    return self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"})
                if path == f"/apis/apps/v1{base}/deployments/{NAME}" or path == f"/apis/apps/v1{base}/deployments/{NAME}/status":
                    return self._send(200, cluster.deployment())
                if path == f"/apis/apps/v1{base}/deployments/{NAME}/scale":
                    if method == "PATCH":
                        cluster.replicas = body["spec"]["replicas"]
                        if cluster.replicas > len(cluster.pods) and cluster.scaled_at is None:
                            cluster.scaled_at = datetime.now(UTC)
                            cluster.scale_ups.append(cluster.scaled_at)
                        elif cluster.replicas <= len(cluster.pods):
                            cluster.scaled_at, cluster.polls = None, 0
                    return self._send(200, cluster.scale())
                for key, p in (("hpa", f"/apis/autoscaling/v2{base}/horizontalpodautoscalers/{NAME}"),
                               ("scaledobject", f"/apis/keda.sh/v1alpha1{base}/scaledobjects/{NAME}")):
                    if path == p:
                        if key not in cluster.objects:
                            return self._missing(key)
                        if method == "PATCH":
                            cluster.objects[key] = merge(cluster.objects[key], body)
                        return self._send(200, cluster.objects[key])
                if path == f"/api/v1{base}/pods":
                    want = dict(kv.split("=") for kv in query.get("labelSelector", [""])[0].split(",") if kv)
                    if want != LABELS:
                        return self._send(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []})
                    return self._send(200, cluster.pod_list())
                if path == f"/api/v1{base}/events":
                    pod = query.get("fieldSelector", ["="])[0].split("=", 1)[1]
                    return self._send(200, cluster.events(pod))
                if path == f"/api/v1/nodes/{NODE}":
                    return self._send(200, cluster.node())
                if path.startswith(f"/api/v1{base}/pods/") and path.endswith(":8080/proxy/invocations") and method == "POST":
                    audio = b"\x00\x01" * 2048
                    self.send_response(200)
                    self.send_header("Content-Type", "audio/pcm")
                    self.send_header("Content-Length", str(len(audio)))
                    self.end_headers()
                    self.wfile.write(audio)
                    return None
            return self._missing(path)

        def do_GET(self) -> None:  # noqa: N802
            self._route("GET")

        def do_PATCH(self) -> None:  # noqa: N802
            self._route("PATCH")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

    return Handler


class StandIn:
    """``with StandIn(cluster) as kubeconfig:`` a server on a free port and a kubeconfig pointing at it."""

    def __init__(self, cluster: Cluster, directory: Path) -> None:
        self.cluster, self.directory = cluster, directory
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(cluster))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Path:
        self.thread.start()
        host, port = self.server.server_address[:2]
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
               "clusters": [{"name": "stand-in", "cluster": {"server": f"http://{host}:{port}"}}],
               "users": [{"name": "bench", "user": {"token": "stand-in-token"}}],
               "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "bench", "namespace": NS}}]}
        path = self.directory / "kubeconfig"
        path.write_text(json.dumps(cfg))
        return path

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
