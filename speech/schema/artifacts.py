"""Artifact schemas: what a measurement or a plan writes, and what every other tool may rely on.

Pure: pydantic models and small helpers, no file I/O (see :mod:`speech.files`). Artifacts are
frozen, reject unknown fields and carry ``schema_version`` so a reader can refuse what it does
not understand instead of guessing.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from datetime import datetime
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    model_validator,
)

from speech.schema.units import EPS

SCHEMA_VERSION: Final = 1
"""Schema of artifacts that never changed shape (plan). qmax and ttotal are at 2 and still read 1
(see :data:`QMAX_SCHEMA_VERSION`, :data:`TTOTAL_SCHEMA_VERSION`)."""
QMAX_SCHEMA_VERSION: Final = 2
"""2: ``instances`` and ``cloudwatch_ratio_source`` added."""
TTOTAL_SCHEMA_VERSION: Final = 2
"""2: ``reaction_bound_s`` and ``planning_total_s`` removed (the plan is their one source)."""

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

    instance_type: Annotated[str, Field(pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9]+$|^local(\.[a-z0-9-]+)?$")]
    """SageMaker instance type (``ml.g5.xlarge``) or ``local`` / ``local.<host>`` for this machine."""
    image_digest: Annotated[str, Field(pattern=DIGEST_RE.pattern)]
    """``sha256:<64 hex>`` of the image (locally: of the model weights + server code)."""
    slug: str
    """``<family>-<first 8 hex of digest>``, e.g. ``g5xlarge-8b1b96bc``; must agree with the two above."""

    @model_validator(mode="after")
    def _slug_matches(self) -> Fingerprint:
        expected = make_slug(self.instance_type, self.image_digest)
        if self.slug != expected:
            raise ValueError(f"slug {self.slug!r} does not match instance type and digest (expected {expected!r})")
        return self

    @classmethod
    def of(cls, instance_type: str, image_digest: str) -> Fingerprint:
        return cls(instance_type=instance_type, image_digest=image_digest, slug=make_slug(instance_type, image_digest))


class Provenance(Frozen):
    """Where the numbers come from. Only ``measured`` describes the user's own endpoint."""

    origin: Origin
    source: str
    """Human-readable: the tool run, or the public source of reference figures."""
    measured_at: datetime | None = None
    """When the run started (UTC)."""
    tool: str | None = None
    target: str | None = None
    """``local:<url>`` or ``sagemaker:<endpoint>``; None for reference figures."""
    tool_version: str | None = None
    """Version of the tool that measured (``bench`` = the speech-endpoints package version)."""
    region: str | None = None
    """AWS region of a ``sagemaker:`` target; None for a local one."""
    ended_at: datetime | None = None
    """When the run ended (UTC)."""

    @property
    def target_endpoint(self) -> str | None:
        """The SageMaker endpoint name of a ``sagemaker:`` target, else None."""
        return self.target.removeprefix(SAGEMAKER_TARGET) if self.target and self.target.startswith(SAGEMAKER_TARGET) else None


SAGEMAKER_TARGET = "sagemaker:"
LOCAL_TARGET = "local:"
KUBERNETES_TARGET = "kubernetes:"
"""``kubernetes:<namespace>/<deployment>``: measured on a cluster; the fingerprint names the hardware
a pod gets by its instance type (speech.schema.config, ``hosting: kubernetes``)."""
MEASURING_TOOLS = {"qmax": "bench qmax", "ttotal": "bench ttotal", "copy": "bench tcopy"}
"""The only tools whose output may say ``origin: measured``, per artifact kind."""


def missing_evidence(kind: str, prov: Provenance, fingerprint: Fingerprint) -> list[str]:
    """What a ``measured`` artifact lacks of the evidence only a real run writes; [] when complete.

    A measured claim names the tool and its version, the target (a SageMaker endpoint and its
    region, or a local URL), and when the run started and ended. Relabelling someone else's
    figures as ``measured`` leaves these empty, so the claim fails here, at load.
    """
    missing: list[str] = []
    tool = MEASURING_TOOLS[kind]
    if prov.tool != tool:
        missing.append(f"provenance.tool ({prov.tool!r}, expected {tool!r})")
    if not prov.tool_version:
        missing.append("provenance.tool_version")
    target = prov.target or ""
    if target.startswith(KUBERNETES_TARGET) and "/" in target.removeprefix(KUBERNETES_TARGET).strip("/"):
        if fingerprint.instance_type.startswith("local"):
            missing.append(f"the instance type of the pods' hardware in the fingerprint (target {target} but "
                           f"{fingerprint.instance_type})")
    elif not (target.startswith(SAGEMAKER_TARGET) or target.startswith(LOCAL_TARGET)) or target in (
        SAGEMAKER_TARGET, LOCAL_TARGET
    ):
        missing.append(f"provenance.target ({prov.target!r}, expected sagemaker:<endpoint>, local:<url> or "
                       "kubernetes:<namespace>/<deployment>)")
    elif target.startswith(SAGEMAKER_TARGET):
        if not prov.region:
            missing.append("provenance.region (of the sagemaker target)")
        if fingerprint.instance_type.startswith("local"):
            missing.append(f"a SageMaker instance type in the fingerprint (target {target} but {fingerprint.instance_type})")
    elif not fingerprint.instance_type.startswith("local"):
        missing.append(f"a sagemaker:<endpoint> target for fingerprint {fingerprint.instance_type} (got {target})")
    if prov.measured_at is None:
        missing.append("provenance.measured_at (start)")
    if prov.ended_at is None:
        missing.append("provenance.ended_at")
    elif prov.measured_at is not None and prov.ended_at < prov.measured_at:
        missing.append(f"provenance.ended_at after measured_at (ended {prov.ended_at} < started {prov.measured_at})")
    return missing


def evidence_error(kind: str, missing: list[str]) -> ValueError:
    return ValueError(
        f"origin is 'measured' but the {kind} artifact lacks the evidence a real run writes: missing "
        f"{'; '.join(missing)}. Only {MEASURING_TOOLS[kind]} writes a measured {kind} artifact: run it against your endpoint, "
        "or keep origin 'reference' (public figures) or 'assumption'"
    )


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


COPY_SCHEMA_VERSION: Final = 1
Device = Literal["cpu", "cuda"]
TcopyStatistic = Literal["max", "p95"]
TCOPY_TOLERANCE_S = 0.0015
"""Rounding slack when a copy artifact's summary figures are checked against its starts."""


def nearest_rank(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the ceil(fraction x n)-th smallest value (p95 of fewer than 20
    samples is their maximum: no interpolation invents a start that never happened)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered) - EPS)) - 1]


class CopyFootprint(Frozen):
    """What one copy of the model holds while serving: the figures copies are packed by."""

    device: Device
    """Where the copy runs: ``cuda`` (an NVIDIA GPU) or ``cpu``."""
    accelerator_memory_mib: PositiveFloat | None = None
    """Peak accelerator memory the copy's process held (weights, activations, allocator cache),
    MiB; required on ``cuda``, absent on ``cpu``."""
    accelerator_memory_source: str | None = None
    """How it was read, e.g. ``torch.cuda.max_memory_reserved`` or ``nvml process used memory``."""
    accelerator_name: str | None = None
    """The device it was measured on, e.g. ``NVIDIA A10G``."""
    accelerator_memory_total_mib: PositiveFloat | None = None
    """That device's total memory as the driver reports it, MiB."""
    host_memory_mib: PositiveFloat
    """Peak resident set size (RSS) of the copy's process, MiB: what the copy needs of the
    instance's host memory (on ``cpu`` this is also what copies are packed by)."""
    cpu_cores: PositiveFloat | None = None
    """CPU cores the copy kept busy at its Q_max (process CPU time / wall time); None when not measured."""

    @model_validator(mode="after")
    def _device_fields(self) -> CopyFootprint:
        if self.device == "cuda" and self.accelerator_memory_mib is None:
            raise ValueError("a cuda copy needs accelerator_memory_mib (its peak accelerator memory, MiB)")
        if self.device == "cpu" and (self.accelerator_memory_mib is not None or self.accelerator_memory_total_mib is not None):
            raise ValueError("a cpu copy has no accelerator memory; remove accelerator_memory_mib / _total_mib")
        if (
            self.accelerator_memory_mib is not None
            and self.accelerator_memory_total_mib is not None
            and self.accelerator_memory_mib > self.accelerator_memory_total_mib
        ):
            raise ValueError(
                f"accelerator_memory_mib {self.accelerator_memory_mib} exceeds the device's total "
                f"{self.accelerator_memory_total_mib} MiB"
            )
        return self

    @property
    def packing_memory_mib(self) -> float:
        """The memory copies are packed by, MiB: accelerator memory on ``cuda``, RSS on ``cpu``."""
        return self.accelerator_memory_mib if self.accelerator_memory_mib is not None else self.host_memory_mib


class CopyStart(Frozen):
    """One measured start of a copy on an instance that is already running: offsets, seconds,
    from the moment the copy was asked to start (process spawned or load requested). No instance
    provisioning and no image pull are in it; that is the point of a copy."""

    started_at: datetime | None = None
    """When the start was requested (UTC); required for a measured artifact."""
    framework_init_s: NonNegativeFloat | None = None
    """Offset of the ``framework_init`` stage marker (interpreter and framework imported)."""
    weights_ready_s: NonNegativeFloat
    """Offset of ``weights_ready``: the weights are on the device."""
    ready_s: PositiveFloat
    """Offset of ``ready`` (warm-up done, ``/ping`` 200): this start's T_copy sample."""
    source: str = "stage markers"
    """What observed the offsets (stage markers on stdout, ``/ping`` polling)."""

    @model_validator(mode="after")
    def _ordered(self) -> CopyStart:
        if self.framework_init_s is not None and self.framework_init_s > self.weights_ready_s:
            raise ValueError(f"framework_init_s {self.framework_init_s} is after weights_ready_s {self.weights_ready_s}")
        if self.weights_ready_s > self.ready_s:
            raise ValueError(f"weights_ready_s {self.weights_ready_s} is after ready_s {self.ready_s}")
        return self

    @property
    def weights_load_s(self) -> float:
        """weights_ready - framework_init (- 0 when framework_init was not seen), seconds."""
        return self.weights_ready_s - (self.framework_init_s or 0.0)

    @property
    def warmup_s(self) -> float:
        """ready - weights_ready, seconds."""
        return self.ready_s - self.weights_ready_s


class CopyArtifact(Frozen):
    """Result of ``bench tcopy``: one copy's footprint and how long a new copy takes to serve.

    Q_max per copy is not here: it is an ordinary :class:`QmaxArtifact` whose ladder ran against
    one copy. ``t_copy_s`` is the planning figure, the statistic named by ``planning_statistic``
    over ``starts`` (``max`` by default; ``p95`` by nearest rank, which equals the max below 20
    starts)."""

    schema_version: Literal[1] = COPY_SCHEMA_VERSION
    kind: Literal["copy"] = "copy"
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    fingerprint: Fingerprint
    footprint: CopyFootprint
    starts: Annotated[list[CopyStart], Field(min_length=1)]
    t_copy_p50_s: PositiveFloat
    """Median of the starts' ``ready_s``, seconds."""
    t_copy_p95_s: PositiveFloat
    """Nearest-rank p95 of the starts' ``ready_s``, seconds."""
    t_copy_max_s: PositiveFloat
    """Slowest start, seconds."""
    planning_statistic: TcopyStatistic = "max"
    """Which statistic ``t_copy_s`` is."""
    t_copy_s: PositiveFloat
    """T_copy to plan with: weights load + warm-up (+ process start), no instance provisioning, seconds."""
    provenance: Provenance

    @model_validator(mode="after")
    def _summary_matches_starts(self) -> CopyArtifact:
        samples = [s.ready_s for s in self.starts]
        expected = {
            "t_copy_p50_s": statistics.median(samples),
            "t_copy_p95_s": nearest_rank(samples, 0.95),
            "t_copy_max_s": max(samples),
        }
        for name, value in expected.items():
            if abs(getattr(self, name) - value) > TCOPY_TOLERANCE_S:
                raise ValueError(f"{name} {getattr(self, name)} does not match the starts ({value:.3f} s)")
        chosen = expected[f"t_copy_{self.planning_statistic}_s"]
        if abs(self.t_copy_s - chosen) > TCOPY_TOLERANCE_S:
            raise ValueError(
                f"t_copy_s {self.t_copy_s} is not the starts' {self.planning_statistic} ({chosen:.3f} s)"
            )
        if self.provenance.origin == "measured":
            missing = missing_evidence("copy", self.provenance, self.fingerprint)
            undated = [i for i, s in enumerate(self.starts) if s.started_at is None]
            if undated:
                missing.append(f"starts[].started_at (starts {undated})")
            if missing:
                raise evidence_error("copy", missing)
        return self

    @classmethod
    def summarize(cls, starts: list[CopyStart], statistic: TcopyStatistic = "max") -> dict[str, float]:
        """The summary fields for ``starts`` (what ``bench tcopy`` stores next to them), seconds, rounded to ms."""
        samples = [s.ready_s for s in starts]
        figures = {
            "t_copy_p50_s": round(statistics.median(samples), 3),
            "t_copy_p95_s": round(nearest_rank(samples, 0.95), 3),
            "t_copy_max_s": round(max(samples), 3),
        }
        return {**figures, "t_copy_s": figures[f"t_copy_{statistic}_s"]}


Level = Literal["ok", "warn", "stop"]
def canonical_sha256(artifact: BaseModel) -> str:
    """sha256 of the artifact's canonical JSON, so the hash survives a trip through YAML config."""
    return "sha256:" + hashlib.sha256(artifact.model_dump_json().encode()).hexdigest()


def qmax_filename(a: QmaxArtifact) -> str:
    return f"qmax-{a.model}-{a.transport}-{a.fingerprint.slug}.json"


def ttotal_filename(a: TtotalArtifact) -> str:
    return f"ttotal-{a.model}-{a.trigger}-{a.fingerprint.slug}.json"


def copy_filename(a: CopyArtifact) -> str:
    return f"copy-{a.model}-{a.fingerprint.slug}.json"


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
