"""The stack's outputs contract (README "Stack outputs"): what other teams read with
``pulumi stack output`` or a ``pulumi.StackReference``.

Pure: plain values in, plain dicts out (the program passes resolved values through
``Output.apply``). Rules: every key is always present, whether or not a model is measured or its
scaling gate is on (null when there is no value); values are identifiers, numbers and stable keys,
never prose (the gate's reason is ``reason_code``; the plan's findings stay in the plan artifact
and the provenance document, referenced by ``provenance_key``). A change that removes or renames
a key, or changes a value's meaning, raises :data:`OUTPUTS_VERSION`; adding a key does not.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from speech.deploy.gate import GateDecision
from speech.deploy.iam import INVOKE_ACTIONS
from speech.deploy.scaling import COMPONENT_SCALABLE_DIMENSION, SCALABLE_DIMENSION, VARIANT
from speech.plan.batch import BatchPlan
from speech.schema.artifacts import canonical_sha256
from speech.schema.plan_artifacts import ModelAllocation, PlanArtifact

if TYPE_CHECKING:
    from speech.schema.copy_plan import CopyPlan

OUTPUTS_VERSION = 1
"""Version of the outputs' shape (``outputs_version``)."""

STREAMING_CALL = "InvokeEndpointWithResponseStream"
"""The runtime call for audio as it is produced (the container streams by default)."""
BUFFERED_CALL = "InvokeEndpoint"

ENDPOINT_KEYS = ("name", "arn", "region", "variant", "runtime_call", "runtime_actions", "streaming",
                 "invoke_role_arn", "invoke_policy_arn", "instance_type", "image", "hosting", "inference_component",
                 "async", "provenance_bucket")
ASYNC_CALL = "InvokeEndpointAsync"
"""The runtime call of a batch (asynchronous) endpoint: the request payload is an S3 object."""
ASYNC_KEYS = ("input_location", "output_location", "failure_location", "success_topic_arn", "error_topic_arn",
              "max_concurrent_invocations_per_instance")
OBSERVABILITY_KEYS = ("alarm_topic_arn", "dashboards", "alarms")


def endpoint_output(*, name: str, arn: str, region: str, invoke_role_arn: str, invoke_policy_arn: str,
                    instance_type: str, image: str, hosting: str = "realtime",
                    inference_component: str | None = None, async_io: dict[str, Any] | None = None,
                    provenance_bucket: str | None = None) -> dict[str, Any]:
    """``endpoints.<model>``: how a client calls the endpoint and with which role. With ``hosting``
    ``components`` a client also names ``inference_component`` (InvokeEndpoint's InferenceComponentName).
    ``async`` is null except for a batch endpoint, where it holds where requests go and answers land
    (:func:`async_output`), and the runtime call is InvokeEndpointAsync. ``provenance_bucket``: the
    model's bucket of provenance documents and measurement receipts (``bench qmax|ttotal
    --receipt-bucket``)."""
    if async_io is not None:
        return {
            "name": name, "arn": arn, "region": region, "variant": VARIANT, "runtime_call": ASYNC_CALL,
            "runtime_actions": [f"sagemaker:{ASYNC_CALL}"], "streaming": False, "invoke_role_arn": invoke_role_arn,
            "invoke_policy_arn": invoke_policy_arn, "instance_type": instance_type, "image": image, "hosting": "async",
            "inference_component": None, "async": async_io, "provenance_bucket": provenance_bucket,
        }
    return {
        "name": name,
        "arn": arn,
        "region": region,
        "variant": VARIANT,
        "runtime_call": STREAMING_CALL,
        "runtime_actions": [f"sagemaker:{BUFFERED_CALL}", f"sagemaker:{STREAMING_CALL}"],
        "streaming": True,
        "invoke_role_arn": invoke_role_arn,
        "invoke_policy_arn": invoke_policy_arn,
        "instance_type": instance_type,
        "image": image,
        "hosting": hosting,
        "inference_component": inference_component,
        "async": None,
        "provenance_bucket": provenance_bucket,
    }


def async_output(*, bucket: str, input_prefix: str, output_prefix: str, failure_prefix: str, success_topic_arn: str,
                 error_topic_arn: str, max_concurrent_invocations_per_instance: int | None) -> dict[str, Any]:
    """``endpoints.<model>.async``: S3 URIs for request payloads (InputLocation), responses and
    failures, the two SNS topics, and how many requests one instance is handed at once."""
    def uri(prefix: str) -> str:
        return f"s3://{bucket}/{prefix.strip('/')}/"
    return {
        "input_location": uri(input_prefix),
        "output_location": uri(output_prefix),
        "failure_location": uri(failure_prefix),
        "success_topic_arn": success_topic_arn,
        "error_topic_arn": error_topic_arn,
        "max_concurrent_invocations_per_instance": max_concurrent_invocations_per_instance,
    }


def budget_output(alloc: ModelAllocation | None) -> dict[str, Any] | None:
    """``scaling.<model>.budget``: the model's share of the stack's daily budget (null without one)."""
    if alloc is None:
        return None
    return {
        "priority": alloc.priority,
        "peak_instances": alloc.peak_instances,
        "max_instances": alloc.max_instances,
        "served_share": alloc.served_share,
        "daily_usd_at_max": alloc.daily_usd_at_max,
        "level": alloc.finding.level,
    }


@dataclass(frozen=True)
class ScalingOutput:
    """``scaling.<model>``, one shape for every hosting kind (:data:`SCALING_KEYS` are its fields,
    in order). The numbers (``target`` to ``q_max``, ``dimension``, ``instances``) are null while
    scaling is off; ``verdict``, ``origin``, ``queue_max_depth`` and ``plan_sha256`` are there
    whenever there is a plan."""

    enabled: bool
    reason_code: str
    verdict: str | None
    origin: str | None
    target: float | None
    scale_in_threshold: float | None
    min: int | None
    max: int | None
    cooldowns: dict[str, int | None]
    q_max: int | None
    queue_max_depth: int | None
    plan_sha256: str | None
    provenance_key: str | None
    dimension: str | None
    instances: dict[str, int] | None
    budget: dict[str, Any] | None
    scale_in_step: dict[str, int] | None = None
    """A real-time plan's scale-in step (PercentChangeInCapacity, MinAdjustmentMagnitude) while scaling is on."""
    schedule: dict[str, Any] | None = None
    """The daily scheduled floors deployed, while scaling is on."""
    promise: dict[str, Any] | None = None
    """What the tuned plan promises (simulated SLO share, rejected share, cost), whenever the plan has one."""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


SCALING_KEYS = tuple(f.name for f in fields(ScalingOutput))


def _scaling(gate: GateDecision, on: bool, *, verdict: str, origin: str, plan_sha256: str, queue_max_depth: int,
             dimension: str, target: float, scale_in_threshold: float | None, min_: int, max_: int,
             scale_out_s: int, scale_in_s: int, q_max: int, instances: dict[str, int] | None,
             provenance_key: str | None, budget: ModelAllocation | None, scale_in_step: dict[str, int] | None = None,
             schedule: dict[str, Any] | None = None, promise: dict[str, Any] | None = None) -> dict[str, Any]:
    """A plan's :class:`ScalingOutput`: its deployed numbers only when scaling is ``on``."""
    def live(value: Any) -> Any:
        return value if on else None

    return ScalingOutput(
        enabled=on, reason_code=gate.code, verdict=verdict, origin=origin, target=live(target),
        scale_in_threshold=live(scale_in_threshold), min=live(min_), max=live(max_),
        cooldowns={"scale_out_s": live(scale_out_s), "scale_in_s": live(scale_in_s)}, q_max=live(q_max),
        queue_max_depth=queue_max_depth, plan_sha256=plan_sha256, provenance_key=provenance_key,
        dimension=live(dimension), instances=live(instances), budget=budget_output(budget),
        scale_in_step=live(scale_in_step), schedule=live(schedule), promise=promise,
    ).as_dict()


def _unplanned(gate: GateDecision, provenance_key: str | None, budget: ModelAllocation | None) -> dict[str, Any]:
    """No plan (nothing measured yet): every number and plan reference null."""
    return ScalingOutput(
        enabled=False, reason_code=gate.code, verdict=None, origin=None, target=None, scale_in_threshold=None,
        min=None, max=None, cooldowns={"scale_out_s": None, "scale_in_s": None}, q_max=None, queue_max_depth=None,
        plan_sha256=None, provenance_key=provenance_key, dimension=None, instances=None, budget=budget_output(budget),
    ).as_dict()


def scaling_output(gate: GateDecision, plan: PlanArtifact | None, provenance_key: str | None,
                   copy_plan: CopyPlan | None = None, budget: ModelAllocation | None = None) -> dict[str, Any]:
    """``scaling.<model>``: what autoscaling is deployed (numbers null when the gate is off) and
    which plan it came from (``plan_sha256``, ``verdict``: present whenever there is a plan);
    ``budget``: its allocation under the stack's daily budget, when the stack has one.

    ``dimension`` says what ``min``/``max``/``target`` count: instances of the variant, or copies of
    the inference component (``hosting: components``, numbers from the copy plan; ``instances`` is
    then managed instance scaling's range)."""
    if copy_plan is not None:
        return copies_scaling_output(gate, copy_plan, provenance_key, budget)
    if plan is None:
        return _unplanned(gate, provenance_key, budget)
    return _scaling(
        gate, gate.enabled, verdict=plan.verdict, origin=plan.provenance.origin, plan_sha256=canonical_sha256(plan),
        queue_max_depth=plan.queue_max_depth, dimension=SCALABLE_DIMENSION, target=plan.thresholds.scaling_target_value,
        scale_in_threshold=plan.thresholds.scale_in_threshold, min_=plan.fleet.min_instances,
        max_=plan.fleet.max_instances, scale_out_s=plan.cooldowns.scale_out_s, scale_in_s=plan.cooldowns.scale_in_s,
        q_max=plan.q_max, instances=None, provenance_key=provenance_key, budget=budget,
        scale_in_step=({"percent": plan.scale_in.step_percent, "min_removed": plan.scale_in.min_removed}
                       if plan.scale_in is not None else None),
        schedule=plan.schedule.model_dump(mode="json") if plan.schedule is not None else None,
        promise=plan.promise.model_dump(mode="json") if plan.promise is not None else None,
    )


def copies_scaling_output(gate: GateDecision, cp: CopyPlan, provenance_key: str | None,
                          budget: ModelAllocation | None = None) -> dict[str, Any]:
    """``scaling.<model>`` of a component-hosted model: the same keys, per copy."""
    return _scaling(
        gate, gate.enabled, verdict=cp.verdict, origin=cp.provenance.origin, plan_sha256=canonical_sha256(cp),
        queue_max_depth=cp.queue_max_depth, dimension=COMPONENT_SCALABLE_DIMENSION, target=cp.scaling.target_value,
        scale_in_threshold=cp.scaling.scale_in_threshold, min_=cp.copies.min_copies, max_=cp.copies.max_copies,
        scale_out_s=cp.scaling.scale_out_cooldown_s, scale_in_s=cp.scaling.scale_in_cooldown_s, q_max=cp.q_max_per_copy,
        instances={"min": cp.instances.min_instances, "max": cp.instances.max_instances},
        provenance_key=provenance_key, budget=budget,
    )


def batch_scaling_output(gate: GateDecision, plan: BatchPlan | None, provenance_key: str | None,
                         budget: ModelAllocation | None = None) -> dict[str, Any]:
    """``scaling.<model>`` of a batch model, the same keys: ``target`` is the backlog per instance,
    ``scale_in_threshold`` null (target tracking scales in), ``min`` 0."""
    if plan is None:
        return _unplanned(gate, provenance_key, budget)
    return _scaling(
        gate, gate.enabled, verdict=plan.verdict, origin=plan.provenance.origin, plan_sha256=canonical_sha256(plan),
        queue_max_depth=plan.max_concurrent_invocations_per_instance, dimension=SCALABLE_DIMENSION,
        target=float(plan.backlog_target_per_instance), scale_in_threshold=None, min_=plan.min_instances,
        max_=plan.max_instances, scale_out_s=plan.cooldowns.scale_out_s, scale_in_s=plan.cooldowns.scale_in_s,
        q_max=plan.q_max, instances=None, provenance_key=provenance_key, budget=budget,
    )


def observability_output(*, topic_arn: str, dashboards: dict[str, dict[str, str]],
                         alarms: dict[str, dict[str, str]]) -> dict[str, Any]:
    """``observability``: the stack's alarm topic, per model its dashboard {name, url} and its
    alarms {key: name} (keys: :attr:`speech.infra.components.observability.OpsAlarm.key`)."""
    return {"alarm_topic_arn": topic_arn, "dashboards": dashboards, "alarms": alarms}


__all__ = ["ASYNC_KEYS", "async_output", "batch_scaling_output",
           "ENDPOINT_KEYS", "INVOKE_ACTIONS", "OBSERVABILITY_KEYS", "OUTPUTS_VERSION", "SCALING_KEYS",
           "ScalingOutput", "endpoint_output", "observability_output", "scaling_output"]
