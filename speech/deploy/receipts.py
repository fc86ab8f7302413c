"""Receipts checked at preview: which receipts a stack claims, and what a read receipt says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal  # noqa: F401

from pydantic import ValidationError

from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import MeasuredOn, Measurements, PlanInputs
from speech.schema.receipts import NO_RECEIPT, NOT_A_RECEIPT, ArtifactKind, Receipt, needs_receipt, receipt_key

# --- the check at preview ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiptClaim:
    """One measured SageMaker artifact in stack config and the receipt it must have."""

    kind: ArtifactKind
    artifact: QmaxArtifact | TtotalArtifact
    key: str | None
    """The receipt key stack config records (``<kind>_receipt``); None when it records none."""
    artifact_sha256: str
    """:func:`canonical_sha256` of the artifact as it sits in stack config."""
    bucket: str | None
    """Where the receipt lives: ``measured_on.receipt_bucket`` for an artifact measured on that
    endpoint when set; None = this stack's own provenance bucket."""

    @property
    def expected_key(self) -> str:
        return receipt_key(self.artifact.model, self.kind, self.artifact_sha256)


def receipt_claims(measurements: Measurements, measured_on: MeasuredOn | None = None) -> list[ReceiptClaim]:
    """The artifacts that need a receipt (:func:`needs_receipt`), qmax first; empty for reference,
    assumption and local figures."""
    out = []
    kinds: tuple[tuple[ArtifactKind, QmaxArtifact | TtotalArtifact, str | None], ...] = (
        ("qmax", measurements.qmax, measurements.qmax_receipt), ("ttotal", measurements.ttotal, measurements.ttotal_receipt))
    for kind, art, key in kinds:
        if not needs_receipt(art):
            continue
        elsewhere = (measured_on is not None and measured_on.receipt_bucket is not None
                     and art.provenance.target_endpoint == measured_on.endpoint)
        out.append(ReceiptClaim(kind=kind, artifact=art, key=key, artifact_sha256=canonical_sha256(art),
                                bucket=measured_on.receipt_bucket if elsewhere and measured_on else None))
    return out


def read_receipt(body: str | None, claim: ReceiptClaim) -> tuple[str, str | None]:
    """What the program read at the claim's key, as (tag value, why): the receipt's
    ``artifact_sha256``; :data:`NO_RECEIPT` when there is no object; :data:`NOT_A_RECEIPT` when
    the object does not parse as a receipt or names another model, artifact kind or endpoint."""
    if body is None:
        return NO_RECEIPT, None
    try:
        receipt = Receipt.model_validate_json(body)
    except ValidationError as err:
        return NOT_A_RECEIPT, f"not a receipt ({err.error_count()} schema error(s), first: {err.errors()[0]['msg']})"
    art = claim.artifact
    wrong = [f"{what} {got!r} (artifact: {want!r})" for what, got, want in (
        ("model", receipt.model, art.model), ("artifact_kind", receipt.artifact_kind, claim.kind),
        ("endpoint", receipt.endpoint, art.provenance.target_endpoint)) if got != want]
    if wrong:
        return NOT_A_RECEIPT, "it names " + ", ".join(wrong)
    return receipt.artifact_sha256, None


ReceiptCode = Literal["receipt_missing", "receipt_mismatch"]


@dataclass(frozen=True)
class ReceiptProblem:
    code: ReceiptCode
    message: str


def fix_command(claim: ReceiptClaim, *, bucket: str, stack: str, inputs: PlanInputs,
                max_instances: int | None = None) -> str:
    """The commands that produce a measurement with its receipt and record both in stack config
    (``bench plan`` with the stack's own planning inputs, so only the artifact changes)."""
    art = claim.artifact
    region = f" --region {art.provenance.region}" if art.provenance.region else ""
    extra = (f" --slo-ms {art.slo.ttfab_p95_ms:g}" if isinstance(art, QmaxArtifact)
             else " --qmax <qmax-*.json>")
    plan = (f"--peak-rps {inputs.peak_rps:g} --trough-rps {inputs.trough_rps:g} --slo-ms {inputs.slo_ms:g} "
            f"--surge-ratio {inputs.surge_ratio:g} --min-instances {inputs.min_instances}"
            + (f" --qmax-derate {inputs.qmax_derate:g}" if inputs.qmax_derate != 1.0 else "")
            + (f" --max-instances {max_instances}" if max_instances is not None else ""))
    return (f"`python -m bench {claim.kind} --endpoint {art.provenance.target_endpoint}{region}{extra} "
            f"--receipt-bucket {bucket}`, then `python -m bench plan --qmax <qmax-*.json> --ttotal <ttotal-*.json> "
            f"{plan} --stack {stack}` with the artifact it writes")


def receipt_problem(model: str, claim: ReceiptClaim, read: str, *, bucket: str, stack: str, inputs: PlanInputs,
                    max_instances: int | None = None, why: str | None = None) -> ReceiptProblem | None:
    """None when the receipt read at the claim's key (``read``: a tag value, see
    :func:`read_receipt`) is for exactly this artifact; else what is wrong and the fix.

    ``bucket``: the bucket name to show (the pack may know it only as a label); ``inputs`` and
    ``max_instances``: the model's planning inputs, repeated in the ``bench plan`` of the fix."""
    where = f"models.{model}.measurements.{claim.kind}"
    fix = ("Fix: re-measure so bench leaves the receipt: "
           + fix_command(claim, bucket=bucket, stack=stack, inputs=inputs, max_instances=max_instances))
    sha = claim.artifact_sha256
    if claim.key is None:
        return ReceiptProblem("receipt_missing", (
            f"{where} is a measurement of SageMaker endpoint {claim.artifact.provenance.target_endpoint!r} but stack "
            f"config records no {claim.kind}_receipt (expected {claim.expected_key!r} for artifact {sha}), so nothing "
            f"shows bench produced it. {fix}"))
    url = f"s3://{bucket}/{claim.key}"
    if read == NO_RECEIPT and why:
        region = claim.artifact.provenance.region
        return ReceiptProblem("receipt_missing", (
            f"{where}: the receipt at {url} could not be read{f' in {region}' if region else ''} ({why}): the bucket "
            f"does not exist, belongs to another account, is in another region than the measurement, or denies "
            f"this stack's credentials. Fix: name the bucket bench wrote the receipt to (measured_on.receipt_bucket) "
            f"and let this account read it, or {fix[len('Fix: '):]}"))
    if read == NO_RECEIPT:
        return ReceiptProblem("receipt_missing", (
            f"{where}: no receipt at {url} (expected one with artifact_sha256 {sha}): the run was made without "
            f"--receipt-bucket, into another bucket, or the figures were not produced by bench. {fix}"))
    if read == NOT_A_RECEIPT:
        return ReceiptProblem("receipt_mismatch", (
            f"{where}: the object at {url} is not this artifact's receipt ({why or 'it does not parse as one'}). "
            f"{fix}"))
    if read != sha:
        return ReceiptProblem("receipt_mismatch", (
            f"{where}: the receipt at {url} is for artifact {read}, but the {claim.kind} artifact in stack config "
            f"hashes to {sha}: the figures were edited after the run or the receipt was copied from another one. "
            f"{fix}"))
    return None
