"""Pause a Deployment's autoscaler at a fixed count for a measurement, and always give it back.

An HPA is pinned by setting minReplicas = maxReplicas = N (the controller then holds N); a KEDA
ScaledObject by its ``autoscaling.keda.sh/paused-replicas: "N"`` annotation (KEDA scales the target
to N and stops scaling it, keda.sh/docs "Pause autoscaling"); without an autoscaler only the
Deployment's replicas are set. The Deployment's scale is also set to N at once, so the change is
timed by this run, not by the autoscaler's next sync. On every way out (normal end, exception,
Ctrl-C, SIGTERM) :class:`Pause` puts back exactly what it found: the HPA's min and max, the
annotation (absent or its old value) and the Deployment's replicas. The prior state is written to a
file BEFORE anything changes; :func:`restore_saved` restores from it after a run killed outright.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.aws.freeze import default_state_dir, interrupts_held, sigterm_as_interrupt
from bench.errors import BenchError, TargetError
from bench.k8s.client import KEDA_GROUP, KEDA_PLURAL, KEDA_VERSION, Cluster
from bench.k8s.names import K8sTarget
from speech.files import atomic_write_text

PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"


@dataclass(frozen=True)
class PauseState:
    namespace: str
    deployment: str
    autoscaler: str
    scaler: str
    deployment_replicas: int
    min_replicas: int | None = None
    max_replicas: int | None = None
    paused_annotation: str | None = None
    """KEDA: the annotation's value before the run (None: absent)."""
    pinned: int = 1
    tool: str = ""


def state_file(state_dir: Path | None, target: K8sTarget) -> Path:
    return (state_dir or default_state_dir()) / f"k8s-{target.namespace}-{target.deployment}.json"


def deployment_replicas(cluster: Cluster, target: K8sTarget) -> int:
    scale = cluster.call(f"read Deployment {target.namespace}/{target.deployment} scale",
                         cluster.apps.read_namespaced_deployment_scale, target.deployment, target.namespace)
    return int(scale.spec.replicas or 0)


def set_replicas(cluster: Cluster, target: K8sTarget, n: int) -> None:
    cluster.call(f"scale Deployment {target.namespace}/{target.deployment} to {n}",
                 cluster.apps.patch_namespaced_deployment_scale, target.deployment, target.namespace, {"spec": {"replicas": n}})


def read_state(cluster: Cluster, target: K8sTarget, pinned: int, tool: str) -> PauseState:
    """What the run will change, read before it changes anything."""
    replicas = deployment_replicas(cluster, target)
    base = PauseState(target.namespace, target.deployment, target.autoscaler, target.scaler, replicas, pinned=pinned, tool=tool)
    if target.autoscaler == "hpa":
        hpa = cluster.call(f"read HorizontalPodAutoscaler {target.namespace}/{target.scaler}",
                           cluster.autoscaling.read_namespaced_horizontal_pod_autoscaler, target.scaler, target.namespace)
        return PauseState(**{**asdict(base), "min_replicas": hpa.spec.min_replicas, "max_replicas": hpa.spec.max_replicas})
    if target.autoscaler == "keda":
        so = cluster.call(f"read ScaledObject {target.namespace}/{target.scaler}", cluster.custom.get_namespaced_custom_object,
                          KEDA_GROUP, KEDA_VERSION, target.namespace, KEDA_PLURAL, target.scaler)
        old = ((so.get("metadata") or {}).get("annotations") or {}).get(PAUSED_REPLICAS)
        return PauseState(**{**asdict(base), "paused_annotation": old})
    return base


def pin(cluster: Cluster, s: PauseState, n: int) -> None:
    """The autoscaler held at n, the Deployment scaled to n."""
    if s.autoscaler == "hpa":
        cluster.call(f"pin HorizontalPodAutoscaler {s.namespace}/{s.scaler} at {n}",
                     cluster.autoscaling.patch_namespaced_horizontal_pod_autoscaler, s.scaler, s.namespace,
                     {"spec": {"minReplicas": n, "maxReplicas": n}})
    elif s.autoscaler == "keda":
        cluster.call(f"pause ScaledObject {s.namespace}/{s.scaler} at {n}", cluster.custom.patch_namespaced_custom_object,
                     KEDA_GROUP, KEDA_VERSION, s.namespace, KEDA_PLURAL, s.scaler,
                     {"metadata": {"annotations": {PAUSED_REPLICAS: str(n)}}})
    set_replicas(cluster, K8sTarget(s.namespace, s.deployment, "none"), n)


def restore(cluster: Cluster, s: PauseState) -> None:
    """Exactly what :func:`read_state` found: the autoscaler's settings, then the Deployment's replicas."""
    if s.autoscaler == "hpa":
        cluster.call(f"restore HorizontalPodAutoscaler {s.namespace}/{s.scaler}",
                     cluster.autoscaling.patch_namespaced_horizontal_pod_autoscaler, s.scaler, s.namespace,
                     {"spec": {"minReplicas": s.min_replicas, "maxReplicas": s.max_replicas}})
    elif s.autoscaler == "keda":
        cluster.call(f"resume ScaledObject {s.namespace}/{s.scaler}", cluster.custom.patch_namespaced_custom_object,
                     KEDA_GROUP, KEDA_VERSION, s.namespace, KEDA_PLURAL, s.scaler,
                     {"metadata": {"annotations": {PAUSED_REPLICAS: s.paused_annotation}}})
    set_replicas(cluster, K8sTarget(s.namespace, s.deployment, "none"), s.deployment_replicas)


def restore_saved(cluster: Cluster, path: Path) -> PauseState:
    """Restore from a state file a killed run left, then remove it."""
    try:
        s = PauseState(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as err:
        raise BenchError(f"{path}: not a pause state file this tool wrote ({err})") from None
    restore(cluster, s)
    Path(path).unlink(missing_ok=True)
    return s


def ready_replicas(cluster: Cluster, target: K8sTarget) -> tuple[int, int]:
    """(replicas, ready replicas) of the Deployment's status."""
    d = cluster.call(f"read Deployment {target.namespace}/{target.deployment}", cluster.apps.read_namespaced_deployment_status,
                     target.deployment, target.namespace)
    return int(d.status.replicas or 0), int(d.status.ready_replicas or 0)


class Pause:
    """``with Pause(cluster, target, n):`` the autoscaler held at n for the block (see the module)."""

    def __init__(self, cluster: Cluster, target: K8sTarget, replicas: int, *, tool: str, state_dir: Path | None = None,
                 wait_ready: bool = True, timeout_s: float = 900.0, poll_s: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] = lambda m: None) -> None:
        self.cluster, self.target, self.replicas, self.tool = cluster, target, replicas, tool
        self.path = state_file(state_dir, target)
        self.wait_ready, self.timeout_s, self.poll_s, self.sleep, self.clock, self.log = wait_ready, timeout_s, poll_s, sleep, clock, log
        self.state: PauseState | None = None
        self._term: Any = None

    def __enter__(self) -> Pause:
        if self.path.exists():
            raise BenchError(f"{self.path} holds the autoscaler state a previous run did not restore; restore it first: "
                             f"python -m bench thaw --kubernetes {self.target.namespace}/{self.target.deployment}"
                             f" --autoscaler {self.target.autoscaler}")
        self.state = read_state(self.cluster, self.target, self.replicas, self.tool)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(asdict(self.state), indent=2) + "\n")
        self._term = sigterm_as_interrupt()
        self._term.__enter__()
        try:
            self.log(f"pausing {self.target.autoscaler} of {self.target.namespace}/{self.target.deployment} at {self.replicas} "
                     f"(was {self.state.deployment_replicas} replicas)")
            pin(self.cluster, self.state, self.replicas)
            if self.wait_ready:
                self.wait_until_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def wait_until_ready(self) -> None:
        """Until the Deployment has exactly the pinned count, all ready."""
        deadline = self.clock() + self.timeout_s
        while True:
            total, ready = ready_replicas(self.cluster, self.target)
            if total == ready == self.replicas:
                return
            if self.clock() >= deadline:
                raise TargetError(f"{self.target.namespace}/{self.target.deployment}: {ready} of {total} replicas ready after "
                                  f"{self.timeout_s:g} s, want exactly {self.replicas}")
            self.sleep(self.poll_s)

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.state is not None:
                with interrupts_held():
                    restore(self.cluster, self.state)
                    self.path.unlink(missing_ok=True)
                    self.log(f"restored {self.target.autoscaler} of {self.target.namespace}/{self.target.deployment}")
                self.state = None
        finally:
            if self._term is not None:
                self._term.__exit__(None, None, None)
                self._term = None
