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
import functools
import contextlib
import gc
import hashlib
import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from speech.errors import ConfigError

PROJECT = "speech-endpoints"
ACCOUNT_ID = "123456789012"
DEFAULT_REGION = "us-east-1"


@dataclass
class RegisteredResource:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str | None = None
    """URN of the parent resource (a component, or the root stack)."""
    urn: str | None = None
    custom: bool = True
    """False for component resources (``speech:index:*``)."""
    dependencies: list[str] = field(default_factory=list)
    """URNs this resource depends on (explicit depends_on and every input's dependencies)."""
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    """Input name -> URNs its value came from, as the engine sends them to a policy pack."""
    delete_before_replace: bool = False
    replace_on_changes: list[str] = field(default_factory=list)


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
    invokes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The data-source calls the program made (token, arguments)."""

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


def autoname_key(type_: str) -> str | None:
    """The input pulumi-aws fills with ``<logical name>-<random>`` when the program leaves it out
    (it does so in Check, so the name is known in a preview): ``bucket`` for buckets, else ``name``
    where the resource's Args class has one."""
    import importlib
    import inspect

    if type_ in ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"):
        return "bucket"
    pkg, _, rest = type_.partition(":")
    mod, _, cls = rest.partition(":")
    if pkg != "aws" or "/" not in mod or mod.startswith("index/"):
        return None
    module = mod.split("/")[0]
    try:
        m = importlib.import_module(f"pulumi_aws.{module}") if module != "lambda" else importlib.import_module("pulumi_aws.lambda_")
        args_cls = getattr(m, f"{cls}Args")
    except (ImportError, AttributeError):
        return None
    return "name" if "name" in inspect.signature(args_cls.__init__).parameters else None


def load_receipts(source: str | Path) -> dict[str, str]:
    """The receipts an offline preview may read, by S3 key (``receipts/<model>/<kind>-<sha>.json``).

    ``source``: ``s3://BUCKET`` reads that bucket's ``receipts/`` with boto3 (the environment's
    credentials; the only AWS call of an offline preview); otherwise a directory holding a copy of
    it, made with ``aws s3 sync s3://BUCKET/receipts/ DIR/receipts/``. Every data-source read of a
    receipt under the mocks is answered from here, whatever bucket the program names."""
    from speech.schema.receipts import RECEIPT_PREFIX

    text = str(source)
    if text.startswith("s3://"):
        bucket = text.removeprefix("s3://").strip("/")
        try:
            import boto3
            from botocore.exceptions import BotoCoreError, ClientError

            s3 = boto3.client("s3")
            out = {}
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{RECEIPT_PREFIX}/"):
                for obj in page.get("Contents", []):
                    out[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode("utf-8", "replace")
            return out
        except (BotoCoreError, ClientError) as err:
            raise ConfigError(f"--receipts {text}: cannot read the receipts ({err}); check the bucket name and your "
                              "AWS credentials (s3:ListBucket, s3:GetObject), or pass a directory copy") from None
    root = Path(source)
    if not root.is_dir():
        raise ConfigError(f"--receipts {text}: no such directory; copy the receipts with "
                          f"`aws s3 sync s3://<bucket>/{RECEIPT_PREFIX}/ {text}/{RECEIPT_PREFIX}/`, or pass s3://<bucket>")
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted((root / RECEIPT_PREFIX).rglob("*.json")) if p.is_file()}


class SpeechMocks:
    """Pulumi mocks that record each registration and answer like AWS would (ARNs, names, URLs).

    ``first_preview``: answer like the engine does in the first preview of a new stack instead:
    a create returns its inputs, pulumi-aws's autonames, and nothing else, so every
    provider-computed output (ids, ARNs, URLs, digests, invocation results) is unknown.

    ``receipts``: the objects the S3 data sources find (by key, in any bucket); none by default,
    so a measured artifact's receipt is missing offline unless they are given.
    """

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = ACCOUNT_ID, first_preview: bool = False,
                 receipts: dict[str, str] | None = None, bucket_errors: dict[str, str] | None = None) -> None:
        self.region = region
        self.account_id = account_id
        self.first_preview = first_preview
        self.receipts = dict(receipts or {})
        self.bucket_errors = dict(bucket_errors or {})
        """Bucket -> the error the S3 data sources fail with there (no such bucket, another
        account's, another region's), as the provider reports it."""
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        """Every data-source call the program made: (token, arguments)."""
        self.autonames: dict[tuple[str, str], dict[str, str]] = {}
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
        if self.first_preview:
            key = autoname_key(args.typ)
            if key and state.get(key) is None:
                suffix = hashlib.sha256(f"{args.typ}::{args.name}".encode()).hexdigest()[:7]
                state[key] = f"{args.name}-{suffix}"
                self.autonames[(args.typ, args.name)] = {key: state[key]}
            return "", {k: v for k, v in state.items() if v is not None}
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
            state["registryId"] = a
            return state["name"], state
        if args.typ == "docker-build:index:Image":
            digest = "sha256:" + hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()
            state["digest"] = digest
            state["ref"] = f"{(state.get('tags') or ['image'])[0]}@{digest}"
            return f"{args.name}-id", state
        if args.typ == "aws:lambda/invocation:Invocation":
            state["result"] = json.dumps({"status": "SUCCEEDED"})
            return f"{args.name}-id", state
        if args.typ == "aws-native:sagemaker:InferenceComponent":
            # Cloud Control's outputs: the ARN and status (the name is an input the program sets).
            ic = state.get("inferenceComponentName") or _physical(args.name)
            state["inferenceComponentArn"] = f"arn:aws:sagemaker:{r}:{a}:inference-component/{ic}"
            state["inferenceComponentStatus"] = "InService"
            return state["inferenceComponentArn"], state
        if args.typ == "aws:cloudwatch/dashboard:Dashboard":
            state["dashboardArn"] = f"arn:aws:cloudwatch::{a}:dashboard/{state.get('dashboardName')}"
            return str(state.get("dashboardName")), state
        state.setdefault("name", phys)
        kind = args.typ.split(":")[-1].lower()
        state.setdefault("arn", f"arn:aws:{svc}:{'' if svc == 'iam' else r}:{a}:{kind}/{state['name']}")
        return f"{args.name}-id", state

    def call(self, args: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        with self._lock:
            self.invokes.append((args.token, dict(args.args)))
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": self.account_id, "arn": f"arn:aws:iam::{self.account_id}:user/preview",
                    "userId": "PREVIEW", "id": self.account_id}, []
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            registry = f"{self.account_id}.dkr.ecr.{self.region}.amazonaws.com"
            return {"authorizationToken": "UFJFVklFVzpQUkVWSUVX", "userName": "AWS", "password": "PREVIEW",
                    "proxyEndpoint": f"https://{registry}", "expiresAt": "2099-01-01T00:00:00Z", "id": self.region,
                    "registryId": self.account_id}, []
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region,
                    "endpoint": f"ec2.{self.region}.amazonaws.com", "description": self.region}, []
        if args.token in ("aws:s3/getObjects:getObjects", "aws:s3/getObject:getObject") and \
                args.args.get("bucket") in self.bucket_errors:
            return {}, [("bucket", self.bucket_errors[args.args["bucket"]])]
        if args.token == "aws:s3/getObjects:getObjects":
            bucket, prefix = args.args.get("bucket"), args.args.get("prefix") or ""
            return {"bucket": bucket, "id": bucket, "keys": sorted(k for k in self.receipts if k.startswith(prefix)),
                    "commonPrefixes": [], "owners": [], "requestCharged": ""}, []
        if args.token == "aws:s3/getObject:getObject":
            bucket, key = args.args.get("bucket"), args.args.get("key")
            if key not in self.receipts:
                # What the provider does for a missing key: the invoke fails.
                return {}, [("key", f"reading S3 Object (s3://{bucket}/{key}): couldn't find resource")]
            body = self.receipts[key]
            return {"bucket": bucket, "key": key, "id": key, "body": body, "contentType": "application/json",
                    "contentLength": len(body.encode()), "arn": f"arn:aws:s3:::{bucket}/{key}"}, []
        return {}, []


def make_mocks(region: str = DEFAULT_REGION, first_preview: bool = False, receipts: dict[str, str] | None = None,
               bucket_errors: dict[str, str] | None = None) -> Any:
    import pulumi

    class _Mocks(SpeechMocks, pulumi.runtime.Mocks):
        pass

    return _Mocks(region=region, first_preview=first_preview, receipts=receipts, bucket_errors=bucket_errors)


def _make_monitor(mocks: Any) -> Any:
    from pulumi.runtime.mocks import MockMonitor

    class _Monitor(MockMonitor):
        """Also records each registration's parent URN and its own URN (mocks do not see them)."""

        def __init__(self, m: Any) -> None:
            super().__init__(m)
            self.parents: dict[tuple[str, str], tuple[str, str, bool]] = {}
            self.requests: dict[tuple[str, str], dict[str, Any]] = {}

        def RegisterResource(self, request: Any) -> Any:
            from google.protobuf import json_format

            resp = super().RegisterResource(request)
            key = (request.type, request.name)
            self.parents[key] = (request.parent, resp.urn, bool(request.custom))
            self.requests[key] = {
                # The inputs as sent, unknowns still the engine's sentinel string.
                "wire_inputs": json_format.MessageToDict(request.object),
                "dependencies": list(request.dependencies),
                "property_dependencies": {k: list(v.urns) for k, v in request.propertyDependencies.items()},
                "delete_before_replace": bool(request.deleteBeforeReplace),
                "replace_on_changes": list(request.replaceOnChanges),
            }
            return resp

        def Invoke(self, request: Any) -> Any:
            # The engine declines an invoke whose dependencies are pending creation (all of them, in
            # a first preview) and answers unknown.
            if getattr(self.mocks, "first_preview", False) and list(request.dependsOn):
                from pulumi.runtime.proto import resource_pb2

                return resource_pb2.ResourceInvokeResponse(unknown=True)
            return super().Invoke(request)

    return _Monitor(mocks)


def install_mocks(stack: str, config: dict[str, str], region: str = DEFAULT_REGION, project: str = PROJECT,
                  logger: logging.Logger | None = None, first_preview: bool = False,
                  receipts: dict[str, str] | None = None, bucket_errors: dict[str, str] | None = None) -> tuple[Any, Any]:
    """Reset Pulumi's runtime and install fresh mocks + config; returns (mocks, monitor).

    ``first_preview``: run as the engine runs the first preview of a new stack (dry run, nothing
    exists yet, provider-computed outputs unknown)."""
    import pulumi
    from pulumi.runtime import settings

    # Pulumi's runtime asks for the current event loop; a process that already ran asyncio.run()
    # (bench, a test) has none set, so give it a fresh one.
    # The previous preview's loop is finished: close it, or every run leaks its selector and self-pipe.
    with contextlib.suppress(RuntimeError):
        previous = asyncio.get_event_loop_policy().get_event_loop()
        if not previous.is_running() and not previous.is_closed():
            previous.close()
    asyncio.set_event_loop(asyncio.new_event_loop())
    settings.ROOT.set(None)  # set_mocks only makes a new root stack when none exists
    pulumi.runtime.set_all_config(dict(config), [])
    mocks = make_mocks(region, first_preview=first_preview, receipts=receipts, bucket_errors=bucket_errors)
    monitor = _make_monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=first_preview, logger=logger, monitor=monitor)
    return mocks, monitor


# --- stack files ----------------------------------------------------------------------------------


def stack_config_values(stack_file: Path) -> dict[str, str]:
    """``config:`` of a Pulumi.<stack>.yaml as the engine hands it to a program: structured values
    as JSON strings, plain strings as they are."""
    from speech.stack.read import read_stack_yaml

    return {key: value if isinstance(value, str) else json.dumps(value, default=str)
            for key, value in read_stack_yaml(stack_file).items()}


def run_preview(stack_file: Path, stack: str | None = None, *, first_preview: bool = False,
                receipts: dict[str, str] | None = None, bucket_errors: dict[str, str] | None = None) -> PreviewResult:
    """Run the program against ``stack_file`` under mocks. Raises :class:`ConfigError` (or another
    :class:`speech.errors.SpeechError`) for user mistakes.

    ``first_preview``: the first preview of a new stack; resource inputs are then reported as the
    engine sends them (unknowns as its sentinel string, numbers as doubles).
    ``receipts``: what the S3 data sources find (:func:`load_receipts`); none by default.
    ``bucket_errors``: buckets whose reads fail, with the provider's error (:class:`SpeechMocks`)."""
    import pulumi

    from speech.infra.program import define_stack, plan_stack
    from speech.infra.stack_config import load_stack_config

    from speech.stack.read import stack_name

    stack_file = Path(stack_file)
    stack = stack_name(stack or stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml"))
    config = stack_config_values(stack_file)
    region = config.get("aws:region", DEFAULT_REGION)

    warnings: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logger = logging.Logger(f"speech.infra.preview.{stack}")
    logger.addHandler(_Collect())
    logger.propagate = False

    mocks, monitor = install_mocks(stack, config, region=region, logger=logger, first_preview=first_preview,
                                   receipts=receipts, bucket_errors=bucket_errors)
    resolved: dict[str, Any] = {}
    decided: dict[str, Any] = {}
    final: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        # Artifact references are resolved against the stack file's directory, as the program
        # resolves them against the project directory it runs in.
        stack_config = load_stack_config(base_dir=stack_file.parent)
        decided.update(plan_stack(stack_config))
        gates: dict[str, Any] = {}
        outputs = define_stack(stack_config, gates)
        for model, g in gates.items():
            if isinstance(g, pulumi.Output):
                g.apply(functools.partial(final.__setitem__, model))
            elif g is not None:
                final[model] = g
        # In a first preview most outputs are unknown: each known one is collected on its own.
        for key, out in outputs.items():
            out.apply(functools.partial(resolved.__setitem__, key))
        return pulumi.Output.all(*outputs.values()) if outputs else None

    failed: Exception | None = None
    try:
        program()
    except Exception as err:
        # A ConfigError raised inside the program (an apply, a component) reaches the user as
        # that one line (the CLI prints it, exit 2), not as the runtime's traceback around it,
        # nor as asyncio's complaints about the tasks the failed run left pending.
        from speech.errors import speech_error_in

        failed = speech_error_in(err)
        if failed is None:
            gc.collect()
            raise
    if failed is not None:
        # Collected here, after the except block: there the traceback still held the frames that
        # reference the pending tasks, which then died later, logging into whatever ran next.
        quiet = logging.getLogger("asyncio")
        was, quiet.disabled = quiet.disabled, True
        try:
            gc.collect()
        finally:
            quiet.disabled = was
        raise failed from None
    # The runtime's worker threads each leave an event loop (a selector and a self-pipe) in
    # reference cycles: collect them now, or a process running many previews (the test suite)
    # runs out of file descriptors.
    gc.collect()

    resources = []
    for key in mocks.order:
        parent, urn, custom = monitor.parents.get(key, (None, None, True))
        req = monitor.requests.get(key, {})
        # What the pack sees are the provider-checked inputs: the program's plus pulumi-aws's autoname.
        inputs = ({**req.get("wire_inputs", {}), **mocks.autonames.get(key, {})} if first_preview
                  else mocks.registered[key])
        resources.append(RegisteredResource(
            type=key[0], name=key[1], inputs=inputs, parent=parent or None, urn=urn, custom=custom,
            dependencies=req.get("dependencies", []), property_dependencies=req.get("property_dependencies", {}),
            delete_before_replace=req.get("delete_before_replace", False),
            replace_on_changes=req.get("replace_on_changes", []),
        ))
    gates = []
    for m, d in decided.items():
        g = final.get(m)
        gates.append(GateView(model=m, enabled=g.enabled, reason=g.reason) if g is not None else GateView(
            model=m, enabled=False, reason="decided at pulumi up: the receipts are read once the bucket exists "
                                           f"(until then: {d.gate.reason})"))
    return PreviewResult(stack=stack, project=PROJECT, resources=resources, outputs=resolved, gates=gates,
                         warnings=warnings, invokes=list(mocks.invokes))


# --- rendering ------------------------------------------------------------------------------------

SHORT = {
    "aws:sagemaker/model:Model": lambda i: {
        "image": i.get("primaryContainer", {}).get("image"),
        **{k: i.get("primaryContainer", {}).get("environment", {}).get(k)
           for k in ("BACKEND", "MODEL_DIR", "QUEUE_MAX_DEPTH", "SLO_MS")},
        "modelData": ((i.get("primaryContainer", {}).get("modelDataSource") or {}).get("s3DataSources") or [{}])[0].get("s3Uri"),
    },
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": lambda i: {
        **{k: (i.get("productionVariants") or [{}])[0].get(k)
           for k in ("variantName", "instanceType", "initialInstanceCount", "containerStartupHealthCheckTimeoutInSeconds")},
        "routing": [r.get("routingStrategy") for r in (i.get("productionVariants") or [{}])[0].get("routingConfigs") or []],
        "managedInstanceScaling": (i.get("productionVariants") or [{}])[0].get("managedInstanceScaling"),
        "modelName": (i.get("productionVariants") or [{}])[0].get("modelName"),
    },
    "aws-native:sagemaker:InferenceComponent": lambda i: {
        "name": i.get("inferenceComponentName"),
        "endpoint": i.get("endpointName"),
        "copies": (i.get("runtimeConfig") or {}).get("copyCount"),
        "compute": (i.get("specification") or {}).get("computeResourceRequirements"),
        "model": (i.get("specification") or {}).get("modelName"),
    },
    "docker-build:index:Image": lambda i: {k: i.get(k) for k in ("tags", "platforms", "push")},
    "aws:s3/bucket:Bucket": lambda i: {"forceDestroy": i.get("forceDestroy")},
    "aws:ecr/repository:Repository": lambda i: {"forceDelete": i.get("forceDelete")},
    "aws:lambda/invocation:Invocation": lambda i: {"triggers": i.get("triggers")},
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
    endpoints = result.outputs.get("endpoints") or {}
    for model, sc in (result.outputs.get("scaling") or {}).items():
        ep = endpoints.get(model) or {}
        lines.append("")
        lines.append(f"{model}: endpoint {ep.get('name')}, verdict {sc['verdict'] or 'unmeasured'}, "
                     f"scaling {'on' if sc['enabled'] else 'off'} ({sc['reason_code']})")
        if sc["enabled"] and ep.get("async"):
            c = sc["cooldowns"]
            lines.append(
                f"  asynchronous (batch): Q_max {sc['q_max']} per instance, backlog target {sc['target']:g} per "
                f"instance, cooldowns {c['scale_out_s']}/{c['scale_in_s']} s, fleet {sc['min']}..{sc['max']} "
                "(woken from 0 by HasBacklogWithoutCapacity)"
            )
        elif sc["enabled"] and sc.get("instances") is not None:
            c, inst = sc["cooldowns"], sc["instances"]
            lines.append(
                f"  inference component {ep.get('inference_component')}: Q_max {sc['q_max']} per copy, target "
                f"{sc['target']:g} per copy, scale-in {sc['scale_in_threshold']:g}, cooldowns {c['scale_out_s']}/"
                f"{c['scale_in_s']} s, copies {sc['min']}..{sc['max']}, instances {inst['min']}..{inst['max']} "
                "(managed instance scaling)"
            )
        elif sc["enabled"]:
            c = sc["cooldowns"]
            lines.append(
                f"  Q_max {sc['q_max']}, target {sc['target']:g}, scale-in {sc['scale_in_threshold']:g}, "
                f"cooldowns {c['scale_out_s']}/{c['scale_in_s']} s, fleet {sc['min']}..{sc['max']}"
            )
        b = sc.get("budget")
        if b:
            lines.append(f"  budget: {b['priority']}, max {b['max_instances']} of {b['peak_instances']} at peak "
                         f"({100 * b['served_share']:.0f}% served), ${b['daily_usd_at_max']:,.2f}/day at max ({b['level']})")
        if ep:
            lines.append(f"  clients: {ep['runtime_call']} with role {ep['invoke_role_arn']}")
        if ep.get("async"):
            a = ep["async"]
            lines.append(f"  requests under {a['input_location']}, answers under {a['output_location']}")
    if result.warnings:
        lines.append("")
        lines.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(lines)


DESCRIPTION = """\
Run the Pulumi program under Pulumi's mocks against Pulumi.<stack>.yaml, offline (no AWS calls,
no Pulumi service): the resources it would create, each model's autoscaling gate, outputs and
warnings. A ConfigError the program raises is one line and exit 2.

Exit 0 the program ran, 2 bad input (stack file, config, receipts), 130 interrupted.
"""


def add_arguments(parser) -> None:
    from speech.cli import stack_name

    parser.add_argument("--stack", required=True, type=stack_name, metavar="NAME",
                        help="stack name, reads Pulumi.NAME.yaml (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    parser.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                        help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    parser.add_argument("--json", action="store_true", help="print resources, outputs and gates as JSON (errors too)")
    parser.add_argument("--first-preview", action="store_true",
                        help="run as the first preview of a new stack: ids, ARNs, URLs and image digests unknown")
    parser.add_argument("--receipts", metavar="DIR|s3://BUCKET",
                        help="where the measurement receipts are read from offline: a copy of the provenance "
                             "bucket's receipts/ (aws s3 sync s3://BUCKET/receipts/ DIR/receipts/), or s3://BUCKET "
                             "to read it with your AWS credentials; default none (measured figures then have none)")


def run(args) -> int:
    """The preview of ``args.stack``; raises SpeechError for bad input (the caller reports it)."""
    receipts = load_receipts(args.receipts) if args.receipts else None
    from speech.stack.read import stack_file, stack_name

    result = run_preview(stack_file(args.stack_dir, args.stack), stack_name(args.stack), first_preview=args.first_preview,
                         receipts=receipts)
    print(result.to_json() if args.json else render(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m speech preview`` (also ``speech-deploy preview``)."""
    import argparse

    from speech.cli import JsonAwareParser, guarded, parse_or_exit_code, wants_json

    JsonAwareParser.json_errors = wants_json(argv)
    parser = JsonAwareParser(prog="speech-deploy preview", description=DESCRIPTION,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args, code = parse_or_exit_code(parser, argv)
    return code if args is None else guarded(lambda: run(args), as_json=args.json)
