"""Measurement receipts: what ``bench qmax`` / ``bench ttotal`` leave in the stack's provenance
bucket when a SageMaker run finishes, so a preview can tell a measured artifact from a hand-made one.

Pure: the receipt model, its key and its check against an artifact. Writing (boto3) is
:mod:`bench.aws.receipts`; reading at preview is the program's (an S3 object data source, see
``speech/infra/program.py``), which tags the endpoint with what it read (:data:`RECEIPT_TAGS`). The check at
preview (:mod:`speech.deploy.receipts`, :func:`~speech.deploy.receipts.receipt_problem`) is what the
program's gate and the policy pack's ``measured-artifacts-match-receipts`` both report.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field

from speech.schema.artifacts import DIGEST_RE, Frozen, QmaxArtifact, TtotalArtifact, canonical_sha256

RECEIPT_SCHEMA_VERSION: Final = 1
RECEIPT_PREFIX = "receipts"
"""Key prefix of receipts inside the stack's (versioned) weights and provenance bucket."""

ArtifactKind = Literal["qmax", "ttotal"]
RECEIPT_TAGS: dict[str, str] = {"qmax": "speech:qmax-receipt-sha256", "ttotal": "speech:ttotal-receipt-sha256"}
"""Endpoint tags the program writes for each artifact that needs a receipt: what it read."""
NO_RECEIPT = "none"
"""Tag value: stack config records no receipt key, or no object exists at that key."""
NOT_A_RECEIPT = "invalid"
"""Tag value: the object at the key is not a receipt of this model, artifact kind and endpoint."""


class Receipt(Frozen):
    """One finished measurement: which artifact (by canonical sha256), where, when, by whom."""

    schema_version: Literal[1] = RECEIPT_SCHEMA_VERSION
    kind: Literal["receipt"] = "receipt"
    artifact_kind: Literal["qmax", "ttotal"]
    model: str
    artifact_sha256: Annotated[str, Field(pattern=DIGEST_RE.pattern)]
    """:func:`speech.schema.canonical_sha256` of the artifact the run wrote."""
    endpoint: str
    region: str
    started_at: datetime
    ended_at: datetime
    caller_arn: str
    """STS GetCallerIdentity Arn of whoever ran the measurement."""
    caller_account: str
    tool: str
    tool_version: str


def receipt_key(model: str, kind: str, artifact_sha256: str) -> str:
    """``receipts/<model>/<kind>-<sha256 hex>.json``: one key per artifact, never reused."""
    return f"{RECEIPT_PREFIX}/{model}/{kind}-{artifact_sha256.removeprefix('sha256:')}.json"


def needs_receipt(artifact: QmaxArtifact | TtotalArtifact) -> bool:
    """Measured on SageMaker: a receipt must exist. Reference and assumption figures have none,
    and a local run has no bucket (it cannot describe a SageMaker fingerprint anyway)."""
    return artifact.provenance.origin == "measured" and artifact.provenance.target_endpoint is not None


def receipt_for(artifact: QmaxArtifact | TtotalArtifact, *, caller_arn: str, caller_account: str) -> Receipt:
    """The receipt of a finished SageMaker measurement (its provenance says where and when)."""
    prov = artifact.provenance
    if not needs_receipt(artifact):
        raise ValueError(f"{artifact.kind} artifact from {prov.target!r} ({prov.origin}) takes no receipt")
    assert prov.measured_at is not None and prov.ended_at is not None and prov.region and prov.tool and prov.tool_version
    return Receipt(
        artifact_kind=artifact.kind, model=artifact.model, artifact_sha256=canonical_sha256(artifact),
        endpoint=prov.target_endpoint or "", region=prov.region, started_at=prov.measured_at, ended_at=prov.ended_at,
        caller_arn=caller_arn, caller_account=caller_account, tool=prov.tool, tool_version=prov.tool_version,
    )


