"""``bench drift``: read-only reconciliation of deployed scaling with the stack config and plan."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import ValidationError

from speech.config import StackConfig
from speech.errors import ConfigError
from speech.files import describe_validation_error
from speech.plan import build_plan

from . import aws
from .errors import UsageError
from .scaling_check import compare
from .stackfile import MODELS_KEY, PROJECT, read_stack_file

DESCRIPTION = """\
Compare what is deployed for each model of a stack (scalable target min/max and suspended
state, scaling policies, their alarms) with the stack config and the plan computed from the
stack's own measurements (the same build_plan the program and policy pack use). Read-only:
only Describe* calls.

Names frozen scaling (a killed qmax/ttotal: run `bench thaw`), orphan policies (not one of
<endpoint>-scale-out / -scale-in / -surge), missing policies and alarms, and every value that
differs from the plan. Endpoint names are <stack>-<model> unless --endpoint is given.

  python -m bench drift --stack dev
  python -m bench drift --stack dev --endpoint dev-kokoro-82m --json

Exit 0 and `preflight-ok` when clean, 1 on any drift, 2 bad input (no such stack file/endpoint).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, metavar="NAME", help="stack whose Pulumi.NAME.yaml describes the models")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml lives (default .)")
    p.add_argument("--endpoint", metavar="NAME", help="endpoint name when not <stack>-<model> (needs one model or --model)")
    p.add_argument("--model", metavar="NAME", help="check only this model")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
    p.add_argument("--json", action="store_true", help="print {ok, endpoints: {name: [issues]}} as JSON")


def load_stack(path: Path) -> StackConfig:
    if not path.exists():
        raise UsageError(f"{path}: no such stack file; check --stack / --stack-dir")
    config = read_stack_file(path).get("config") or {}
    models = config.get(MODELS_KEY)
    if not models:
        raise ConfigError(f"{path}: no {MODELS_KEY} entry; nothing to check (run bench plan --stack first)")
    try:
        return StackConfig(models=dict(models), allow_config_mismatch=bool(config.get(f"{PROJECT}:allow_config_mismatch", False)))
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, f"{path} {MODELS_KEY}")) from None


def run(args: argparse.Namespace, session=None) -> int:
    stack = load_stack(args.stack_dir / f"Pulumi.{args.stack}.yaml")
    models = stack.models
    if args.model:
        if args.model not in models:
            raise UsageError(f"--model {args.model!r}: the stack has {', '.join(models)}")
        models = {args.model: models[args.model]}
    if args.endpoint and len(models) > 1:
        raise UsageError("--endpoint names one endpoint: add --model to say which model it serves")
    sess = session or aws.session(args.region)
    report: dict[str, list[dict]] = {}
    for name, m in models.items():
        endpoint = args.endpoint or f"{args.stack}-{name}"
        aws.describe_endpoint(sess, endpoint)  # a missing endpoint is bad input, not drift
        plan, why = None, "the stack has no measurements for it"
        if m.measurements is not None:
            plan = build_plan(m.measurements.qmax, m.measurements.ttotal, m.plan,
                              allow_config_mismatch=stack.allow_config_mismatch, max_instances_cap=m.max_instances)
            why = "the plan's verdict is stop"
        issues = compare(plan, aws.read_deployed(sess, endpoint), why)
        report[endpoint] = [i.as_dict() for i in issues]
    ok = not any(report.values())
    if args.json:
        print(json.dumps({"ok": ok, "endpoints": report}, indent=2))
    else:
        for endpoint, issues in report.items():
            for i in issues:
                print(f"{endpoint}: [{i['kind']}] {i['message']}")
        print("preflight-ok" if ok else f"drift: {sum(map(len, report.values()))} issue(s)")
    return 0 if ok else 1
