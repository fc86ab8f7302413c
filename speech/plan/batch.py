"""The batch plan: a ``priority: batch`` model on SageMaker asynchronous inference (docs/design.md §3.10).

A batch route does not hold an SLO on the first audio byte: requests wait in the endpoint's
queue and the team chooses how long a request may take from submission to its response in S3
(``max_delay_s``). The endpoint scales on its backlog per instance down to zero instances and a
wake alarm brings the first instance back when a backlog appears. Every number comes from the
same measured artifacts as the real-time plan (:mod:`speech.plan.realtime`): the qmax ladder gives the
sustained throughput per instance and Q_max, the ttotal run the start-up time.

Pure arithmetic (no I/O, no clock, no boto3), one function (:func:`build_batch_plan`) shared by
``bench plan``, the Pulumi program and the policy pack. Units live in the names: seconds
(``_s``), requests per second (``_rps``), requests (backlog), instances.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from speech.errors import PlanInputError
from speech.plan.findings import finding_bracketed, require_one_model, verdict, weakest_origin
from speech.plan.formulas import derated_q_max, instances_for, scale_in_cooldown_s
from speech.plan.measured_findings import finding_fingerprint, finding_instances, finding_provenance
from speech.plan.survival import throughput_at
from speech.schema.artifacts import Fingerprint, Frozen, Level, Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.schema.plan_artifacts import Cooldowns, Finding
from speech.schema.units import EPS

BATCH_SCHEMA_VERSION: Final = 1

ASYNC_METRIC_PERIOD_S = 60
"""SageMaker publishes the asynchronous endpoint metrics (ApproximateBacklogSizePerInstance,
HasBacklogWithoutCapacity) once a minute."""
WAKE_DATAPOINTS = 2
"""Minutes with a backlog and no instance before the wake alarm fires (the AWS pattern for
scaling an asynchronous endpoint up from zero: 2 of 2 one-minute periods)."""
WAKE_THRESHOLD = 1.0
"""HasBacklogWithoutCapacity is 1 while requests wait with no instance, else 0."""
WAKE_INSTANCES = 1
"""Instances the wake step adds from zero; target tracking on the backlog takes over from one."""
MAX_CONCURRENT_INVOCATIONS = 1000
"""SageMaker's limit on MaxConcurrentInvocationsPerInstance (botocore: 1..1000)."""


# --- the rules ---------------------------------------------------------------------------------


def batch_throughput_rps(qmax: QmaxArtifact, q_max: int) -> float:
    """Sustained throughput of one instance, requests/s: the ladder's throughput at Q_max.

    An asynchronous endpoint sends an instance at most ``max_concurrent_invocations_per_instance``
    (= Q_max) requests at once and keeps it that busy while a backlog waits, so the instance
    completes X(Q_max) requests per second, the closed-loop ladder's rate at Q_max in flight
    (linear between levels, :func:`speech.plan.survival.throughput_at`).
    """
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    return throughput_at(levels, q_max)


def max_concurrent_invocations(q_max: int) -> int:
    """Requests SageMaker hands one instance at once: the measured Q_max (1..1000, SageMaker's range).

    More in flight than Q_max and the instance serves each slower than it was measured to; the
    rest wait in the endpoint's queue, which is what a batch route is for."""
    return max(1, min(MAX_CONCURRENT_INVOCATIONS, q_max))


class ColdStart(Frozen):
    """Seconds from the first request at zero instances to an instance serving it."""

    wake_reaction_s: float
    """The wake alarm's window: metric period x datapoints (nobody measures it; its upper bound)."""
    measured_total_s: float
    """Measured scale-out time (the ttotal artifact): instance, image, weights, warm-up, in service."""
    total_s: float
    """wake_reaction_s + measured_total_s."""


def cold_start(measured_total_s: float) -> ColdStart:
    """Cold start from zero, seconds: the wake alarm's window (ASYNC_METRIC_PERIOD_S x
    WAKE_DATAPOINTS = 120 s) + the measured T_total."""
    wake = float(ASYNC_METRIC_PERIOD_S * WAKE_DATAPOINTS)
    return ColdStart(
        wake_reaction_s=wake,
        measured_total_s=round(measured_total_s, 3),
        total_s=round(wake + measured_total_s, 3),
    )


def drain_budget_s(max_delay_s: float, cold_start_s: float) -> float:
    """Seconds an instance has to drain its backlog: max_delay_s - cold start from zero (<= 0: infeasible)."""
    return max_delay_s - cold_start_s


def backlog_target_per_instance(throughput_rps: float, budget_s: float) -> int:
    """ApproximateBacklogSizePerInstance target, requests per instance: floor(X(Q_max) x drain budget).

    A request that joins a backlog of B per instance completes after the instances have drained
    the B ahead of it at X(Q_max) each: B / X(Q_max) seconds. Tracking B = floor(X x (max_delay_s -
    cold start)) keeps that wait within the delay even for the first request at zero instances,
    which first waits the cold start. 0 means no backlog can be held within the delay.
    """
    if throughput_rps <= 0 or budget_s <= 0:
        return 0
    return int(math.floor(throughput_rps * budget_s + EPS))


def worst_delay_s(backlog_per_instance: float, throughput_rps: float, cold_start_s: float) -> float:
    """Delay of the last request of a backlog held at the target, seconds: cold start + B / X."""
    return cold_start_s + (backlog_per_instance / throughput_rps if throughput_rps > 0 else math.inf)


def batch_scale_out_cooldown_s(measured_total_s: float) -> int:
    """max(one metric period 60 s, ceil(measured T_total)) whole seconds.

    Instances added for a backlog drain it only once they serve, T_total later; until then the
    backlog per instance stays high, and a shorter cooldown would add again for the same backlog.
    Never shorter than one period of the 1-minute metric, which could not show a step yet."""
    return max(ASYNC_METRIC_PERIOD_S, math.ceil(measured_total_s - EPS))


# --- findings ----------------------------------------------------------------------------------


def finding_throughput(q_max: int, throughput_rps: float) -> Finding:
    if q_max < 1 or throughput_rps <= 0:
        return Finding(
            name="batch_throughput",
            level="stop",
            message=f"no sustained throughput to plan with (Q_max {q_max}, X(Q_max) {throughput_rps:g} rps): "
            "re-run bench qmax from concurrency 1 on this instance type",
        )
    return Finding(
        name="batch_throughput",
        level="ok",
        message=f"one instance completes {throughput_rps:.2f} rps at Q_max {q_max} in flight "
        f"(MaxConcurrentInvocationsPerInstance {max_concurrent_invocations(q_max)})",
    )


def finding_delay(max_delay_s: float, cold: ColdStart, throughput_rps: float, backlog: int) -> Finding:
    """stop when the delay cannot hold even one request's wait after a cold start from zero."""
    budget = drain_budget_s(max_delay_s, cold.total_s)
    cold_txt = (f"cold start from zero {cold.total_s:.1f} s (wake alarm {cold.wake_reaction_s:.0f} s + measured "
                f"T_total {cold.measured_total_s:.1f} s)")
    if budget <= 0:
        return Finding(
            name="batch_delay",
            level="stop",
            message=f"max_delay_s {max_delay_s:g} is not longer than the {cold_txt}: a request that finds no instance "
            f"waits longer than that for its first audio; raise max_delay_s above {math.ceil(cold.total_s)} s "
            "(--max-delay-s), or serve the route real-time",
        )
    if backlog < 1:
        return Finding(
            name="batch_delay",
            level="stop",
            message=f"max_delay_s {max_delay_s:g} leaves {budget:.1f} s after the {cold_txt}, in which one instance "
            f"drains less than one request at {throughput_rps:.3f} rps; raise max_delay_s to at least "
            f"{math.ceil(cold.total_s + 1 / throughput_rps) if throughput_rps > 0 else 'a measured'} s",
        )
    return Finding(
        name="batch_delay",
        level="ok",
        message=f"backlog target {backlog} requests per instance = floor({throughput_rps:.2f} rps x (max_delay_s "
        f"{max_delay_s:g} - {cold_txt})); worst delay at the target "
        f"{worst_delay_s(backlog, throughput_rps, cold.total_s):.1f} s",
    )


def delay_at_cap(plan: BatchPlan, max_instances: int) -> Finding:
    """Whether ``max_instances`` (a budget's or a config cap) holds the plan's delay at peak.

    ok: the cap covers the peak (cap >= peak_instances): the backlog stays at its target.
    warn: the cap serves less than the peak but more than the trough: while the peak lasts the
    backlog grows by peak - cap x X requests per second and the delay is not held; it drains
    after the peak at cap x X - trough. stop: the cap does not even carry the trough (or is 0):
    the backlog never drains.
    """
    x, peak, trough = plan.throughput_per_instance_rps, plan.inputs.peak_rps, plan.inputs.trough_rps
    served = max_instances * x
    if max_instances >= plan.peak_instances:
        return Finding(
            name="batch_fleet_capacity",
            level="ok",
            message=f"peak {peak:g} rps / {x:.2f} rps per instance -> {plan.peak_instances} instances; "
            f"{max_instances} allowed, the delay {plan.inputs.max_delay_s:g} s holds at peak",
        )
    if served <= trough:
        return Finding(
            name="batch_fleet_capacity",
            level="stop",
            message=f"at most {max_instances} instances drain {served:.2f} rps, not more than the trough {trough:g} "
            f"rps: the backlog never drains; allow at least {instances_for(trough, x) if x > 0 else 'one'} instances "
            f"(peak needs {plan.peak_instances})",
        )
    grow = peak - served
    return Finding(
        name="batch_fleet_capacity",
        level="warn",
        message=f"peak {peak:g} rps needs {plan.peak_instances} instances but at most {max_instances} are allowed "
        f"({served:.2f} rps): while the peak lasts the backlog grows by {grow:.2f} requests/s ({grow * 3600:.0f} per "
        f"hour) and max_delay_s {plan.inputs.max_delay_s:g} s does not hold; it drains after the peak at "
        f"{served - trough:.2f} rps. Raise the cap (or the budget) to {plan.peak_instances} to hold the delay",
    )


def delay_holds(plan: BatchPlan, max_instances: int) -> bool:
    """True when ``max_instances`` keeps the plan's delay at peak (:func:`delay_at_cap` is ok)."""
    return delay_at_cap(plan, max_instances).level == "ok"


# --- the artifact ------------------------------------------------------------------------------


class BatchInputsRecord(Frozen):
    """What the batch plan was computed from: the chosen inputs and the artifacts' identities."""

    max_delay_s: float
    peak_rps: float
    trough_rps: float
    qmax_derate: float
    max_instances_cap: int | None
    qmax_sha256: str
    ttotal_sha256: str
    qmax_slug: str
    ttotal_slug: str
    allow_config_mismatch: bool


class WakeSpec(Frozen):
    """The alarm and step that scale from zero: HasBacklogWithoutCapacity >= 1 for the window."""

    period_s: int
    datapoints_to_alarm: int
    threshold: float
    instances_added: int
    cooldown_s: int


class BatchPlan(Frozen):
    """The batch plan artifact (``bench plan`` writes it for a batch model; the program deploys it)."""

    schema_version: Literal[1] = BATCH_SCHEMA_VERSION
    kind: Literal["batch-plan"] = "batch-plan"
    """Artifact kinds are spelled with hyphens (``copy-plan``, ``batch-plan``); the old ``batch_plan`` still loads."""
    model: str
    fingerprint: Fingerprint
    inputs: BatchInputsRecord
    q_max: int
    """Q_max planned with (measured x qmax_derate), requests in flight per instance."""
    max_concurrent_invocations_per_instance: Annotated[int, Field(ge=1, le=MAX_CONCURRENT_INVOCATIONS)]
    """The endpoint's client_config: Q_max."""
    throughput_per_instance_rps: float
    """X(Q_max), requests/s one instance completes with a backlog waiting."""
    cold_start: ColdStart
    drain_budget_s: float
    """max_delay_s - cold start from zero, seconds."""
    backlog_target_per_instance: int
    """ApproximateBacklogSizePerInstance target value, requests per instance."""
    peak_instances: int
    """ceil(peak_rps / X(Q_max)): instances that hold the delay at peak (a budget's ModelNeed)."""
    min_instances: Literal[0] = 0
    """Asynchronous endpoints scale to zero when idle."""
    max_instances: int
    """peak_instances, or the configured cap when lower (at least 1)."""
    cooldowns: Cooldowns
    wake: WakeSpec
    findings: list[Finding]
    verdict: Level
    provenance: Provenance

    def finding(self, name: str) -> Finding:
        return next(f for f in self.findings if f.name == name)

    @model_validator(mode="before")
    @classmethod
    def _old_kind_spelling(cls, data: Any) -> Any:
        """Batch plans written before the kinds were spelled one way say ``batch_plan``."""
        if isinstance(data, dict) and data.get("kind") == OLD_BATCH_PLAN_KIND:
            return {**data, "kind": "batch-plan"}
        return data


OLD_BATCH_PLAN_KIND = "batch_plan"


def build_batch_plan(
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    inputs: PlanInputs,
    *,
    allow_config_mismatch: bool = False,
    max_instances_cap: int | None = None,
) -> BatchPlan:
    """Turn measurements and the acceptable delay into the async endpoint's scaling numbers.

    Raises :class:`PlanInputError` when there is no ``max_delay_s`` or the artifacts are of two
    models (or two fingerprints without ``allow_config_mismatch``). An infeasible delay gives a
    plan whose verdict is ``stop``.
    """
    if inputs.max_delay_s is None:
        raise PlanInputError("a batch plan needs max_delay_s, the acceptable completion delay in seconds "
                             "(plan.max_delay_s in stack config, --max-delay-s for bench plan)")
    require_one_model(qmax, ttotal, "ttotal")
    if max_instances_cap is not None and max_instances_cap < 1:
        raise PlanInputError(f"max_instances {max_instances_cap} must be at least 1 (the endpoint scales from 0 to it)")
    fp_finding = finding_fingerprint(qmax, ttotal, allow_config_mismatch)
    q = derated_q_max(qmax.q_max, inputs.qmax_derate)
    x = batch_throughput_rps(qmax, q)
    cold = cold_start(ttotal.measured_total_s)
    budget = drain_budget_s(inputs.max_delay_s, cold.total_s)
    backlog = backlog_target_per_instance(x, budget)
    peak_n = instances_for(inputs.peak_rps, x) if x > 0 else 1
    max_n = peak_n if max_instances_cap is None else max(1, min(peak_n, max_instances_cap))
    out_cd = batch_scale_out_cooldown_s(ttotal.measured_total_s)

    findings = [finding_throughput(q, x), finding_delay(inputs.max_delay_s, cold, x, backlog)]
    plan = BatchPlan(
        model=qmax.model,
        fingerprint=qmax.fingerprint,
        inputs=BatchInputsRecord(
            max_delay_s=inputs.max_delay_s,
            peak_rps=inputs.peak_rps,
            trough_rps=inputs.trough_rps,
            qmax_derate=inputs.qmax_derate,
            max_instances_cap=max_instances_cap,
            qmax_sha256=canonical_sha256(qmax),
            ttotal_sha256=canonical_sha256(ttotal),
            qmax_slug=qmax.fingerprint.slug,
            ttotal_slug=ttotal.fingerprint.slug,
            allow_config_mismatch=allow_config_mismatch,
        ),
        q_max=q,
        max_concurrent_invocations_per_instance=max_concurrent_invocations(q),
        throughput_per_instance_rps=round(x, 6),
        cold_start=cold,
        drain_budget_s=round(budget, 3),
        backlog_target_per_instance=backlog,
        peak_instances=peak_n,
        max_instances=max_n,
        cooldowns=Cooldowns(scale_out_s=out_cd, scale_in_s=scale_in_cooldown_s(cold.total_s)),
        wake=WakeSpec(period_s=ASYNC_METRIC_PERIOD_S, datapoints_to_alarm=WAKE_DATAPOINTS, threshold=WAKE_THRESHOLD,
                      instances_added=WAKE_INSTANCES, cooldown_s=out_cd),
        findings=[],
        verdict="ok",
        provenance=Provenance(
            origin=weakest_origin(qmax.provenance.origin, ttotal.provenance.origin),
            source="bench plan",
            tool="speech.plan.batch.build_batch_plan",
        ),
    )
    if x > 0:
        findings.append(delay_at_cap(plan, max_n))
    findings += [finding_bracketed(qmax), fp_finding, finding_provenance(qmax, ttotal), finding_instances(qmax)]
    return plan.model_copy(update={"findings": findings, "verdict": verdict(findings)})


__all__ = [
    "ASYNC_METRIC_PERIOD_S",
    "BatchPlan",
    "ColdStart",
    "WAKE_DATAPOINTS",
    "backlog_target_per_instance",
    "batch_throughput_rps",
    "build_batch_plan",
    "cold_start",
    "delay_at_cap",
    "delay_holds",
    "drain_budget_s",
    "max_concurrent_invocations",
    "worst_delay_s",
]


def batch_plan_filename(p: BatchPlan) -> str:
    return f"batch-plan-{p.model}.json"
