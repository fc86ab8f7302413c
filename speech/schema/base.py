"""What every artifact and config model shares: the frozen base model, the fingerprint of what was
measured, the provenance and the evidence a measured claim needs, the canonical hash. Pure."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

Origin = Literal["measured", "reference", "assumption"]
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class Frozen(BaseModel):
    """Base for every artifact and config model: immutable, no unknown fields, every number finite
    (JSON's 1e999 reads as inf: the CLI fuzz harness found a Q_max file with an infinite throughput
    reaching the plan's queueing math as a traceback; no file of ours holds an infinity)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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


def canonical_sha256(artifact: BaseModel) -> str:
    """sha256 of the artifact's canonical JSON, so the hash survives a trip through YAML config."""
    return "sha256:" + hashlib.sha256(artifact.model_dump_json().encode()).hexdigest()
