"""The simulation artifact: the trace, each policy's summary, its scaling actions and the activities
AWS would have refused, as ``bench simulate`` writes it (docs/design.md §10)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_serializer, field_validator

from speech.schema.artifacts import SCHEMA_VERSION, Frozen, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.promise import Promise
from speech.sim.fleet import Summary
from speech.sim.instance import InstanceModel

# --- artifact ----------------------------------------------------------------------------------


class TraceRecord(Frozen):
    spec: str
    name: str
    seed: int | None = None
    duration_s: int
    requests: float
    peak_rps: float
    """Busiest minute's mean arrival rate."""
    source_sha256: str | None = None
    attribution: str | None = None
    scaling: str | None = None
    """How a file trace was rate-scaled: superpose (independent shifted copies) or multiply."""
    scaling_detail: str | None = None


class ScalingAction(Frozen):
    """One capacity change a policy made (``after`` > ``before``: scale-out)."""

    t_s: int
    before: int
    after: int
    reason: str


class RefusedActivity(Frozen):
    """Capacity changes asked for while the endpoint was Updating, which SageMaker refuses and
    Application Auto Scaling records as not scaled (TargetServicePutResourceAsUnscalable);
    consecutive retries of the same change are one entry, from ``t_s`` to ``last_s``."""

    t_s: int
    last_s: int
    attempts: int
    before: int
    wanted: int
    reason: str


def refused_activities(refused: Sequence) -> list[RefusedActivity]:
    """Coalesce a run's refused changes: a retry of the same change (same before, reason) extends
    the previous entry."""
    out: list[dict] = []
    for a in refused:
        last = out[-1] if out else None
        if last is not None and last["before"] == a.before and last["reason"] == a.reason:
            last.update(last_s=a.t_s, attempts=last["attempts"] + 1, wanted=max(last["wanted"], a.after))
        else:
            out.append(dict(t_s=a.t_s, last_s=a.t_s, attempts=1, before=a.before, wanted=a.after, reason=a.reason))
    return [RefusedActivity(**d) for d in out]


class PolicyResult(Frozen):
    policy: str
    within_slo_share: float
    rejected_share: float
    ttfab_p95_ms: float | None
    ttfab_p99_ms: float | None
    violation_minutes: int
    instance_hours: float
    cost_usd: float | None
    cost_vs_floor: float | None
    scale_out_actions: int
    scale_in_actions: int
    flaps: int
    peak_instances: int
    refused_changes: int = 0
    actions: list[ScalingAction] = Field(default_factory=list)
    refused: list[RefusedActivity] = Field(default_factory=list)


SEED_ROW = "seed plan"
TUNED_ROW = "tuned plan"
"""The rows of the two plans when ``bench simulate --tuned-plan`` runs a tuned plan beside the
seed (without one the seed's row is the policy ``plan``)."""


class SimulationArtifact(Frozen):
    """Result of ``bench simulate``: every policy on one trace, with what went in."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["simulation"] = "simulation"
    model: str
    slo_ms: float
    qmax_sha256: str
    ttotal_sha256: str
    plan_sha256: str
    tuned_plan_sha256: str | None = Field(None, exclude_if=lambda v: v is None)
    """The tuned plan simulated beside the seed (``--tuned-plan``): its row is ``tuned plan`` and
    the seed's ``seed plan``; None (left out of the JSON): one plan, its row ``plan``."""
    trace: TraceRecord
    price_per_hour_usd: float | None = None
    startup_s: float
    """Start-up of a new instance used (the ttotal artifact's in_service phase)."""
    planning_total_s: float
    results: list[PolicyResult] = Field(min_length=1)
    created_at: datetime | None = None
    tool: str = "speech.sim.fleet.simulate"

    def result(self, policy: str) -> PolicyResult | None:
        """The row of one policy, None when it did not run."""
        return next((r for r in self.results if r.policy == policy), None)

    def seed_result(self) -> PolicyResult | None:
        """The row of the plan the table is about: ``seed plan`` beside a tuned plan, else ``plan``."""
        return self.result(SEED_ROW if self.tuned_plan_sha256 is not None else "plan")


def cost_gaps(a: SimulationArtifact) -> list[str]:
    """Two lines on what is left to win: the plan (the tuned one beside a seed) -> perfect-forecast
    (what a forecast could still save) and perfect-forecast -> floor (what SageMaker's mechanics
    cost); each only when both rows ran. Shares beside the hours: a cheaper row keeping less is not
    a saving."""
    plan = a.result(TUNED_ROW) or a.seed_result()
    pf, fl = a.result("perfect-forecast"), a.result("floor")
    out = []

    def step(x: PolicyResult, y: PolicyResult, what: str) -> str:
        d = 1.0 - y.instance_hours / x.instance_hours if x.instance_hours > 0 else 0.0
        saved = f"{100 * d:.1f}% fewer" if d >= 0 else f"{-100 * d:.1f}% more"
        return (f"{x.policy} -> {y.policy}: {x.instance_hours:,.1f} -> {y.instance_hours:,.1f} inst-h ({saved}; in SLO "
                f"{100 * x.within_slo_share:.2f}% -> {100 * y.within_slo_share:.2f}%): {what}")

    if plan is not None and pf is not None:
        out.append(step(plan, pf, "what a perfect forecast could still win under the same mechanics"))
    if pf is not None and fl is not None:
        out.append(step(pf, fl, "what the platform's mechanics cost (start-up, one update at a time, the plan's floor and cap)"))
    return out


def _finite(x: float) -> float | None:
    return round(x, 3) if x == x and math.isfinite(x) else None


def simulation_artifact(*, plan: PlanArtifact, qmax: QmaxArtifact, ttotal: TtotalArtifact, trace, model: InstanceModel,
                        summaries: Sequence[Summary], price_per_hour: float | None,
                        created_at: datetime | None = None, runs: Sequence | None = None,
                        tuned_plan: PlanArtifact | None = None, floor_hours: float | None = None) -> SimulationArtifact:
    """The artifact from a run; costs relative to the floor (its row when it ran, else
    ``floor_hours``); each policy's scaling actions and refused activities when ``runs``
    (``speech.sim.fleet.Run``, in the order of ``summaries``) are given; ``tuned_plan``: the plan
    whose row is ``tuned plan``."""
    floor_row = next((s for s in summaries if s.policy == "floor"), None)
    floor = floor_row.instance_hours if floor_row is not None else floor_hours
    by_run = {r.policy: r for r in runs or ()}
    results = [
        PolicyResult(
            policy=s.policy,
            within_slo_share=round(s.within_slo_share, 6),
            rejected_share=round(s.rejected_share, 6),
            ttfab_p95_ms=_finite(s.ttfab_p95_ms),
            ttfab_p99_ms=_finite(s.ttfab_p99_ms),
            violation_minutes=s.violation_minutes,
            instance_hours=round(s.instance_hours, 3),
            cost_usd=round(s.instance_hours * price_per_hour, 2) if price_per_hour is not None else None,
            cost_vs_floor=round(s.instance_hours / floor, 4) if floor else None,
            scale_out_actions=s.scale_out_actions,
            scale_in_actions=s.scale_in_actions,
            flaps=s.flaps,
            peak_instances=s.peak_instances,
            refused_changes=s.refused_changes,
            actions=[ScalingAction(t_s=a.t_s, before=a.before, after=a.after, reason=a.reason)
                     for a in getattr(by_run.get(s.policy), "actions", ())],
            refused=refused_activities(getattr(by_run.get(s.policy), "refused", ())),
        )
        for s in summaries
    ]
    return SimulationArtifact(
        model=plan.model,
        slo_ms=plan.inputs.slo_ms,
        qmax_sha256=canonical_sha256(qmax),
        ttotal_sha256=canonical_sha256(ttotal),
        plan_sha256=canonical_sha256(plan),
        tuned_plan_sha256=canonical_sha256(tuned_plan) if tuned_plan is not None else None,
        trace=TraceRecord(
            spec=trace.spec, name=trace.name, seed=trace.seed, duration_s=trace.duration_s,
            requests=round(trace.total_requests, 3), peak_rps=round(trace.peak_rps, 3),
            source_sha256=trace.source_sha256, attribution=trace.attribution,
            scaling=getattr(trace, "scaling", None), scaling_detail=getattr(trace, "scaling_detail", None),
        ),
        price_per_hour_usd=price_per_hour,
        startup_s=model.startup_s,
        planning_total_s=plan.t_total.planning_s,
        results=results,
        created_at=created_at,
    )




# --- bench tune --------------------------------------------------------------------------------


def _tune_key(name: str) -> str:
    """The JSON key of a :class:`TunePromise` field: tune artifacts have always called the mean share
    ``within_slo_share`` (as the simulation's rows do); every other key is the field's name."""
    return "within_slo_share" if name == "slo_share" else name


class TunePromise(Promise):
    """The plan's :class:`~speech.schema.promise.Promise` as ``bench tune`` records it in its artifact
    (the same numbers, ``slo_share`` the mean over the draws), with the search's own: the target, the
    worst draw, the trace spec, the bound's sd and t, the number of draws.

    Its JSON keeps the keys and values tune artifacts were written with (``within_slo_share`` for
    ``slo_share``; ``trace_sha256`` with its ``sha256:`` prefix), so artifacts already written load
    and ``bench tune --json`` reads as before; the field order now starts with the plan's fields."""

    model_config = ConfigDict(alias_generator=_tune_key, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)

    slo_share_target: float
    within_slo_share_worst_day: float
    """The lowest draw's share within the SLO (``slo_share_low`` where the promise has the interval)."""
    trace: str
    """The trace spec the draws were made from (``bench tune --trace``)."""
    slo_share_bound_sd: float | None = None
    """Sample standard deviation of the draws' shares the bound used (0 with one draw)."""
    slo_share_bound_t: float | None = None
    """The Student-t quantile the bound used (None with one draw)."""
    draws: int | None = None
    """Independent draws of the traffic every candidate was judged on (``bench tune --draws``)."""

    @field_validator("trace_sha256", mode="before")
    @classmethod
    def _bare_digest(cls, v: object) -> object:
        return v.removeprefix("sha256:") if isinstance(v, str) else v

    @field_serializer("trace_sha256")
    def _prefixed_digest(self, v: str) -> str:
        return "sha256:" + v

    def plan_promise(self) -> Promise:
        """The promise the tuned plan records: this one's plan fields, nothing of the search."""
        return Promise(**{name: getattr(self, name) for name in Promise.model_fields})


class TunedValue(Frozen):
    knob: str
    seed: str
    tuned: str
    deployable_now: bool
    """The written plan carries the tuned value (a plan input on this branch)."""
    reason: str


class TuneCheck(Frozen):
    """The seed plan and the tuned one on one day the search did not see."""

    day: str
    seed_within_slo_share: float
    seed_instance_hours: float
    tuned_within_slo_share: float
    tuned_instance_hours: float
    tuned_keeps_share: bool
    without_floors_within_slo_share: float | None = None
    """The tuned plan with its scheduled floors taken out, on the same day (None: it has none)."""
    without_floors_instance_hours: float | None = None


class CrowdCheckRecord(Frozen):
    """What ``bench tune``'s promise check on moved crowds found (speech.sim.crowd_check): the
    training draws' crowds, the copies judged with them moved, the search's winner's bound there,
    each raise tried, and the plan kept (the promise's draws then count the copies)."""

    crowds: int
    moved_draws: int
    winner_bound: float
    """The search's winner's share bound on the training and moved draws."""
    tried: list[str] = []
    """Each raise judged: its label and its bound, or that it fell below the target on a draw."""
    chosen: str
    """"the search's winner" or the raise kept."""
    kept: bool
    """The plan kept has a share bound at or above the target on all those draws."""


class TuneArtifact(Frozen):
    """Result of ``bench tune``: the tuned knobs next to the seed formulas, the promise, the checks."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["tune"] = "tune"
    model: str
    qmax_sha256: str
    ttotal_sha256: str
    seed_plan_sha256: str
    tuned_plan_sha256: str
    """The plan written next to this artifact (its deployable knobs tuned)."""
    promise: TunePromise
    seed: TunePromise
    """The seed plan's numbers on the same training days."""
    values: list[TunedValue]
    checks: list[TuneCheck]
    held: bool
    """The tuned plan kept the SLO share on every held-out and perturbed day."""
    evaluations: int
    created_at: datetime | None = None
    tool: str = "speech.sim.tune"
    crowd_check: CrowdCheckRecord | None = Field(None, exclude_if=lambda v: v is None)
    """The promise judged on the training draws with their crowds moved (None: no forecast history
    or no crowds; then the promise's draws are the training draws)."""
