"""A stack's Kubernetes models as plain manifests, for kubectl, Argo CD, Flux or Helm users who do
not run Pulumi (``speech-deploy render``, :mod:`speech.commands.render`, calls it).

The objects are the ones the Pulumi program creates (speech.deploy.kubernetes.objects, one spec for
both): per model one file ``<stack>-<model>.yaml`` with its objects in apply order (the provenance
ConfigMap, Deployment, Service, PodDisruptionBudget and, when a measured, feasible plan exists, the
HorizontalPodAutoscaler or KEDA ScaledObject). Everything is rendered and checked before the first
file is written, and each file is written atomically: a refused stack leaves the output directory as
it was. Apply with ``kubectl apply -f DIR`` (the namespace must exist).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speech.deploy.gate import ModelDeployment, plan_models
from speech.deploy.hosting import endpoint_name
from speech.deploy.kubernetes.objects import model_objects
from speech.errors import ConfigError
from speech.files import atomic_write_text
from speech.schema.config import StackConfig
from speech.schema.kubernetes import TOLERANCE_SINCE_MINOR
from speech.stack.read import load_stack_file, stack_file, stack_name


@dataclass
class RenderedModel:
    model: str
    name: str
    """The workload's name, ``<stack>-<model>``."""
    namespace: str
    path: Path
    objects: list[dict[str, Any]]
    gate_enabled: bool
    gate_reason: str
    notes: list[str] = field(default_factory=list)


def plan_kubernetes(config: StackConfig, stack: str) -> dict[str, ModelDeployment]:
    """Every model planned and gated as the program does it (budget included); only the Kubernetes
    ones are returned, and a stack without any is a :class:`ConfigError`."""
    deployments = plan_models(config, {name: endpoint_name(stack, name) for name in config.models})
    k8s = {n: d for n, d in deployments.items() if d.config.hosting == "kubernetes"}
    if not k8s:
        hostings = ", ".join(sorted({m.hosting for m in config.models.values()}))
        raise ConfigError(f"stack {stack!r} has no model with hosting: kubernetes (its models are hosted {hostings}); "
                          "render writes Kubernetes manifests only: set hosting: kubernetes and a kubernetes block "
                          "(docs/kubernetes.md), or deploy SageMaker models with pulumi up")
    return k8s


def render_stack(config: StackConfig, stack: str, out: Path) -> list[RenderedModel]:
    """Every Kubernetes model's objects, checked, and the file each goes to (nothing written)."""
    rendered = []
    for model, dep in plan_kubernetes(config, stack).items():
        name = endpoint_name(stack, model)
        k8s = dep.config.kubernetes
        assert k8s is not None
        notes = []
        if not k8s.has_tolerance and dep.gate.enabled:
            notes.append(f"Kubernetes {k8s.version} has no behavior.*.tolerance (from {TOLERANCE_SINCE_MINOR}): the "
                         "cluster-wide tolerance (default 0.1) applies, scale-out at 1.1 x the target")
        rendered.append(RenderedModel(model=model, name=name, namespace=k8s.namespace, path=out / f"{name}.yaml",
                                      objects=model_objects(dep, name), gate_enabled=dep.gate.enabled,
                                      gate_reason=dep.gate.reason, notes=notes))
    return rendered


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """The objects as one multi-document YAML stream, keys in the order they were built."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = io.StringIO()
    yaml.dump_all(objects, buf)
    return buf.getvalue()


def read_yaml(text: str) -> list[dict[str, Any]]:
    """A rendered stream back as plain dicts (what kubectl would send)."""
    from ruamel.yaml import YAML

    return [json.loads(json.dumps(doc)) for doc in YAML(typ="safe").load_all(text) if doc is not None]


def render_stack_file(stack_dir: Path, stack: str, out: Path) -> list[RenderedModel]:
    """``Pulumi.<stack>.yaml`` in ``stack_dir`` read, its Kubernetes models rendered and checked, then
    written to ``out`` (nothing written when any is refused); ``stack`` as ``--stack`` takes it
    (NAME, ORG/NAME or ORG/PROJECT/NAME)."""
    path = stack_file(stack_dir, stack)
    bare = stack_name(stack)
    if not path.is_file():
        raise ConfigError(f"--stack {stack}: no {path}; pass --stack-dir DIR where Pulumi.{bare}.yaml lives")
    rendered = render_stack(load_stack_file(path, bare), bare, out)
    write(rendered)
    return rendered


def write(rendered: list[RenderedModel]) -> None:
    texts = [(r.path, to_yaml(r.objects)) for r in rendered]
    for path, text in texts:
        atomic_write_text(path, text)


def summary(rendered: list[RenderedModel]) -> dict[str, Any]:
    return {"models": {r.model: {"file": str(r.path), "name": r.name, "namespace": r.namespace,
                                 "objects": [f"{o['kind']}/{o['metadata']['name']}" for o in r.objects],
                                 "autoscaling": {"enabled": r.gate_enabled, "reason": r.gate_reason}, "notes": r.notes}
                       for r in rendered}}


def text(rendered: list[RenderedModel]) -> str:
    lines = []
    for r in rendered:
        lines.append(f"{r.model}: {r.path} (namespace {r.namespace})")
        lines += [f"  {o['kind']:<24} {o['metadata']['name']}" for o in r.objects]
        lines.append(f"  autoscaling: {'on' if r.gate_enabled else 'withheld'}: {r.gate_reason}")
        lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)
