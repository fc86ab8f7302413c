"""Artifact schemas: what a measurement or a plan writes, and what every other tool may rely on.

Pure: pydantic models and small helpers, no file I/O (see :mod:`speech.files`). Artifacts are
frozen, reject unknown fields and carry ``schema_version`` so a reader can refuse what it does
not understand instead of guessing.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, model_validator

SCHEMA_VERSION = 1

Origin = Literal["measured", "reference", "assumption"]
Transport = Literal["stream", "bidirectional"]
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class Frozen(BaseModel):
    """Base for every artifact and config model: immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def instance_family(instance_type: str) -> str:
    """``ml.g5.xlarge`` -> ``g5xlarge``: the instance part of a slug."""
    return instance_type.removeprefix("ml.").replace(".", "").replace("-", "")


def make_slug(instance_type: str, image_digest: str) -> str:
    """Slug naming what an artifact was measured on: instance family + first 8 hex of the digest."""
    return f"{instance_family(instance_type)}-{image_digest.removeprefix('sha256:')[:8]}"


class Fingerprint(Frozen):
    """What was measured: the instance type and the exact container image."""

    instance_type: Annotated[str, Field(pattern=r"^ml\.[a-z0-9]+\.[a-z0-9]+$|^local(\.[a-z0-9-]+)?$")]
    """SageMaker instance type (``ml.g5.xlarge``) or ``local`` / ``local.<host>`` for this machine."""
    image_digest: Annotated[str, Field(pattern=DIGEST_RE.pattern)]
    """``sha256:<64 hex>`` of the image (locally: of the model weights + server code)."""
    slug: str
    """``<family>-<first 8 hex of digest>``, e.g. ``g5xlarge-8b1b96bc``; must agree with the two above."""

    @model_validator(mode="after")
    def _slug_matches(self) -> "Fingerprint":
        expected = make_slug(self.instance_type, self.image_digest)
        if self.slug != expected:
            raise ValueError(f"slug {self.slug!r} does not match instance type and digest (expected {expected!r})")
        return self

    @classmethod
    def of(cls, instance_type: str, image_digest: str) -> "Fingerprint":
        return cls(instance_type=instance_type, image_digest=image_digest, slug=make_slug(instance_type, image_digest))


class Provenance(Frozen):
    """Where the numbers come from. Only ``measured`` describes the user's own endpoint."""

    origin: Origin
    source: str
    """Human-readable: the tool run, or the public source of reference figures."""
    measured_at: Optional[datetime] = None
    tool: Optional[str] = None
    target: Optional[str] = None
    """``local:<url>`` or ``sagemaker:<endpoint>``; None for reference figures."""


class Slo(Frozen):
    ttfab_p95_ms: PositiveFloat
    """p95 time to first audio byte, queueing included, in milliseconds."""


class LadderLevel(Frozen):
    """One closed-loop level: exactly ``concurrency`` requests held outstanding."""

    concurrency: Annotated[int, Field(ge=1)]
    completed: NonNegativeInt
    ok: NonNegativeInt
    rejected: NonNegativeInt = 0
    errors: NonNegativeInt = 0
    ttfab_p50_ms: NonNegativeFloat
    ttfab_p95_ms: NonNegativeFloat
    ttfab_p99_ms: NonNegativeFloat
    throughput_rps: NonNegativeFloat
    """Completed OK requests per second during the measured window."""
    client_concurrency_mean: NonNegativeFloat
    cloudwatch_concurrency_max: Optional[NonNegativeFloat] = None
    """ConcurrentRequestsPerModel (Maximum, 10 s) during the window; None when not read."""
    meets_slo: bool
    measure_s: Optional[PositiveFloat] = None
    """Length of the measured window."""


class ServiceTime(Frozen):
    """Uncontended service time (one request alone on the instance), to first audio byte."""

    mean_ms: PositiveFloat
    p95_ms: PositiveFloat


class RequestMix(Frozen):
    """The texts a ladder sent, so a reader knows what a 'request' was."""

    name: str
    chars_min: NonNegativeInt
    chars_mean: NonNegativeFloat
    chars_max: NonNegativeInt
    count: Annotated[int, Field(ge=1)]


class ClientOverhead(Frozen):
    """The load generator's own cost, measured so the ladder is known not to be the bottleneck."""

    loop_lag_p99_ms: NonNegativeFloat
    cpu_fraction: Optional[NonNegativeFloat] = None


class QmaxArtifact(Frozen):
    """Result of ``bench qmax``: the ladder and the highest concurrency that keeps the SLO."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["qmax"] = "qmax"
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    transport: Transport
    fingerprint: Fingerprint
    slo: Slo
    ladder: Annotated[list[LadderLevel], Field(min_length=1)]
    q_max: NonNegativeInt
    """Highest measured concurrency whose p95 TTFAB met the SLO; 0 when none did."""
    bracketed: bool
    """True when a higher level failed, so q_max is tight, not a lower bound."""
    first_failing_concurrency: Optional[int] = None
    service_time: ServiceTime
    cloudwatch_ratio: PositiveFloat
    """CloudWatch ConcurrentRequestsPerModel / client mean in-flight (1.0 when not read)."""
    request_mix: Optional[RequestMix] = None
    client_overhead: Optional[ClientOverhead] = None
    provenance: Provenance

    @model_validator(mode="after")
    def _consistent(self) -> "QmaxArtifact":
        levels = [lv.concurrency for lv in self.ladder]
        if any(b <= a for a, b in zip(levels, levels[1:])):
            raise ValueError(f"ladder concurrency levels must strictly increase, got {levels}")
        if self.bracketed != (self.first_failing_concurrency is not None):
            raise ValueError("bracketed must be true exactly when first_failing_concurrency is set")
        if self.first_failing_concurrency is not None and self.first_failing_concurrency <= self.q_max:
            raise ValueError(
                f"first_failing_concurrency {self.first_failing_concurrency} must exceed q_max {self.q_max}"
            )
        if self.q_max and self.q_max not in levels:
            raise ValueError(f"q_max {self.q_max} is not one of the measured levels {levels}")
        return self


TtotalTrigger = Literal["forced-desired", "local-process", "reference"]


class Phase(Frozen):
    """One timestamped step of a scale-out, offset from ``desired_set``."""

    name: str
    at: Optional[datetime]
    offset_s: Optional[NonNegativeFloat]
    source: str
    """What observed it: an API call, a log marker, a probe load."""
    bounded: bool
    """True when the time is a bound (e.g. first log event after the real moment), not exact."""
    applicable: bool = True
    """False for phases that do not exist in this mode (provisioning when run locally)."""

    @model_validator(mode="after")
    def _times_when_applicable(self) -> "Phase":
        if self.applicable and (self.at is None or self.offset_s is None):
            raise ValueError(f"phase {self.name!r} is applicable but has no time")
        return self


class TtotalArtifact(Frozen):
    """Result of ``bench ttotal``: how long a real scale-out takes, phase by phase."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["ttotal"] = "ttotal"
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    trigger: TtotalTrigger
    transport: Optional[Transport] = None
    fingerprint: Fingerprint
    phases: Annotated[list[Phase], Field(min_length=1)]
    measured_total_s: PositiveFloat
    reaction_bound_s: NonNegativeFloat
    """Detection delay not measured: metric period x datapoints + scale-out cooldown."""
    planning_total_s: PositiveFloat
    provenance: Provenance

    @model_validator(mode="after")
    def _sum(self) -> "TtotalArtifact":
        if abs(self.measured_total_s + self.reaction_bound_s - self.planning_total_s) > 0.05:
            raise ValueError(
                f"planning_total_s {self.planning_total_s} != measured_total_s {self.measured_total_s}"
                f" + reaction_bound_s {self.reaction_bound_s}"
            )
        return self


Level = Literal["ok", "warn", "stop"]


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

    def finding(self, name: str) -> Finding:
        for f in self.findings:
            if f.name == name:
                return f
        raise KeyError(name)


def canonical_sha256(artifact: BaseModel) -> str:
    """sha256 of the artifact's canonical JSON, so the hash survives a trip through YAML config."""
    return "sha256:" + hashlib.sha256(artifact.model_dump_json().encode()).hexdigest()


def qmax_filename(a: QmaxArtifact) -> str:
    return f"qmax-{a.model}-{a.transport}-{a.fingerprint.slug}.json"


def ttotal_filename(a: TtotalArtifact) -> str:
    return f"ttotal-{a.model}-{a.trigger}-{a.fingerprint.slug}.json"


def plan_filename(a: PlanArtifact) -> str:
    return f"plan-{a.model}.json"
