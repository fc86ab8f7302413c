"""Artifact schemas: what a measurement or a plan writes, and what every other tool may rely on.

Pure: pydantic models and small helpers, no file I/O (see :mod:`speech.files`). What every
artifact shares (the frozen base, fingerprint, provenance, canonical hash) is in
:mod:`speech.schema.base`, the copy artifact in :mod:`speech.schema.copy_artifacts`; both are
re-exported here. Artifacts are
frozen, reject unknown fields and carry ``schema_version`` so a reader can refuse what it does
not understand instead of guessing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    model_validator,
)

from speech.schema.base import (
    DIGEST_RE,
    KUBERNETES_TARGET,
    LOCAL_TARGET,
    MEASURING_TOOLS,
    SAGEMAKER_TARGET,
    Fingerprint,
    Frozen,
    Origin,
    Provenance,
    canonical_sha256,
    evidence_error,
    instance_family,
    make_slug,
    missing_evidence,
)
from speech.schema.copy_artifacts import (
    COPY_SCHEMA_VERSION,
    TCOPY_TOLERANCE_S,
    CopyArtifact,
    CopyFootprint,
    CopyStart,
    Device,
    TcopyStatistic,
    copy_filename,
    nearest_rank,
)

SCHEMA_VERSION: Final = 1
"""Schema of artifacts that never changed shape (plan). qmax and ttotal are at 2 and still read 1
(see :data:`QMAX_SCHEMA_VERSION`, :data:`TTOTAL_SCHEMA_VERSION`)."""
QMAX_SCHEMA_VERSION: Final = 2
"""2: ``instances`` and ``cloudwatch_ratio_source`` added."""
TTOTAL_SCHEMA_VERSION: Final = 2
"""2: ``reaction_bound_s`` and ``planning_total_s`` removed (the plan is their one source)."""

Transport = Literal["stream", "bidirectional"]


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
    cloudwatch_concurrency_max: NonNegativeFloat | None = None
    """ConcurrentRequestsPerModel (Maximum, 10 s) during the window; None when not read."""
    meets_slo: bool
    measure_s: PositiveFloat | None = None
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
    cpu_fraction: NonNegativeFloat | None = None


CloudwatchRatioSource = Literal["measured", "assumed", "not_applicable"]


def _upgrade_qmax_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2. Version 1 stored 1.0 whenever CloudWatch was not read and did not say so;
    the source follows from what the artifact holds: a local target has no CloudWatch, a ladder
    with CloudWatch readings measured the ratio, anything else assumed it. The instance count was
    not recorded (None: unknown)."""
    ladder = data.get("ladder") or []
    target = str((data.get("provenance") or {}).get("target") or "")
    if target.startswith("local:"):
        source = "not_applicable"
    elif any(isinstance(lv, dict) and lv.get("cloudwatch_concurrency_max") is not None for lv in ladder):
        source = "measured"
    else:
        source = "assumed"
    return {**data, "schema_version": QMAX_SCHEMA_VERSION, "instances": None, "cloudwatch_ratio_source": source}


class QmaxArtifact(Frozen):
    """Result of ``bench qmax``: the ladder and the highest concurrency that keeps the SLO."""

    SUPPORTED_SCHEMA_VERSIONS: ClassVar[tuple[int, ...]] = (1, QMAX_SCHEMA_VERSION)

    schema_version: Literal[2] = QMAX_SCHEMA_VERSION
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
    first_failing_concurrency: int | None = None
    service_time: ServiceTime
    """From concurrency 1, which every ladder measures (first, or added)."""
    instances: Annotated[int, Field(ge=1)] | None
    """Instances serving the ladder: 1 (``bench qmax`` pins a SageMaker endpoint to one instance and
    a local server is one); None when not recorded (schema 1 artifacts)."""
    cloudwatch_ratio: PositiveFloat
    """CloudWatch ConcurrentRequestsPerModel (Maximum) / client mean in-flight, averaged over the
    levels CloudWatch covered; 1.0 when ``cloudwatch_ratio_source`` is not ``measured``."""
    cloudwatch_ratio_source: CloudwatchRatioSource
    """``measured``: read per level; ``assumed``: a SageMaker run whose metrics never arrived;
    ``not_applicable``: a local server (no CloudWatch)."""
    request_mix: RequestMix | None = None
    client_overhead: ClientOverhead | None = None
    provenance: Provenance

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version") == 1:
            return _upgrade_qmax_v1(data)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> QmaxArtifact:
        if self.cloudwatch_ratio_source == "measured":
            if not any(lv.cloudwatch_concurrency_max is not None for lv in self.ladder):
                raise ValueError("cloudwatch_ratio_source is measured but no ladder level has cloudwatch_concurrency_max")
        elif self.cloudwatch_ratio != 1.0:
            raise ValueError(
                f"cloudwatch_ratio {self.cloudwatch_ratio} must be 1.0 when cloudwatch_ratio_source is "
                f"{self.cloudwatch_ratio_source}"
            )
        levels = [lv.concurrency for lv in self.ladder]
        if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
            raise ValueError(f"ladder concurrency levels must strictly increase, got {levels}")
        if self.bracketed != (self.first_failing_concurrency is not None):
            raise ValueError("bracketed must be true exactly when first_failing_concurrency is set")
        if self.first_failing_concurrency is not None and self.first_failing_concurrency <= self.q_max:
            raise ValueError(
                f"first_failing_concurrency {self.first_failing_concurrency} must exceed q_max {self.q_max}"
            )
        if self.q_max and self.q_max not in levels:
            raise ValueError(f"q_max {self.q_max} is not one of the measured levels {levels}")
        if self.provenance.origin == "measured":
            missing = missing_evidence("qmax", self.provenance, self.fingerprint)
            if self.client_overhead is None:
                missing.append("client_overhead")
            windowless = [lv.concurrency for lv in self.ladder if lv.measure_s is None]
            if windowless:
                missing.append(f"ladder measure_s (the measured window behind the raw counts) at levels {windowless}")
            if missing:
                raise evidence_error("qmax", missing)
        return self


TtotalTrigger = Literal["forced-desired", "local-process", "reference", "kubernetes-scale"]


class Phase(Frozen):
    """One timestamped step of a scale-out, offset from ``desired_set``."""

    name: str
    at: datetime | None
    offset_s: NonNegativeFloat | None
    source: str
    """What observed it: an API call, a log marker, a probe load."""
    bounded: bool
    """True when the time is a bound (e.g. first log event after the real moment), not exact."""
    applicable: bool = True
    """False for phases that do not exist in this mode (provisioning when run locally)."""

    @model_validator(mode="after")
    def _times_when_applicable(self) -> Phase:
        if self.applicable and (self.at is None or self.offset_s is None):
            raise ValueError(f"phase {self.name!r} is applicable but has no time")
        return self


class TtotalArtifact(Frozen):
    """Result of ``bench ttotal``: how long a real scale-out takes, phase by phase.

    Only what was measured: the reaction bound and the planning T_total are the plan's
    (:func:`speech.plan.formulas.planning_t_total`), computed with the plan's reaction policy.
    """

    SUPPORTED_SCHEMA_VERSIONS: ClassVar[tuple[int, ...]] = (1, TTOTAL_SCHEMA_VERSION)

    schema_version: Literal[2] = TTOTAL_SCHEMA_VERSION
    kind: Literal["ttotal"] = "ttotal"
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    trigger: TtotalTrigger
    transport: Transport | None = None
    fingerprint: Fingerprint
    phases: Annotated[list[Phase], Field(min_length=1)]
    measured_total_s: PositiveFloat
    """Offset of the last applicable phase: desired_set to traffic served again, seconds."""
    provenance: Provenance

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        # Schema 1 also stored a reaction bound and planning total computed from bench ttotal's own
        # flags, which the plan never read; the plan recomputes both from its inputs.
        if isinstance(data, dict) and data.get("schema_version") == 1:
            data = {k: v for k, v in data.items() if k not in ("reaction_bound_s", "planning_total_s")}
            return {**data, "schema_version": TTOTAL_SCHEMA_VERSION}
        return data

    @model_validator(mode="after")
    def _last_phase(self) -> TtotalArtifact:
        last = max((p.offset_s for p in self.phases if p.applicable and p.offset_s is not None), default=None)
        if last is None or abs(self.measured_total_s - last) > 0.0015:
            raise ValueError(f"measured_total_s {self.measured_total_s} is not the last applicable phase's offset {last}")
        if self.provenance.origin == "measured":
            missing = missing_evidence("ttotal", self.provenance, self.fingerprint)
            if missing:
                raise evidence_error("ttotal", missing)
        return self


Level = Literal["ok", "warn", "stop"]


def qmax_filename(a: QmaxArtifact) -> str:
    return f"qmax-{a.model}-{a.transport}-{a.fingerprint.slug}.json"


def ttotal_filename(a: TtotalArtifact) -> str:
    return f"ttotal-{a.model}-{a.trigger}-{a.fingerprint.slug}.json"


# --- bench replay: a trace sent open-loop to a real target ------------------------------------------


class ReplayRequest(Frozen):
    due_s: float
    late_ms: float
    """How long after its timestamp the request was sent (client lag)."""
    ttfab_ms: float | None
    status: str
    """ok, rejected, or the error code."""


class ReplayArtifact(Frozen):
    """Result of ``bench replay``: every request of a trace sent at its timestamp, and the summary."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "replay"
    target: str
    trace_spec: str
    seed: int
    duration_s: float
    slo_ms: float | None = None
    requests: int
    ok: int
    rejected: int
    errors: int
    ttfab_p50_ms: float | None
    ttfab_p95_ms: float | None
    ttfab_p99_ms: float | None
    within_slo_share: float | None = None
    send_late_p99_ms: float
    started_at: datetime
    engine: str = "local"
    """local (one asyncio process) or locust."""
    workers: int = 1
    """Processes that sent the requests (Locust workers)."""
    scheduled: int | None = None
    """Requests the trace held; more than ``requests`` when a worker died or the run was interrupted."""
    dead_workers: list[str] = []
    """Workers that did not finish their share: which, and why."""
    interrupted: bool = False
    per_request: list[ReplayRequest]


__all__ = [
    "COPY_SCHEMA_VERSION",
    "ClientOverhead",
    "CloudwatchRatioSource",
    "CopyArtifact",
    "CopyFootprint",
    "CopyStart",
    "DIGEST_RE",
    "Device",
    "Fingerprint",
    "Frozen",
    "KUBERNETES_TARGET",
    "LOCAL_TARGET",
    "LadderLevel",
    "Level",
    "MEASURING_TOOLS",
    "Origin",
    "Phase",
    "Provenance",
    "QMAX_SCHEMA_VERSION",
    "QmaxArtifact",
    "ReplayArtifact",
    "ReplayRequest",
    "RequestMix",
    "SAGEMAKER_TARGET",
    "SCHEMA_VERSION",
    "ServiceTime",
    "Slo",
    "TCOPY_TOLERANCE_S",
    "TTOTAL_SCHEMA_VERSION",
    "TcopyStatistic",
    "Transport",
    "TtotalArtifact",
    "TtotalTrigger",
    "canonical_sha256",
    "copy_filename",
    "evidence_error",
    "instance_family",
    "make_slug",
    "missing_evidence",
    "nearest_rank",
    "qmax_filename",
    "ttotal_filename",
]
