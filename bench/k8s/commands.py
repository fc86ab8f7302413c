"""The Kubernetes paths of ``bench ttotal``, ``bench qmax`` and ``bench drift`` (the commands parse
and render; the calls are here and in this package's other modules)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any

from bench.errors import TargetError, UsageError
from bench.k8s.client import Cluster, connect
from bench.k8s.names import K8sTarget
from speech.schema.artifacts import Fingerprint, Phase, QmaxArtifact

DIGEST_IN_IMAGE = re.compile(r"@(sha256:[0-9a-f]{64})$")


def deployment_digest(cluster: Cluster, target: K8sTarget) -> str:
    """The digest the Deployment's first container image is pinned by (``<repo>@sha256:...``)."""
    d = cluster.call(f"read Deployment {target.namespace}/{target.deployment}", cluster.apps.read_namespaced_deployment,
                     target.deployment, target.namespace)
    containers = d.spec.template.spec.containers if d.spec and d.spec.template and d.spec.template.spec else []
    if not containers:
        raise TargetError(f"Deployment {target.namespace}/{target.deployment} has no containers")
    m = DIGEST_IN_IMAGE.search(containers[0].image or "")
    if m is None:
        raise UsageError(f"Deployment {target.namespace}/{target.deployment} runs image {containers[0].image!r}, not pinned by "
                         "digest: the measurement could not say which bytes it measured; deploy <repo>@sha256:<digest> "
                         "(or pass --image-digest)")
    return m.group(1)


def pod_fingerprint(args: argparse.Namespace, target: K8sTarget, expected: Fingerprint | None = None) -> tuple[Cluster, Fingerprint]:
    """The cluster and the fingerprint of the Deployment's pods: the hardware they get by its instance
    type (--instance-type, else ``expected``'s), the image by the Deployment's digest (or --image-digest)."""
    cluster = connect(args.kubeconfig, args.context)
    instance_type = args.instance_type or (expected.instance_type if expected is not None else None)
    if not instance_type or not instance_type.startswith("ml."):
        raise UsageError("--instance-type: name the hardware one pod gets by the instance type with that hardware "
                         "(e.g. ml.g5.xlarge for one A10G), as the stack's instance_type does with hosting: kubernetes")
    digest = args.image_digest or deployment_digest(cluster, target)
    return cluster, Fingerprint.of(instance_type, digest)


def ttotal_phases(args: argparse.Namespace, target: K8sTarget, qmax: QmaxArtifact,
                  log: Callable[[str], None]) -> tuple[list[Phase], Fingerprint]:
    """bench ttotal on Kubernetes: the fingerprint checked against qmax's, then one scale-out timed."""
    from bench.k8s.phases import measure
    from bench.load.ladder import request_mix

    cluster, fp = pod_fingerprint(args, target, qmax.fingerprint)
    if fp != qmax.fingerprint:
        raise UsageError(f"{args.qmax} was measured on {qmax.fingerprint.slug} ({qmax.fingerprint.instance_type}, "
                         f"{qmax.fingerprint.image_digest[:19]}) but {target.provenance} is {fp.slug} ({fp.instance_type}, "
                         f"{fp.image_digest[:19]}); measure qmax on this Deployment first")
    phases = measure(cluster, target, port=args.pod_port, text=request_mix("short")[0][0], state_dir=args.state_dir,
                     timeout_s=args.timeout_s, poll_s=args.poll_s, log=log)
    return phases, fp


def drift(args: argparse.Namespace, target: K8sTarget) -> int:
    """bench drift --kubernetes: the live autoscaler against the plan's HPA (or bench tune's)."""
    from bench.k8s.drift import read_issues
    from speech.files import load_artifact
    from speech.schema.plan_artifacts import PlanArtifact
    from speech.sim.hpa_artifact import HpaTuneArtifact, hpa_fields
    from speech.sim.kube import plan_hpa_spec
    from speech.sim.scaler import scaling_numbers

    if target.autoscaler == "none":
        raise UsageError("--autoscaler none: bench drift compares the autoscaler; name hpa or keda")
    if bool(args.plan) == bool(args.hpa):
        raise UsageError("bench drift --kubernetes: pass --plan FILE (the plan rendered as an HPA) or --hpa FILE "
                         "(bench tune --platform kubernetes's hpa-<model>-<trace>.json)")
    want: dict[str, Any]
    if args.hpa:
        tuned = load_artifact(args.hpa, HpaTuneArtifact)
        want = dict(tuned.hpa)
    else:
        plan = load_artifact(args.plan, PlanArtifact)
        want = hpa_fields(plan_hpa_spec(plan, scaling_numbers(plan), "keda" if target.autoscaler == "keda" else "hpa"),
                          args.metric)
    cluster = connect(args.kubeconfig, args.context)
    issues = [i.as_dict() for i in read_issues(cluster, target, want, args.metric)]
    key = f"{target.namespace}/{target.scaler}"
    if args.json:
        print(json.dumps({"ok": not issues, "autoscalers": {key: issues}}, indent=2))
    else:
        for i in issues:
            print(f"{key}: [{i['kind']}] {i['message']}")
        print("preflight-ok" if not issues else f"drift: {len(issues)} issue(s)")
    return 0 if not issues else 1


def stack_issues(args: argparse.Namespace, stack: str, models: dict[str, Any], allow_config_mismatch: bool) -> dict[str, list[dict]]:
    """bench drift --stack for its ``hosting: kubernetes`` models: each model's live autoscaler against
    the plan as speech.deploy.kubernetes renders it (its namespace, autoscaler, metric and a stored scale_down from the
    stack's kubernetes block, the objects named <stack>-<model>), and the Deployment's image digest
    against the stack's."""
    from bench.k8s.drift import Issue, read_issues
    from bench.k8s.names import object_name
    from speech.plan.realtime import build_plan
    from speech.sim.hpa_artifact import hpa_fields
    from speech.sim.kube import plan_hpa_spec
    from speech.sim.scaler import scaling_numbers

    cluster = connect(args.kubeconfig, args.context)
    report: dict[str, list[dict]] = {}
    for name, m in models.items():
        k8s = m.kubernetes
        target = K8sTarget(k8s.namespace, args.endpoint or object_name(stack, name), k8s.autoscaler)
        issues: list[Issue] = []
        if m.measurements is None:
            issues.append(Issue("missing", f"{name}: the stack has no measurements for it, so no autoscaler is planned"))
        else:
            plan = build_plan(m.measurements.qmax, m.measurements.ttotal, m.plan, allow_config_mismatch=allow_config_mismatch,
                              max_instances_cap=m.max_instances)
            spec = plan_hpa_spec(plan, scaling_numbers(plan), k8s.autoscaler, tolerance=k8s.has_tolerance,
                                 scale_down=k8s.scale_down)
            issues += read_issues(cluster, target, hpa_fields(spec, k8s.metric.name), k8s.metric.name)
        digest = deployment_digest(cluster, target)
        if digest != k8s.image_digest:
            issues.append(Issue("mismatch", f"Deployment {target.namespace}/{target.deployment} runs {digest[:19]}, the stack "
                                            f"says {k8s.image_digest[:19]}: the measurements describe other bytes"))
        report[f"{target.namespace}/{target.deployment}"] = [i.as_dict() for i in issues]
    return report
