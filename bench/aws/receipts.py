"""Write a measurement receipt to the stack's provenance bucket (see :mod:`speech.deploy.receipts`),
or say after a run why none was written (:func:`leave_receipt`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.errors import BenchError, UsageError
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.receipts import Receipt, receipt_for, receipt_key


def write_receipt(session: Any, bucket: str, artifact: QmaxArtifact | TtotalArtifact) -> tuple[str, Receipt]:
    """Put the receipt under a key named by the artifact's sha256, only if that key is new
    (``IfNoneMatch: *``: a receipt is never overwritten; the bucket is versioned besides)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        ident = session.client("sts").get_caller_identity()
        receipt = receipt_for(artifact, caller_arn=ident["Arn"], caller_account=ident["Account"])
        key = receipt_key(artifact.model, artifact.kind, receipt.artifact_sha256)
        session.client("s3").put_object(Bucket=bucket, Key=key, Body=receipt.model_dump_json(indent=2).encode(),
                                        ContentType="application/json", IfNoneMatch="*")
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise BenchError(f"s3://{bucket}/{key} already exists: a receipt is never overwritten") from None
        raise BenchError(f"cannot write the receipt to s3://{bucket}: {code or err}; the artifact is written: "
                         f"re-run with access to the bucket (s3:PutObject, sts:GetCallerIdentity)") from None
    except BotoCoreError as err:
        raise BenchError(f"cannot write the receipt to s3://{bucket}: {err}") from None
    return key, receipt


def leave_receipt(args: argparse.Namespace, session: Any, artifact: QmaxArtifact | TtotalArtifact) -> int:
    """After a SageMaker run: write its receipt when --receipt-bucket names the bucket, else say
    that the preview will ask for one. ``session``: the SageMaker target's boto3 session; None for
    a local run, which takes no receipt."""
    if session is None:
        if getattr(args, "receipt_bucket", None):
            raise UsageError("--receipt-bucket: a local run takes no receipt (only SageMaker measurements deploy)")
        return 0
    if not args.receipt_bucket:
        print(f"no receipt written (no --receipt-bucket): measured {artifact.kind} figures scale only with a receipt; "
              "re-run with --receipt-bucket <the stack's provenance bucket>", file=sys.stderr)
        return 0
    key, _ = write_receipt(session, args.receipt_bucket, artifact)
    print(f"receipt s3://{args.receipt_bucket}/{key}", file=sys.stderr)
    return 0
