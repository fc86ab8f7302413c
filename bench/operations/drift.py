"""``bench drift``'s reconciliation, the one function the command calls for a stack
(:func:`stack_drift`): deployed scaling (scalable target, policies, alarms, fingerprint) against
the stack config and the plan its measurements give. Read-only."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from bench.aws import client as aws
from bench.aws.scaling_check import Issue, compare, compare_batch
from bench.errors import TargetError, UsageError
from bench.k8s.commands import stack_issues
from speech.errors import ConfigError
from speech.plan.batch import BatchPlan, build_batch_plan
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint
from speech.schema.config import ModelConfig, StackConfig
from speech.schema.plan_artifacts import PlanArtifact
from speech.stack.read import load_stack_file, stack_file, stack_name, stack_region
from speech.stack.write import MODELS_KEY, read_stack_file


def load_stack(path: Path) -> StackConfig:
    if not path.exists():
        raise UsageError(f"{path}: no such stack file; check --stack / --stack-dir")
    config = read_stack_file(path).get("config") or {}
    models = config.get(MODELS_KEY)
    if not models:
        raise ConfigError(f"{path}: no {MODELS_KEY} entry; nothing to check (run bench plan --stack first)")
    # The program's own parser: the same checks (every field, artifact references and their sha256)
    # and the same messages.
    try:
        return load_stack_file(path)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def read_fingerprint(sess: Any, endpoint: str, described: dict) -> aws.Identity | Issue:
    try:
        return aws.endpoint_identity(sess, endpoint, described)
    except TargetError as err:
        return Issue("fingerprint", f"{err}, so what it runs is unknown; expected what the program deploys; fix: pulumi up")


def fingerprint_issues(name: str, m: ModelConfig, d: aws.Identity, allow_config_mismatch: bool) -> list[Issue]:
    key = f"{MODELS_KEY}.{name}"
    redeploy = f"fix: pulumi up to deploy the stack config, or set {key}.{{field}} to what should run and re-measure it"
    issues = []
    if d.instance_type != m.instance_type:
        issues.append(Issue("fingerprint", f"endpoint configuration {d.endpoint_config} runs instance type "
                                           f"{d.instance_type!r}, stack config {key}.instance_type says "
                                           f"{m.instance_type!r}; {redeploy.format(field='instance_type')}"))
    if d.model_digest is None:
        issues.append(Issue("fingerprint", f"model {d.model} runs image {d.image!r}, not pinned by digest, so nothing "
                                           f"ties it to {key}.image ({m.image_digest or 'built by the stack'}); "
                                           f"{redeploy.format(field='image')}"))
    # No image in config: the stack built it, and the measurements below are what it must match.
    elif m.image_digest is not None and d.digest != m.image_digest:
        issues.append(Issue("fingerprint", f"model {d.model} runs image digest {d.digest}, stack config {key}.image "
                                           f"says {m.image_digest}; {redeploy.format(field='image')}"))
    if m.measurements is None or d.instance_type is None or d.digest is None or allow_config_mismatch:
        return issues
    try:
        deployed = Fingerprint.of(d.instance_type, d.digest)
    except ValidationError:
        return issues + [Issue("fingerprint", f"endpoint configuration {d.endpoint_config} instance type "
                                              f"{d.instance_type!r} is not a SageMaker ml.* type the artifacts can "
                                              f"describe; {redeploy.format(field='instance_type')}")]
    for kind, artifact in (("qmax", m.measurements.qmax), ("ttotal", m.measurements.ttotal)):
        fp = artifact.fingerprint
        if fp != deployed:
            issues.append(Issue("fingerprint", f"{key}.measurements.{kind} was measured on {fp.slug} ({fp.instance_type}, "
                                               f"{fp.image_digest}), but endpoint {d.endpoint_config} runs {deployed.slug} "
                                               f"({deployed.instance_type}, {deployed.image_digest}): "
                                               "its plan says nothing about what is deployed; fix: measure the deployed "
                                               "endpoint (bench qmax, bench ttotal) and re-plan (bench plan --stack), or "
                                               "deploy what was measured"))
    return issues


def stack_drift(args: argparse.Namespace, session=None) -> dict[str, list[dict]]:
    """Each endpoint (or Deployment) of ``--stack``'s models against the plan its measurements give,
    for the parsed flags of ``bench drift``: the issues found, by endpoint (an empty list: no drift).
    Read-only: Describe* calls, and the cluster's reads for hosting: kubernetes models."""
    if not args.stack:
        raise UsageError("pass --stack NAME (a stack's endpoints) or --kubernetes NAMESPACE/DEPLOYMENT (a cluster's autoscaler)")
    path = stack_file(args.stack_dir, args.stack)
    stack = load_stack(path)
    name_of_stack = stack_name(args.stack)
    models = stack.models
    if args.model:
        if args.model not in models:
            raise UsageError(f"--model {args.model!r}: the stack has {', '.join(models)}")
        models = {args.model: models[args.model]}
    components = [n for n, m in models.items() if m.hosting == "components"]
    if components:
        # Copy scaling lives on the inference component (inference-component/<name>), which this
        # check does not read yet: reporting the variant's absent scaling as drift would be wrong,
        # and "preflight-ok" would be a pass nobody checked.
        others = [n for n in models if n not in components]
        raise UsageError(
            f"{', '.join(components)}: hosting: components (copy scaling on the inference component) is not checked "
            "by bench drift yet; check it with python -m policy check --stack <stack> before deploying"
            + (f", and drift the others with --model {others[0]}" if others else "")
        )
    if args.endpoint and len(models) > 1:
        raise UsageError("--endpoint names one endpoint: add --model to say which model it serves")
    report: dict[str, list[dict]] = {}
    kube = {n: m for n, m in models.items() if m.hosting == "kubernetes"}
    if kube:  # a cluster's Deployments: their autoscalers through the kubeconfig, no AWS call
        report.update(stack_issues(args, name_of_stack, kube, stack.allow_config_mismatch))
        models = {n: m for n, m in models.items() if n not in kube}
    # The region the program deploys into (aws:region) unless --region says otherwise.
    sess = (session or aws.session(args.region or stack_region(path))) if models else None
    for name, m in models.items():
        endpoint = args.endpoint or f"{name_of_stack}-{name}"
        described = aws.describe_endpoint(sess, endpoint)  # a missing endpoint is bad input, not drift
        plan, why = None, "the stack has no measurements for it"
        if m.measurements is not None:
            # A batch route (hosting async) is planned and compared as one (speech.plan.batch).
            build = build_batch_plan if m.hosting == "async" else build_plan
            plan = build(m.measurements.qmax, m.measurements.ttotal, m.plan,
                         allow_config_mismatch=stack.allow_config_mismatch, max_instances_cap=m.max_instances)
            why = "the plan's verdict is stop"
        deployed_scaling = aws.read_deployed(sess, endpoint)
        # build_batch_plan made an async model's plan, build_plan any other's (above).
        issues = (compare_batch(cast("BatchPlan | None", plan), deployed_scaling, why) if m.hosting == "async"
                  else compare(cast("PlanArtifact | None", plan), deployed_scaling, why))
        deployed = read_fingerprint(sess, endpoint, described)
        issues += ([deployed] if isinstance(deployed, Issue)
                   else fingerprint_issues(name, m, deployed, stack.allow_config_mismatch))
        report[endpoint] = [i.as_dict() for i in issues]
    return report
