"""Offline preview: run the real program under Pulumi's own mocks, with a stack file's config.

For machines without the Pulumi CLI. :func:`run_preview` is the reusable part: it returns every
resource the program registered (type, name, inputs as the engine would see them, parent), the
stack outputs, the gate decisions and the warnings. The policy pack's ``python -m policy check``
feeds those resources to the real pack process.

Several previews may run in one process: each run installs a fresh mock monitor, a fresh root
stack resource and the stack file's config (nothing leaks from the previous run).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from .errors import ConfigError

PROJECT = "speech-endpoints"
ACCOUNT_ID = "123456789012"
DEFAULT_REGION = "us-east-1"


@dataclass
class RegisteredResource:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: Optional[str] = None
    """URN of the parent resource (a component, or the root stack)."""
    urn: Optional[str] = None
    custom: bool = True
    """False for component resources (``speech:index:*``)."""


@dataclass
class GateView:
    model: str
    enabled: bool
    reason: str


@dataclass
class PreviewResult:
    stack: str
    project: str
    resources: list[RegisteredResource]
    outputs: dict[str, Any]
    gates: list[GateView]
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> RegisteredResource:
        for r in self.resources:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=str)


# --- the mocks ------------------------------------------------------------------------------------


def _physical(args_name: str) -> str:
    return args_name.lower()[:60]


class SpeechMocks:
    """Pulumi mocks that record each registration and answer like AWS would (ARNs, names, URLs)."""

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = ACCOUNT_ID) -> None:
        self.region = region
        self.account_id = account_id
        self.registered: dict[tuple[str, str], dict[str, Any]] = {}
        self.order: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    # pulumi.runtime.Mocks is an ABC; subclassing it lazily keeps this module importable without pulumi.
    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        with self._lock:
            self.registered[(args.typ, args.name)] = dict(args.inputs)
            self.order.append((args.typ, args.name))
        state = dict(args.inputs)
        if not args.custom:
            return "", state
        phys = state.get("name") or _physical(args.name)
        svc = args.typ.split(":")[1].split("/")[0]
        r, a = self.region, self.account_id
        if args.typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", phys)
            state["arn"] = f"arn:aws:s3:::{state['bucket']}"
            return state["bucket"], state
        if args.typ == "aws:ecr/repository:Repository":
            state.setdefault("name", phys)
            state["arn"] = f"arn:aws:ecr:{r}:{a}:repository/{state['name']}"
            state["repositoryUrl"] = f"{a}.dkr.ecr.{r}.amazonaws.com/{state['name']}"
            return state["name"], state
        if args.typ == "aws:lambda/invocation:Invocation":
            state["result"] = json.dumps({"status": "SUCCEEDED"})
            return f"{args.name}-id", state
        if args.typ == "aws:cloudwatch/dashboard:Dashboard":
            state["dashboardArn"] = f"arn:aws:cloudwatch::{a}:dashboard/{state.get('dashboardName')}"
            return str(state.get("dashboardName")), state
        state.setdefault("name", phys)
        kind = args.typ.split(":")[-1].lower()
        state.setdefault("arn", f"arn:aws:{svc}:{'' if svc == 'iam' else r}:{a}:{kind}/{state['name']}")
        return f"{args.name}-id", state

    def call(self, args: Any) -> tuple[dict[str, Any], None] | dict[str, Any]:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": self.account_id, "arn": f"arn:aws:iam::{self.account_id}:user/preview",
                    "userId": "PREVIEW", "id": self.account_id}
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region,
                    "endpoint": f"ec2.{self.region}.amazonaws.com", "description": self.region}
        return {}


def make_mocks(region: str = DEFAULT_REGION) -> Any:
    import pulumi

    class _Mocks(SpeechMocks, pulumi.runtime.Mocks):
        pass

    return _Mocks(region=region)


def _make_monitor(mocks: Any) -> Any:
    from pulumi.runtime.mocks import MockMonitor

    class _Monitor(MockMonitor):
        """Also records each registration's parent URN and its own URN (mocks do not see them)."""

        def __init__(self, m: Any) -> None:
            super().__init__(m)
            self.parents: dict[tuple[str, str], tuple[str, str, bool]] = {}

        def RegisterResource(self, request: Any) -> Any:
            resp = super().RegisterResource(request)
            self.parents[(request.type, request.name)] = (request.parent, resp.urn, bool(request.custom))
            return resp

    return _Monitor(mocks)


def install_mocks(stack: str, config: dict[str, str], region: str = DEFAULT_REGION, project: str = PROJECT,
                  logger: Optional[logging.Logger] = None) -> tuple[Any, Any]:
    """Reset Pulumi's runtime and install fresh mocks + config; returns (mocks, monitor)."""
    import pulumi
    from pulumi.runtime import settings

    # Pulumi's runtime asks for the current event loop; a process that already ran asyncio.run()
    # (bench, a test) has none set, so give it a fresh one.
    asyncio.set_event_loop(asyncio.new_event_loop())
    settings.ROOT.set(None)  # set_mocks only makes a new root stack when none exists
    pulumi.runtime.set_all_config(dict(config), [])
    mocks = make_mocks(region)
    monitor = _make_monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, logger=logger, monitor=monitor)
    return mocks, monitor


# --- stack files ----------------------------------------------------------------------------------


def stack_config_values(stack_file: Path) -> dict[str, str]:
    """``config:`` of a Pulumi.<stack>.yaml as the engine hands it to a program: structured values
    as JSON strings, plain strings as they are."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe").load(Path(stack_file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{stack_file}: no such stack file; create it with `python -m bench plan ... --stack <name>`") from None
    except YAMLError as err:
        raise ConfigError(f"{stack_file}: not valid YAML ({err.__class__.__name__}); fix the file") from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict):
        raise ConfigError(f"{stack_file}: top level must be a mapping with a 'config' mapping")
    out = {}
    for key, value in (data.get("config") or {}).items():
        key = str(key)
        if ":" not in key:
            key = f"{PROJECT}:{key}"  # the CLI's shorthand for the project namespace
        out[key] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def run_preview(stack_file: Path, stack: Optional[str] = None) -> PreviewResult:
    """Run the program against ``stack_file`` under mocks. Raises :class:`ConfigError` (or another
    :class:`speech.errors.SpeechError`) for user mistakes."""
    import pulumi

    from .program import define_stack
    from .stack import load_stack_config

    stack_file = Path(stack_file)
    stack = stack or stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    config = stack_config_values(stack_file)
    region = config.get("aws:region", DEFAULT_REGION)

    warnings: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logger = logging.Logger(f"speech.preview.{stack}")
    logger.addHandler(_Collect())
    logger.propagate = False

    mocks, monitor = install_mocks(stack, config, region=region, logger=logger)
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        outputs = define_stack(load_stack_config())
        return pulumi.Output.all(**outputs).apply(resolved.update) if outputs else None

    program()

    resources = []
    for key in mocks.order:
        parent, urn, custom = monitor.parents.get(key, (None, None, True))
        resources.append(RegisteredResource(type=key[0], name=key[1], inputs=mocks.registered[key],
                                            parent=parent or None, urn=urn, custom=custom))
    gates = [GateView(model=m, enabled=o["gate"]["enabled"], reason=o["gate"]["reason"]) for m, o in resolved.items()]
    return PreviewResult(stack=stack, project=PROJECT, resources=resources, outputs=resolved, gates=gates,
                         warnings=warnings)


# --- rendering ------------------------------------------------------------------------------------

SHORT = {
    "aws:sagemaker/model:Model": lambda i: {
        "image": i.get("primaryContainer", {}).get("image"),
        "QUEUE_MAX_DEPTH": i.get("primaryContainer", {}).get("environment", {}).get("QUEUE_MAX_DEPTH"),
        "SLO_MS": i.get("primaryContainer", {}).get("environment", {}).get("SLO_MS"),
    },
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": lambda i: {
        k: (i.get("productionVariants") or [{}])[0].get(k) for k in ("variantName", "instanceType", "initialInstanceCount")
    },
    "aws:sagemaker/endpoint:Endpoint": lambda i: {
        "name": i.get("name"),
        "deployment": i.get("deploymentConfig", {}).get("blueGreenUpdatePolicy", {}).get("trafficRoutingConfiguration", {}).get("type"),
    },
    "aws:appautoscaling/target:Target": lambda i: {k: i.get(k) for k in ("resourceId", "minCapacity", "maxCapacity")},
    "aws:appautoscaling/policy:Policy": lambda i: (
        {"policyType": i.get("policyType"), **{k: i.get("targetTrackingScalingPolicyConfiguration", {}).get(k)
                                              for k in ("targetValue", "scaleOutCooldown", "disableScaleIn")}}
        if i.get("policyType") == "TargetTrackingScaling"
        else {"policyType": i.get("policyType"), **{k: i.get("stepScalingPolicyConfiguration", {}).get(k)
                                                   for k in ("adjustmentType", "cooldown", "stepAdjustments")}}
    ),
    "aws:cloudwatch/metricAlarm:MetricAlarm": lambda i: {
        k: i.get(k) for k in ("metricName", "comparisonOperator", "threshold", "period", "evaluationPeriods")
    },
    "aws:s3/bucketObjectv2:BucketObjectv2": lambda i: {"key": i.get("key"), "bytes": len(i.get("content") or "")},
}


def render(result: PreviewResult) -> str:
    lines = [f"offline preview of stack {result.stack!r} (project {result.project}, Pulumi mocks, no AWS calls)", ""]
    custom = [r for r in result.resources if r.custom]
    lines.append(f"resources that would be created ({len(custom)}):")
    for r in custom:
        props = SHORT.get(r.type, lambda i: {})(r.inputs)
        shown = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in props.items() if v is not None)
        lines.append(f"  {r.type:<62} {r.name}" + (f"  {shown}" if shown else ""))
    lines.append("")
    lines.append("autoscaling gate:")
    for g in result.gates:
        lines.append(f"  {g.model}: {'scaling' if g.enabled else 'NO scaling'}: {g.reason}")
    for model, out in result.outputs.items():
        lines.append("")
        lines.append(f"{model}: endpoint {out['endpoint_name']}, verdict {out.get('verdict')}")
        if "thresholds" in out:
            t, c, f = out["thresholds"], out["cooldowns"], out["fleet"]
            lines.append(
                f"  Q_max {out['q_max']}, target {t['scaling_target_value']:g}, scale-in {t['scale_in_threshold']:g}, "
                f"cooldowns {c['scale_out_s']}/{c['scale_in_s']} s, fleet {f['min_instances']}..{f['max_instances']}, "
                f"T_total {out['t_total_planning_s']:g} s, SLO {out['slo_ms']:g} ms"
            )
        for fd in out.get("findings", []):
            if fd["level"] != "ok":
                lines.append(f"  [{fd['level']}] {fd['name']}")
    if result.warnings:
        lines.append("")
        lines.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    import argparse
    import sys

    from .errors import SpeechError

    parser = argparse.ArgumentParser(prog="python -m speech preview",
                                     description="Run the Pulumi program under mocks against Pulumi.<stack>.yaml.")
    parser.add_argument("--stack", required=True, metavar="NAME")
    parser.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print resources, outputs and gates as JSON")
    args = parser.parse_args(argv)
    try:
        result = run_preview(args.stack_dir / f"Pulumi.{args.stack}.yaml", args.stack)
    except SpeechError as err:
        print(f"{err.__class__.__name__}: {err}", file=sys.stderr)
        return 2
    print(result.to_json() if args.json else render(result))
    return 0
