"""The plan's findings about its measurements: both artifacts from the same instance and image, their
origin, the CloudWatch ratio, the instances the ladder ran on, a derated Q_max (docs/design.md §3)."""

from __future__ import annotations

from speech.errors import FingerprintMismatch
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.plan_artifacts import (
    Finding,
)


def finding_fingerprint(q: QmaxArtifact, t: TtotalArtifact, allow_mismatch: bool) -> Finding:
    if q.fingerprint == t.fingerprint:
        return Finding(
            name="fingerprint", level="ok", message=f"qmax and ttotal both measured on {q.fingerprint.slug}"
        )
    msg = (
        f"qmax was measured on {q.fingerprint.slug} ({q.fingerprint.instance_type}, "
        f"{q.fingerprint.image_digest[:19]}) but ttotal on {t.fingerprint.slug} ({t.fingerprint.instance_type}, "
        f"{t.fingerprint.image_digest[:19]})"
    )
    if not allow_mismatch:
        raise FingerprintMismatch(
            f"{msg}; measure both on the same instance type and image, or pass --allow-config-mismatch"
        )
    return Finding(name="fingerprint", level="warn", message=f"{msg}; planned anyway (--allow-config-mismatch)")


def finding_provenance(q: QmaxArtifact, t: TtotalArtifact) -> Finding:
    origins = {q.provenance.origin, t.provenance.origin}
    if origins == {"measured"}:
        return Finding(name="provenance", level="ok", message="both artifacts were measured on this endpoint")
    return Finding(
        name="provenance",
        level="warn",
        message=f"artifact origins are qmax={q.provenance.origin}, ttotal={t.provenance.origin}: these are not "
        "measurements of your endpoint; run bench qmax and bench ttotal before deploying scaling",
    )


def finding_cloudwatch_ratio(q: QmaxArtifact) -> Finding:
    """The ratio converts client in-flight into ConcurrentRequestsPerModel, the unit of every
    deployed threshold; assumed (CloudWatch never covered a level) is a warn on SageMaker."""
    covered = sum(lv.cloudwatch_concurrency_max is not None for lv in q.ladder)
    if q.cloudwatch_ratio_source == "measured":
        return Finding(
            name="cloudwatch_ratio",
            level="ok",
            message=f"CloudWatch/client ratio {q.cloudwatch_ratio:g} measured on {covered} of {len(q.ladder)} levels: "
            "thresholds in CloudWatch units = client units x ratio",
        )
    if q.cloudwatch_ratio_source == "assumed" and q.fingerprint.instance_type.startswith("ml."):
        where = q.provenance.target or q.fingerprint.slug
        return Finding(
            name="cloudwatch_ratio",
            level="warn",
            message=f"CloudWatch/client ratio assumed 1.0: ConcurrentRequestsPerModel never covered a level of the "
            f"ladder on {where}, so scaling_target_value and the alarm thresholds (CloudWatch units) may not sit at "
            "C_scale_max; re-run bench qmax with a longer --cloudwatch-wait-s, or check with bench validate --live",
        )
    return Finding(
        name="cloudwatch_ratio",
        level="ok",
        message=f"CloudWatch/client ratio {q.cloudwatch_ratio:g} ({q.cloudwatch_ratio_source.replace('_', ' ')}: "
        "measured without CloudWatch)",
    )


def finding_instances(q: QmaxArtifact) -> Finding:
    """Q_max is per instance only when the ladder ran on one instance."""
    if q.instances == 1:
        return Finding(name="qmax_instances", level="ok", message="the ladder ran on one instance")
    if q.instances is None:
        return Finding(
            name="qmax_instances",
            level="warn",
            message="the qmax artifact does not record how many instances served the ladder (schema 1): on N "
            "instances its Q_max is N x the per-instance value; re-measure with bench qmax (it pins one instance)",
        )
    return Finding(
        name="qmax_instances",
        level="stop",
        message=f"the ladder ran on {q.instances} instances: Q_max {q.q_max} is the fleet's, about {q.instances}x "
        "what one instance holds; re-measure with bench qmax (it pins the endpoint to one instance)",
    )


def finding_derate(measured: int, planned: int, qmax_derate: float) -> Finding:
    if qmax_derate >= 1.0:
        return Finding(name="qmax_derate", level="ok", message=f"planned with the measured Q_max {measured}")
    return Finding(
        name="qmax_derate",
        level="warn",
        message=f"planned with Q_max {planned} = floor({measured} x {qmax_derate:g}) until the endpoint is "
        "re-measured (bench qmax, bench ttotal), then plan without --qmax-derate",
    )
