"""Plan and calibration artifacts: what `bench plan` and `bench observe` write (pure pydantic models)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    model_serializer,
)

from speech.schema.artifacts import SCHEMA_VERSION, Fingerprint, Frozen, Level, Provenance, canonical_sha256  # noqa: F401
from speech.schema.config import FloorSchedule, Promise
from speech.schema.plan_inputs import PlanInputs


class Finding(Frozen):
    name: str
    level: Level
    message: str


class Thresholds(Frozen):
    c_scale_max: float
    """Scale-out target, client units: (1 - h) * Q_max."""
    c_scale_min: float
    """Scale-in threshold, client units: (1 - 2h) * Q_max."""
    w_max_s: float
    """Queueing budget: SLO - uncontended p95 service time, seconds."""
    scaling_target_value: float
    """C_scale_max in CloudWatch units (x cloudwatch_ratio): the target-tracking value."""
    scale_in_threshold: float
    """C_scale_min in CloudWatch units: the scale-in alarm threshold."""


class Fleet(Frozen):
    min_instances: int
    max_instances: int
    min_safe_instances: int
    """Smallest fleet whose scale-in by one cannot push the rest past C_scale_max."""


class Cooldowns(Frozen):
    scale_out_s: int
    scale_in_s: int


class TTotalSummary(Frozen):
    measured_s: float
    reaction_bound_s: float
    planning_s: float


class Alarms(Frozen):
    ttfab_p95_alarm_ms: float
    """FirstChunkLatencyP95 alarm: the measured uncontended p95 TTFAB."""
    saturation_concurrency: float
    """Saturation alarm on ConcurrentRequestsPerModel (CloudWatch units): Q_max x ratio."""
    metric_period_s: int
    datapoints_to_alarm: int
    scale_in_evaluation_periods: int
    """Periods the metric must stay at or below the scale-in threshold before one instance goes."""


class Capacity(Frozen):
    throughput_at_target_rps: float
    """Measured per-instance throughput at C_scale_max (interpolated on the ladder)."""
    throughput_at_scale_in_rps: float
    littles_law_instances: int
    """What lambda * S / C_scale_max would give: wrong for a server that queues."""
    littles_law_capacity_rps: float
    """What that many instances really serve at the measured throughput."""
    per_instance_rps: float | None = None
    """Arrival rate per instance the fleet is sized at: min(the SLO-share rate, X(C_scale_max)),
    requests/s (None in plans written before it existed: X(C_scale_max))."""
    slo_rate_rps: float | None = None
    """Highest Poisson arrival rate per instance whose gated chain keeps the SLO share, requests/s."""
    slo_share_at_peak: float | None = None
    """Share answered within the SLO with peak traffic spread over max_instances (chain, refused = missed)."""
    refused_share_at_peak: float | None = None
    """Share refused at the gate (Q_max) with peak traffic over max_instances."""
    slo_share_at_trough: float | None = None
    """Same with trough traffic over the floor."""
    refused_share_at_trough: float | None = None


class Surge(Frozen):
    utilization: float
    """Arrival rate / saturated throughput when the mean occupancy is C_scale_max."""
    arrival_rps: float
    reach_qmax_probability: float
    """P(an instance at C_scale_max reaches Q_max within the planning T_total), traffic ramping by
    the surge ratio over that time."""
    survival: float
    """1 - reach_qmax_probability."""
    reach_qmax_probability_steady: float
    """Same, with traffic held steady."""


class ScaleIn(Frozen):
    """The scale-in step: a share of the fleet per step, bounded by the floor's safety argument."""

    step_share: float
    """Share of the fleet one step removes."""
    max_safe_share: float
    """1 - C_scale_min / C_scale_max: removing more lifts the survivors past C_scale_max."""
    step_percent: int
    """PercentChangeInCapacity of the step (negative): -floor(100 x step_share)."""
    min_removed: int
    """MinAdjustmentMagnitude: at least this many instances per step."""
    window_s: int
    """Seconds every metric period must sit at or below C_scale_min (evaluation periods x period)."""


class TunedValue(Frozen):
    """A plan input set away from its seed formula, printed next to the seed with the reason."""

    name: str
    seed: float
    value: float
    unit: str
    reason: str


class PlanInputsRecord(Frozen):
    slo_ms: float
    surge_ratio: float
    peak_rps: float
    trough_rps: float
    min_instances: int
    metric_period_s: int
    datapoints_to_alarm: int
    qmax_sha256: str
    ttotal_sha256: str
    qmax_slug: str
    ttotal_slug: str
    allow_config_mismatch: bool
    qmax_derate: float = 1.0
    """Q_max planned = floor(measured Q_max x qmax_derate); 1.0 in plans written before it existed."""
    slo_share: float = 0.995
    """The SLO share the fleet was sized for (PlanInputs.slo_share)."""
    target_share: float | None = None
    scale_in_step_share: float | None = None
    scale_in_window_s: int | None = None
    scale_in_cooldown_s: int | None = None
    scale_out_cooldown_s: int | None = None
    surge_average_share: float | None = None
    """The tuned inputs as given (None: seed formula)."""

    @classmethod
    def of(cls, inputs: PlanInputs, *, qmax_sha256: str, ttotal_sha256: str, qmax_slug: str, ttotal_slug: str,
           allow_config_mismatch: bool) -> PlanInputsRecord:
        """The record of the inputs a plan was built from: every field it shares with
        :class:`~speech.schema.plan_inputs.PlanInputs` copied by name (a field added to both is
        recorded without a line here), the reaction policy's two flattened, and what the inputs do
        not hold (the artifacts' hashes and slugs, the mismatch switch)."""
        shared = {name: getattr(inputs, name) for name in cls.model_fields if name in type(inputs).model_fields}
        return cls(**shared, metric_period_s=inputs.reaction.metric_period_s,
                   datapoints_to_alarm=inputs.reaction.datapoints_to_alarm, qmax_sha256=qmax_sha256,
                   ttotal_sha256=ttotal_sha256, qmax_slug=qmax_slug, ttotal_slug=ttotal_slug,
                   allow_config_mismatch=allow_config_mismatch)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("target_share", "scale_in_step_share", "scale_in_window_s", "scale_in_cooldown_s",
                        "scale_out_cooldown_s", "surge_average_share"):
                if data.get(key, 0) is None:
                    del data[key]
        return data


class ModelAllocation(Frozen):
    """One model's share of the stack's daily budget (speech.plan.budget.allocate): the ``budget``
    section of its plan artifact and of the stack's budget artifact."""

    name: str
    priority: Literal["critical", "standard", "batch"]
    instance_type: str
    price_usd_per_hour: float
    floor_instances: int
    """The least max capacity it can be deployed with (the plan's min_instances; 1 for batch)."""
    peak_instances: int
    """Instances its plan needs at peak (the plan's max_instances before the budget)."""
    max_instances: int
    """What the budget allows: the fleet's max capacity."""
    daily_usd_at_max: float
    """max_instances x price x 24, USD per day."""
    daily_usd_at_peak: float
    """peak_instances x price x 24, USD per day."""
    served_share: float
    """max_instances / peak_instances: the share of the peak need the allocation can serve (1 when
    nothing is needed)."""
    finding: Finding
    """``budget``: ok, warn (capped below its peak), stop (the critical models' peak is not covered)."""


class BudgetAllocation(Frozen):
    """Every model's allocation under the stack's daily budget (``budget-<stack>.json``)."""

    schema_version: Literal[1] = 1
    kind: Literal["budget"] = "budget"
    daily_budget_usd: float
    prices_usd_per_hour: dict[str, float]
    """The price table the allocation was counted in (defaults plus the stack's own)."""
    required_daily_usd: float
    """Critical models at their peak plus every other model at its floor, USD per day."""
    total_daily_usd: float
    """sum(max_instances x price x 24) over the models, USD per day."""
    models: list[ModelAllocation]
    findings: list[Finding]
    verdict: Level

    def of(self, name: str) -> ModelAllocation:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)


class PlanArtifact(Frozen):
    """Result of ``bench plan``: every scaling number, each traceable to a measurement."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["plan"] = "plan"
    model: str
    fingerprint: Fingerprint
    inputs: PlanInputsRecord
    q_max: int
    thresholds: Thresholds
    fleet: Fleet
    cooldowns: Cooldowns
    queue_max_depth: int
    t_total: TTotalSummary
    alarms: Alarms
    capacity: Capacity
    surge: Surge
    findings: list[Finding]
    verdict: Level
    provenance: Provenance
    budget: ModelAllocation | None = None
    """This model's share of the stack's daily budget, when the stack has one (speech.plan.budget);
    absent otherwise (left out of the JSON, so plans of stacks without a budget keep their bytes)."""
    scale_in: ScaleIn | None = None
    """The scale-in step (None in plans written before it: one instance per step)."""
    schedule: FloorSchedule | None = None
    """Daily scheduled floors in force (each at least the plan's floor, at most its max); None: none."""
    promise: Promise | None = None
    """What the simulation of these inputs promised (``bench tune``); None: the plan is advisory."""
    tuning: list[TunedValue] = []
    """Inputs set away from their seed formulas, with the seed and the reason."""

    @model_serializer(mode="wrap")
    def _omit_absent_budget(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("budget", "scale_in", "schedule", "promise"):
                if data.get(key, 0) is None:
                    del data[key]
            if data.get("tuning", None) == []:
                del data["tuning"]
        return data

    def finding(self, name: str) -> Finding:
        for f in self.findings:
            if f.name == name:
                return f
        raise KeyError(name)


CALIBRATION_SCHEMA_VERSION: Final = 1


class OccupancyCheck(Frozen):
    """Observed TTFAB at one occupancy level vs the ladder at that concurrency."""

    concurrency: Annotated[int, Field(ge=1)]
    """Ladder level the periods were binned to (the smallest level at or above their occupancy)."""
    occupancy_mean: NonNegativeFloat
    """Mean requests in flight per instance over those periods (container EMF ConcurrentRequests)."""
    periods: NonNegativeInt
    observed_ttfab_p95_ms: NonNegativeFloat | None
    """Median over the periods of the container's TTFABp95 (Maximum across instances); None when
    too few periods to judge."""
    ladder_ttfab_p95_ms: NonNegativeFloat
    """The ladder's p95 interpolated at occupancy_mean."""
    judged: bool
    ok: bool


class RejectionCheck(Frozen):
    admitted: NonNegativeInt
    rejected: NonNegativeInt
    fraction: NonNegativeFloat
    expected_max_fraction: NonNegativeFloat
    """What the plan's surge_survival finding leads one to expect at most."""
    ok: bool


class ScalingEvent(Frozen):
    at: datetime
    direction: Literal["out", "in"]
    desired: int | None
    cause: str


class ScalingCheck(Frozen):
    read: bool
    """False when the scaling activities could not be read (the message says why)."""
    events: list[ScalingEvent]
    flaps: NonNegativeInt
    """Direction reversals within the plan's scale-in cooldown."""
    cooldown_violations: NonNegativeInt
    ok: bool


class Recommendation(Frozen):
    message: str
    command: str | None = None
    """The exact command to run (bench plan with new inputs); None when the fix is a measurement."""


class CalibrationArtifact(Frozen):
    """Result of ``bench observe``: what the deployed endpoint did vs what its plan promised.

    Recommends; never changes anything."""

    schema_version: Literal[1] = CALIBRATION_SCHEMA_VERSION
    kind: Literal["calibration"] = "calibration"
    model: str
    endpoint: str
    since: str
    """The window asked for (``1h``, ``1d``, ``1w``)."""
    window_start: datetime
    window_end: datetime
    period_s: Annotated[int, Field(ge=1)]
    plan_sha256: str
    qmax_sha256: str
    fingerprint: Fingerprint
    """The plan's."""
    slo_ms: PositiveFloat
    q_max: NonNegativeInt
    c_scale_max: float
    occupancy: list[OccupancyCheck]
    rejections: RejectionCheck
    scaling: ScalingCheck
    findings: list[Finding]
    verdict: Literal["holds", "drifted"]
    recommendations: list[Recommendation]
    provenance: Provenance




def plan_filename(a: PlanArtifact) -> str:
    return f"plan-{a.model}.json"


def calibration_filename(a: CalibrationArtifact) -> str:
    return f"calibration-{a.model}-{a.endpoint}-{a.window_end:%Y%m%dT%H%M%SZ}.json"
