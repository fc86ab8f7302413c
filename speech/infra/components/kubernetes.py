"""One Kubernetes model as one component: :class:`KubernetesModel` creates, through
pulumi-kubernetes, exactly the objects :func:`speech.deploy.kubernetes.objects.model_objects` builds
(the spec ``python -m speech render`` writes as YAML too): the provenance ConfigMap, the Deployment,
its Service and PodDisruptionBudget, and with an open gate the HorizontalPodAutoscaler or the KEDA
ScaledObject. Each resource takes the object's ``metadata`` and ``spec`` (or ``data``) as they are,
so the engine receives the same fields the YAML has (tests/speech/infra/test_kubernetes_component.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from speech.deploy.gate import ModelDeployment
from speech.deploy.kubernetes.objects import model_objects

COMPONENT_TYPE = "speech:index:KubernetesModel"


@dataclass
class KubernetesModelArgs:
    """One model planned and gated (speech.deploy.gate) and its workload name (``<stack>-<model>``)."""

    deployment: ModelDeployment
    name: str
    provider: pulumi.ProviderResource | None = None
    """A pulumi-kubernetes provider (a kubeconfig context); None: the default provider."""


def _resource(kind: str) -> Callable[..., pulumi.CustomResource]:
    """The pulumi-kubernetes class of a rendered object's kind (KEDA's CRD through CustomResource)."""
    classes: dict[str, Callable[..., pulumi.CustomResource]] = {
        "ConfigMap": k8s.core.v1.ConfigMap,
        "Deployment": k8s.apps.v1.Deployment,
        "Service": k8s.core.v1.Service,
        "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
        "HorizontalPodAutoscaler": k8s.autoscaling.v2.HorizontalPodAutoscaler,
    }
    return classes[kind]


def logical_name(model: str, obj: dict[str, Any]) -> str:
    """``<model>-<kind in lower case>``: one object of each kind per model."""
    return f"{model}-{obj['kind'].lower()}"


class KubernetesModel(pulumi.ComponentResource):
    """The model's objects as pulumi-kubernetes resources, children of this component."""

    resources: dict[str, pulumi.CustomResource]
    """By kind."""
    summary: dict[str, Any]
    """The model's part of the stack outputs: namespace, workload, autoscaler, gate."""

    def __init__(self, name: str, args: KubernetesModelArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT_TYPE, name, None, opts)
        dep = args.deployment
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.resources = {}
        for obj in model_objects(dep, args.name):
            kind = obj["kind"]
            body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
            if kind == "ScaledObject":
                res: pulumi.CustomResource = k8s.apiextensions.CustomResource(
                    logical_name(name, obj), api_version=obj["apiVersion"], kind=kind, opts=child, **body)
            else:
                res = _resource(kind)(logical_name(name, obj), opts=child, **body)
            self.resources[kind] = res
        assert dep.config.kubernetes is not None
        autoscaler = next((k for k in ("HorizontalPodAutoscaler", "ScaledObject") if k in self.resources), None)
        self.summary = {"namespace": dep.config.kubernetes.namespace, "deployment": args.name, "service": args.name,
                        "autoscaler": autoscaler, "gate": {"enabled": dep.gate.enabled, "reason": dep.gate.reason}}
        self.register_outputs({"summary": self.summary})
