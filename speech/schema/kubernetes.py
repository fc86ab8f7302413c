"""The ``kubernetes:`` block of a model hosted on a Kubernetes cluster (``hosting: kubernetes``).

Pure pydantic: what the cluster needs that the measurements cannot say (namespace, image, a pod's
resources, where it may run, which autoscaler, where the metric is read). The plan itself is the
platform-free one (speech.plan.realtime); speech.deploy.kubernetes renders it into objects.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from speech.schema.artifacts import Frozen

Minor = Literal["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]
SUPPORTED_MINORS: tuple[Minor, ...] = ("1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
"""Kubernetes minor versions the objects are rendered for and validated against, strict, in tests
(the official OpenAPI schemas kubernetes-validate 1.37.0 ships for v1.32.0 .. v1.37.0)."""
DEFAULT_MINOR: Minor = "1.35"
TOLERANCE_SINCE_MINOR = "1.33"
"""First minor whose ``HPAScalingRules`` has ``tolerance`` (HPAConfigurableTolerance: alpha in 1.33 and
1.34, beta from 1.35, in the schemas themselves)."""

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""RFC 1123 label: a namespace's name (at most 63 characters, lower case, digits, '-')."""
K8S_IMAGE_RE = re.compile(r"^(?P<repo>[a-z0-9][a-z0-9._:/-]*[a-z0-9])@(?P<digest>sha256:[0-9a-f]{64})$")
"""``<registry>/<repository>@sha256:<64 hex>``: any registry the cluster pulls from, pinned by digest."""
QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
"""The resource quantities written here: a decimal with an optional SI or binary suffix (``4``, ``500m``,
``16Gi``); Kubernetes' Quantity grammar allows more (exponents), which a stack file does not need."""
LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
SHA256_RE = r"^sha256:[0-9a-f]{64}$"

MAX_STABILIZATION_WINDOW_S = 3600
"""The API server's limit on ``stabilizationWindowSeconds`` (validation.go MaxStabilizationWindowSeconds)."""
MAX_PERIOD_S = 1800
"""The API server's limit on a scaling policy's ``periodSeconds`` (validation.go MaxPeriodSeconds)."""
PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
POLICY_TYPES: tuple[PolicyType, ...] = ("Pods", "Percent")
SELECT_POLICIES: tuple[SelectPolicy, ...] = ("Max", "Min", "Disabled")


class PodResources(Frozen):
    """What one pod (one measured instance) requests; requests equal limits so the pod is
    ``Guaranteed`` and gets what the measurement had."""

    cpu: str = "4"
    """CPU cores, a Kubernetes quantity (``4``, ``3500m``): requests and limits."""
    memory: str = "16Gi"
    """Memory, a Kubernetes quantity (``16Gi``): requests and limits."""
    gpu: Annotated[int, Field(ge=0, le=16)] = 0
    """``nvidia.com/gpu`` devices (NVIDIA's device plugin); 0 on CPU nodes."""

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        if not QUANTITY_RE.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes quantity; write e.g. cpu: \"4\" or \"3500m\", memory: \"16Gi\"")
        return v


class Toleration(Frozen):
    """One pod toleration (core/v1 Toleration), e.g. for the ``nvidia.com/gpu`` taint of GPU node pools."""

    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = Field(None, exclude_if=lambda v: v is None)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _value_with_equal(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError(f"toleration {self.key!r}: operator Exists takes no value; use operator: Equal with value")
        if self.operator == "Equal" and self.value is None:
            raise ValueError(f"toleration {self.key!r}: operator Equal needs a value")
        return self


class MetricSource(Frozen):
    """Where the autoscaler reads in-flight requests per pod: the container's ``/metrics`` gauge,
    scraped by Prometheus."""

    name: Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")] = "speech_concurrent_requests"
    """The series: the container's gauge of requests in flight; with ``autoscaler: hpa`` the name the
    Prometheus adapter serves it under as a Pods metric (the shipped rule keeps it)."""
    prometheus_url: str | None = None
    """Prometheus' HTTP address (KEDA's ``serverAddress``), e.g.
    ``http://prometheus-operated.monitoring.svc:9090``; required with ``autoscaler: keda``."""

    @field_validator("prometheus_url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError(f"prometheus_url {v!r} is not an http(s):// address; e.g. http://prometheus-operated.monitoring.svc:9090")
        return v


class ScalingPolicy(Frozen):
    """One HPAScalingPolicy: at most ``value`` pods (``Pods``) or percent of the current replicas
    (``Percent``) removed per ``period_s`` seconds."""

    type: PolicyType
    value: Annotated[int, Field(gt=0)]
    period_s: Annotated[int, Field(ge=1, le=MAX_PERIOD_S)]


class TunedFrom(Frozen):
    """Where a stored scale-down came from: the ``bench tune --platform kubernetes`` artifact, by the
    sha256 of its bytes, and what it promised."""

    path: Annotated[str, Field(min_length=1)]
    """As given to ``bench plan --hpa`` (the artifact may live outside the repository)."""
    sha256: Annotated[str, Field(pattern=SHA256_RE)]
    trace: str
    slo_share_target: Annotated[float, Field(gt=0, le=1)]
    slo_share_bound: Annotated[float, Field(ge=0, le=1)]
    """The share the tuned HPA is predicted to keep on a day it has not seen."""
    held: bool
    """The promise held on every training draw's bound and held-out check."""


class ScaleDown(Frozen):
    """The HPA's ``behavior.scaleDown`` when it is not the plan's (``bench plan --hpa`` stores the one
    ``bench tune --platform kubernetes`` found). The plan's scale-down tolerance still applies; the
    target and minReplicas are the plan's inputs ``target_share`` and ``min_instances``."""

    window_s: Annotated[int, Field(ge=0, le=MAX_STABILIZATION_WINDOW_S)]
    """``stabilizationWindowSeconds``: the HPA scales in to the highest recommendation of this window."""
    select_policy: SelectPolicy = "Max"
    policies: Annotated[list[ScalingPolicy], Field(min_length=1)]
    tuned_from: TunedFrom | None = Field(None, exclude_if=lambda v: v is None)

    def rules(self) -> dict[str, Any]:
        """As autoscaling/v2 HPAScalingRules takes it (no tolerance: the plan's is added)."""
        return {"stabilizationWindowSeconds": self.window_s, "selectPolicy": self.select_policy,
                "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_s} for p in self.policies]}


class KubernetesConfig(Frozen):
    """What a team chooses for ``hosting: kubernetes``."""

    image: str
    """The project's container image pinned by digest, ``<registry>/<repository>@sha256:<64 hex>``
    (its digest is the measurements' fingerprint), with the weights inside it or under MODEL_DIR."""
    namespace: str = "default"
    version: Minor = DEFAULT_MINOR
    """The cluster's Kubernetes minor version: the objects are rendered for it (``behavior.*.tolerance``
    from 1.33) and validated against its schemas."""
    autoscaler: Literal["hpa", "keda"] = "hpa"
    """``hpa``: an autoscaling/v2 HorizontalPodAutoscaler on a Pods metric (a Prometheus adapter serves
    it). ``keda``: a KEDA ScaledObject with a Prometheus trigger (and the plan's scheduled floors as cron
    triggers)."""
    metric: MetricSource = MetricSource()
    resources: PodResources = PodResources()
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    """The container's port (PORT): /ping, /invocations, /metrics."""
    endpoint_removal_wait_s: Annotated[int, Field(ge=0, le=120)] = 10
    """preStop sleep, seconds: how long a terminating pod keeps serving while the endpoint controllers,
    kube-proxy and ingress stop sending it new requests; its drain starts after."""
    labels: dict[str, str] = {}
    """Extra labels on every object (a team's own; the project's app.kubernetes.io labels win)."""
    scale_down: ScaleDown | None = Field(None, exclude_if=lambda v: v is None)
    """The autoscaler's ``behavior.scaleDown`` in place of the plan's (``bench plan --hpa`` stores the
    tuned one, with where it came from); unset: the plan's scale-in window, step and cooldown."""

    @field_validator("image")
    @classmethod
    def _pinned(cls, v: str) -> str:
        if not K8S_IMAGE_RE.match(v):
            raise ValueError(
                f"image {v!r} is not pinned by digest; use <registry>/<repository>@sha256:<64 hex> (the digest "
                "fingerprints the measurements: a tag can move to other bytes)"
            )
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        if not DNS_LABEL_RE.match(v):
            raise ValueError(f"namespace {v!r} is not an RFC 1123 label (lower-case letters, digits, '-', at most 63)")
        return v

    @field_validator("node_selector", "labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not LABEL_KEY_RE.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
                raise ValueError(f"label key {key!r} is not a Kubernetes label key ([prefix/]name, name at most 63 characters)")
            if not LABEL_VALUE_RE.match(str(value)):
                raise ValueError(f"label {key!r}: value {value!r} is not a Kubernetes label value (at most 63 "
                                 "characters: letters, digits, '-', '_', '.')")
        return v

    @model_validator(mode="after")
    def _keda_needs_prometheus(self) -> KubernetesConfig:
        if self.autoscaler == "keda" and self.metric.prometheus_url is None:
            raise ValueError("autoscaler keda reads the metric from Prometheus itself: set metric.prometheus_url "
                             "(e.g. http://prometheus-operated.monitoring.svc:9090)")
        return self

    @property
    def image_digest(self) -> str:
        m = K8S_IMAGE_RE.match(self.image)
        assert m is not None  # validated
        return m.group("digest")

    @property
    def has_tolerance(self) -> bool:
        """True when this minor's HPAScalingRules has ``tolerance``."""
        return minor_tuple(self.version) >= minor_tuple(TOLERANCE_SINCE_MINOR)


def kubernetes_problem(hosting: str, k8s: KubernetesConfig | None, *, image: str | None, weights_source: str | None,
                       scheduled_floors: int, instance_type: str) -> str | None:
    """Why a model's ``hosting`` and ``kubernetes`` block do not go together, or None."""
    if hosting != "kubernetes":
        return f"kubernetes is set but hosting is {hosting!r}; set hosting: kubernetes or remove it" if k8s else None
    if k8s is None:
        return ("hosting kubernetes needs a kubernetes block with at least image: <registry>/<repository>@sha256:<64 hex> "
                "(namespace, resources, autoscaler hpa|keda and metric have defaults)")
    if image is not None:
        return "image is the SageMaker image; with hosting kubernetes set kubernetes.image instead and remove image"
    if weights_source is not None:
        return ("weights_source feeds the SageMaker weight cache; a Kubernetes pod runs the weights inside its image "
                "(MODEL_DIR in kubernetes.image): remove weights_source")
    if scheduled_floors and k8s.autoscaler == "hpa":
        return (f"plan.schedule has {scheduled_floors} scheduled floors, which an autoscaling/v2 HorizontalPodAutoscaler "
                "cannot express; set kubernetes.autoscaler: keda (its cron triggers raise the floor on schedule), or "
                "remove plan.schedule")
    from speech.schema.instances import FAMILIES

    family = FAMILIES.get(instance_type.split(".")[1])
    kind = family.kind if family is not None else None
    if kind == "cuda" and k8s.resources.gpu == 0:
        return (f"instance_type {instance_type} has a GPU, but kubernetes.resources.gpu is 0: the pod would run without "
                "the GPU it was measured with; set resources.gpu: 1 (nvidia.com/gpu)")
    if kind == "cpu" and k8s.resources.gpu > 0:
        return (f"instance_type {instance_type} is a CPU instance, but kubernetes.resources.gpu is {k8s.resources.gpu}: "
                "name the GPU hardware the pod gets (e.g. ml.g5.xlarge) or set gpu: 0")
    return None


def minor_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


__all__ = ["DEFAULT_MINOR", "KubernetesConfig", "MAX_PERIOD_S", "MAX_STABILIZATION_WINDOW_S", "MetricSource", "POLICY_TYPES",
           "PodResources", "SELECT_POLICIES", "SUPPORTED_MINORS", "ScaleDown", "ScalingPolicy", "TOLERANCE_SINCE_MINOR",
           "Toleration", "TunedFrom", "kubernetes_problem", "minor_tuple"]
