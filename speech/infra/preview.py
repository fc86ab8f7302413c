"""Offline preview: run the real program under Pulumi's own mocks, with a stack file's config.

For machines without the Pulumi CLI. :func:`run_preview` is the reusable part: it returns every
resource the program registered (type, name, inputs as the engine would see them, parent), the
stack outputs, the gate decisions and the warnings. The policy pack's ``python -m policy check``
feeds those resources to the real pack process.

Several previews may run in one process: each run installs a fresh mock monitor, a fresh root
stack resource and the stack file's config (nothing leaks from the previous run). The mocks
themselves are :mod:`speech.infra.mocks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The mocks (and the receipts they answer with) are speech.infra.mocks'; load_receipts and
# install_mocks stay importable from here, where the policy runner and the tests find them.
from speech.infra.mocks import DEFAULT_REGION, PROJECT, install_mocks, load_receipts  # noqa: F401


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
    aliases: list[str] = field(default_factory=list)
    """URNs this resource had before (its ``aliases`` option, resolved as the engine resolves them):
    an existing stack's resource at one of them is moved to :attr:`urn`, not replaced."""
    ignore_changes: list[str] = field(default_factory=list)
    """Input names whose changes the engine ignores on update (camelCase, as the engine receives them)."""
    alias_specs: list[dict[str, Any]] = field(default_factory=list)
    """The alias specs as the SDK sent them (``urn``, or ``name``/``type``/``parent``/``no_parent``,
    empty meaning the resource's own): :mod:`speech.infra.urns` resolves them by the engine's rules."""


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
    notes: list[str] = field(default_factory=list)
    """The program's info messages (``pulumi.log.info``), as the engine prints them in a preview."""
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


# --- stack files ----------------------------------------------------------------------------------


def stack_config_values(stack_file: Path) -> dict[str, str]:
    """``config:`` of a Pulumi.<stack>.yaml as the engine hands it to a program: structured values
    as JSON strings, plain strings as they are."""
    from speech.stack.read import read_stack_yaml

    return {key: value if isinstance(value, str) else json.dumps(value, default=str)
            for key, value in read_stack_yaml(stack_file).items()}


class _MockedRun:
    """One mocked run's event loop, ended as ``asyncio.run()`` ends its own (:meth:`finish`).

    A program that raises leaves Pulumi's remaining applies pending, waiting on outputs that will
    never resolve, and the futures of the resources it could not register failed and unawaited.
    Left alone, asyncio reports each of them ("Task was destroyed but it is pending!", "Future
    exception was never retrieved") when the garbage collector destroys it: at a moment no one
    chooses, into whatever the process is printing then (the same command's one-line error, the
    next command's stderr). So every task made on the loop is kept, and :meth:`finish` cancels the
    pending ones and runs them to their end (a cancelled task reports nothing); and the loop's
    exception handler holds the "never retrieved" reports until the run's outcome is known: a
    failed run's are its own error again (raised to the caller through ``program()``) and are
    dropped, whenever they come; a successful run's are passed on to asyncio's default handler."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: list[asyncio.Task[Any]] = []
        self.failed: bool | None = None  # None while the run is on
        self.unretrieved: list[dict[str, Any]] = []
        loop.set_task_factory(self._task)
        loop.set_exception_handler(self._report)

    def _task(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        self.tasks.append(task)
        return task

    def _report(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).endswith("exception was never retrieved"):
            if self.failed is None:
                self.unretrieved.append(context)
                return
            if self.failed:
                return
        loop.default_exception_handler(context)

    def finish(self, *, failed: bool) -> None:
        """Cancel the tasks still pending and run them to their end, join the worker threads,
        close the loop."""
        loop = self.loop
        try:
            if not loop.is_closed() and not loop.is_running():
                # A cancelled task may start others while unwinding: repeat until none is pending.
                while pending := [task for task in self.tasks if not task.done()]:
                    for task in pending:
                        task.cancel()
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                # An RPC a worker thread still runs would call back into the loop once it is closed.
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            self.tasks.clear()
            self.failed = failed
            held, self.unretrieved = self.unretrieved, []
            for context in held:
                self._report(loop, context)
            with contextlib.suppress(RuntimeError):
                if asyncio.get_event_loop_policy().get_event_loop() is loop:
                    asyncio.set_event_loop(None)
            if not loop.is_running():
                loop.close()


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
    notes: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())
            elif record.levelno >= logging.INFO:
                notes.append(record.getMessage())

    logger = logging.Logger(f"speech.infra.preview.{stack}")
    logger.addHandler(_Collect())
    logger.propagate = False

    mocks, monitor = install_mocks(stack, config, region=region, logger=logger, first_preview=first_preview,
                                   receipts=receipts, bucket_errors=bucket_errors)
    run = _MockedRun(asyncio.get_event_loop())  # the fresh loop install_mocks just set
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
    ran = False
    try:
        try:
            program()
            ran = True
        finally:
            # Whether the program failed or not, nothing of this run may outlive it (_MockedRun).
            run.finish(failed=not ran)
            # The runtime's worker threads each leave an event loop (a selector and a self-pipe) in
            # reference cycles: collect them now, or a process running many previews (the test
            # suite) runs out of file descriptors.
            gc.collect()
    except Exception as err:
        # A ConfigError raised inside the program (an apply, a component) reaches the user as
        # that one line (the CLI prints it, exit 2), not as the runtime's traceback around it.
        from speech.errors import speech_error_in

        failed = speech_error_in(err)
        if failed is None:
            raise
    if failed is not None:
        raise failed from None

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
            replace_on_changes=req.get("replace_on_changes", []), aliases=req.get("aliases", []),
            ignore_changes=req.get("ignore_changes", []), alias_specs=req.get("alias_specs", []),
        ))
    gates = []
    for m, d in decided.items():
        g = final.get(m)
        gates.append(GateView(model=m, enabled=g.enabled, reason=g.reason) if g is not None else GateView(
            model=m, enabled=False, reason="decided at pulumi up: the receipts are read once the bucket exists "
                                           f"(until then: {d.gate.reason})"))
    return PreviewResult(stack=stack, project=PROJECT, resources=resources, outputs=resolved, gates=gates,
                         warnings=warnings, notes=notes,
                         invokes=list(mocks.invokes))


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
