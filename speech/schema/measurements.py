"""The measured artifacts a model is planned from, as stack config holds them: by reference (a
committed file and its sha256) or embedded, and where they were measured. Pure pydantic."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from speech.schema.artifacts import CopyArtifact, Frozen, QmaxArtifact, TtotalArtifact, canonical_sha256

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
