"""Write a measurement receipt to the stack's provenance bucket (see :mod:`speech.deploy.receipts`)."""

from __future__ import annotations

from typing import Any

from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.receipts import Receipt, receipt_for, receipt_key

from bench.errors import BenchError


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
