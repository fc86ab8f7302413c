"""The measurement receipts, read at preview through pulumi-aws's S3 data sources, and the gate
that waits for them (docs/design.md §5; the receipts themselves: :mod:`speech.schema.receipts`).

The reads use the provider functions' plain form (``aws.s3.get_objects``, ``aws.s3.get_object``)
inside an ``apply`` on the bucket, for two reasons:

- a read that fails (no such bucket, another account's, another region's, access denied) must be
  no receipt, with the provider's error as the gate's reason, not a failed preview; the plain form
  raises where it is called, here, while the output form (``get_object_output``) is an Output the
  runtime awaits at the end of the program, so its failure fails the whole program;
- a bucket this update creates does not exist at preview: the program's own bucket is handed in
  as its id (:func:`bucket_once_created`), unknown until the bucket exists, so the read waits for
  it and the gate stays unknown until ``pulumi up`` (what the engine answers a data source whose
  inputs are pending creation), instead of reading a bucket that is not there yet.
"""

from __future__ import annotations

from collections.abc import Callable

import pulumi
import pulumi_aws as aws

from speech.deploy.gate import GateDecision, ModelDeployment, with_receipts
from speech.deploy.receipts import ReceiptClaim, read_receipt, receipt_problem
from speech.schema.receipts import NO_RECEIPT, RECEIPT_TAGS

ReceiptRead = tuple[str, str | None, str]
"""(what the receipt tag records: the receipt's sha256 or a NO_RECEIPT/NOT_A_RECEIPT marker, why it
is no receipt or None, the bucket it was read from)."""


def bucket_once_created(bucket: aws.s3.Bucket) -> pulumi.Output[str]:
    """The bucket's name, known only once the bucket exists: an S3 bucket's id is its name, and a
    resource's id is unknown in the preview that creates it."""
    return bucket.id


def read_receipt_object(claim: ReceiptClaim, bucket: pulumi.Input[str]) -> pulumi.Output[ReceiptRead]:
    """One claim's receipt, read in the artifact's own region: the key is listed first
    (``getObject`` on a missing key fails, while a missing receipt must only keep scaling off with
    its fix), then read. A read that fails is no receipt, with the provider's error as the reason."""
    region = claim.artifact.provenance.region or None
    key = claim.key
    assert key is not None  # read_receipts answers a claim without a key itself

    def read(name: str) -> ReceiptRead:
        try:
            listed = aws.s3.get_objects(bucket=name, prefix=key, region=region)
            if key not in (listed.keys or []):
                return NO_RECEIPT, None, listed.bucket
            found = aws.s3.get_object(bucket=listed.bucket, key=key, region=region)
            return (*read_receipt(found.body, claim), listed.bucket)
        except Exception as err:  # noqa: BLE001  the SDK raises a failed data source as a plain Exception
            return NO_RECEIPT, f"the read failed: {err}", name

    return pulumi.Output.from_input(bucket).apply(read)


def read_receipts(claims: list[ReceiptClaim], own_bucket: pulumi.Input[str]) -> dict[str, pulumi.Output[ReceiptRead]]:
    """Per artifact kind, its :data:`ReceiptRead`, from the claim's bucket or else ``own_bucket``
    (the stack's provenance bucket, :func:`bucket_once_created`). While that bucket is still to be
    created (a new stack's first preview) the read is unknown."""
    reads: dict[str, pulumi.Output[ReceiptRead]] = {}
    for claim in claims:
        bucket = claim.bucket or own_bucket
        if claim.key is None:
            reads[claim.kind] = pulumi.Output.from_input(bucket).apply(lambda b: (NO_RECEIPT, None, b))
            continue
        reads[claim.kind] = read_receipt_object(claim, bucket)
    return reads


def gate_after_receipts(dep: ModelDeployment, claims: list[ReceiptClaim], reads: dict[str, pulumi.Output[ReceiptRead]],
                        tags: dict, scale: Callable[[GateDecision, dict], GateDecision]
                        ) -> GateDecision | pulumi.Output[GateDecision]:
    """Call ``scale`` with the final gate: the config gate, then every receipt (read from the
    bucket) matching its artifact. With receipts to read, scaling is created once they have been
    read (at preview for an existing bucket; at up for one created in the same update), tagged with
    what was read for the pack; without, at once."""
    if not (dep.gate.enabled and reads):
        return scale(dep.gate, tags)
    cfg = dep.config

    def decide(values: dict[str, ReceiptRead]) -> GateDecision:
        problems = [p for c in claims if (p := receipt_problem(
            dep.name, c, values[c.kind][0], bucket=values[c.kind][2], stack=pulumi.get_stack(),
            inputs=cfg.plan, max_instances=cfg.max_instances, why=values[c.kind][1]))]
        plain = {**{k: v for k, v in tags.items() if k not in RECEIPT_TAGS.values()},
                 **{RECEIPT_TAGS[k]: v[0] for k, v in values.items()}}
        return scale(with_receipts(dep.gate, problems), plain)

    return pulumi.Output.all(**reads).apply(decide)
