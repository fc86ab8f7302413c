"""Which objects a bench command reads and changes: the Deployment and its autoscaler, from the
one place names are made (the rendered objects all carry the Deployment's name)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bench.errors import UsageError

Autoscaler = Literal["hpa", "keda", "none"]
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True)
class K8sTarget:
    namespace: str
    deployment: str
    autoscaler: Autoscaler = "hpa"
    autoscaler_name: str | None = None
    """The HorizontalPodAutoscaler's or ScaledObject's name (default: the Deployment's)."""

    @property
    def scaler(self) -> str:
        return self.autoscaler_name or self.deployment

    @property
    def provenance(self) -> str:
        """``kubernetes:<namespace>/<deployment>``: the artifact's provenance target."""
        return f"kubernetes:{self.namespace}/{self.deployment}"


def object_name(stack: str, model: str) -> str:
    """The Deployment (and HPA/ScaledObject) name of a stack's model: ``<stack>-<model>``, as its
    SageMaker endpoint is named."""
    return f"{stack}-{model}"


def parse_target(spec: str, autoscaler: Autoscaler = "hpa", autoscaler_name: str | None = None) -> K8sTarget:
    """``NAMESPACE/DEPLOYMENT`` (or ``DEPLOYMENT`` in ``default``), checked as Kubernetes names."""
    ns, _, name = spec.rpartition("/")
    ns = ns or "default"
    if not DNS_LABEL_RE.match(ns) or not DNS_NAME_RE.match(name):
        raise UsageError(f"--kubernetes {spec!r}: expected NAMESPACE/DEPLOYMENT (lower-case letters, digits, '-'), "
                         "e.g. speech/dev-kokoro-82m")
    if autoscaler_name is not None and not DNS_NAME_RE.match(autoscaler_name):
        raise UsageError(f"--autoscaler-name {autoscaler_name!r} is not a Kubernetes object name")
    return K8sTarget(ns, name, autoscaler, autoscaler_name)
