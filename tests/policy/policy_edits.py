"""Edits a user could make to a stack, applied to the resources the engine would send."""

from __future__ import annotations

from typing import Any

from policy.harness import Resource


def named(resources: list[Resource], name: str) -> Resource:
    for r in resources:
        if r.name == name:
            return r
    raise KeyError(name)


def set_path(resource: Resource, path: str, value: Any) -> None:
    cur: Any = resource.props
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    last = parts[-1]
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value


def messages(report, policy: str, level: str | None = None) -> list[str]:
    return [d.message for d in report.of(policy) if level is None or d.level == level]


def with_evidence(entry: dict[str, Any], endpoint: str, region: str = "us-east-1") -> dict[str, Any]:
    """A stack config model entry whose artifacts carry what bench qmax / bench ttotal write for
    a run on SageMaker endpoint ``endpoint``: origin measured, tool, version, target, times."""
    m = entry["measurements"]
    for kind in ("qmax", "ttotal"):
        m[kind]["provenance"] = {
            "origin": "measured", "source": f"bench {kind}", "tool": f"bench {kind}", "tool_version": "0.1.0",
            "target": f"sagemaker:{endpoint}", "region": region, "measured_at": "2026-01-01T10:00:00Z",
            "ended_at": "2026-01-01T10:30:00Z",
        }
    m["qmax"]["client_overhead"] = {"loop_lag_p99_ms": 1.2, "cpu_fraction": 0.08}
    return entry


def with_receipt_keys(entry: dict[str, Any]) -> dict[str, Any]:
    """Record each measured SageMaker artifact's receipt key, as ``bench plan --stack`` does."""
    from speech.deploy.receipts import receipt_claims
    from speech.schema.config import Measurements

    m = entry["measurements"]
    for claim in receipt_claims(Measurements.model_validate({"qmax": m["qmax"], "ttotal": m["ttotal"]})):
        m[f"{claim.kind}_receipt"] = claim.expected_key
    return entry


def receipts_of(entry: dict[str, Any]) -> dict[str, str]:
    """The receipts bench would have written for the entry's measured SageMaker artifacts, by key
    (what the offline preview's S3 data sources then find)."""
    from speech.deploy.receipts import receipt_claims
    from speech.schema.config import Measurements
    from speech.schema.receipts import receipt_for

    m = entry["measurements"]
    claims = receipt_claims(Measurements.model_validate({"qmax": m["qmax"], "ttotal": m["ttotal"]}))
    return {c.expected_key: receipt_for(c.artifact, caller_arn="arn:aws:iam::123456789012:user/bench",
                                        caller_account="123456789012").model_dump_json() for c in claims}
