"""``bench observe``'s calibration, the one function the command calls (:func:`observe_endpoint`):
the deployed endpoint's CloudWatch history over a window (the container's EMF occupancy and
latency, admissions and refusals, Application Auto Scaling's activities) held against the plan it
runs, findings and recommendations, the calibration artifact written. Read-only."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.aws import client as aws
from bench.aws.history import read_scaling_activities, read_window
from bench.errors import UsageError
from container import telemetry
from speech.errors import ArtifactError
from speech.files import load_artifact, write_artifact
from speech.plan.calibration import (
    finding_latency,
    finding_promise,
    finding_rejections,
    finding_scaling,
    occupancy_checks,
    pair_by_period,
    recommendations,
    rejection_check,
    scaling_check,
    scaling_events,
)
from speech.schema.artifacts import Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.plan_artifacts import CalibrationArtifact, PlanArtifact, calibration_filename
from speech.stack.read import command_region

EMF_NAMESPACE = telemetry.NAMESPACE
"""The container's embedded-metric namespace, dimensions EndpointName, VariantName, Model."""
PERIOD_S = 60
"""EMF metrics are standard resolution: one-minute periods (kept 15 days by CloudWatch)."""
MAX_WINDOW = timedelta(days=15)
UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str) -> timedelta:
    m = re.fullmatch(r"(\d+)([mhdw])", text.strip())
    if not m or int(m.group(1)) == 0:
        raise UsageError(f"--since {text!r}: use N followed by m, h, d or w, e.g. 1h, 1d, 1w")
    span = timedelta(seconds=int(m.group(1)) * UNITS[m.group(2)])
    if span > MAX_WINDOW:
        raise UsageError(f"--since {text}: at most 15 days (CloudWatch keeps one-minute data 15 days); e.g. 1w")
    return span


def find_by_sha(explicit: Path | None, root: Path, cls: type[QmaxArtifact] | type[TtotalArtifact], sha: str, flag: str) -> Path | None:
    """The artifact whose canonical sha256 is ``sha``: ``explicit`` must match it; otherwise the
    first match under ``root``, or None."""

    if explicit is not None:
        art = load_artifact(explicit, cls)
        if canonical_sha256(art) != sha:
            raise UsageError(f"{flag} {explicit}: its sha256 {canonical_sha256(art)[:19]} is not the one the plan was "
                             f"built from ({sha[:19]}); pass the artifact the plan names")
        return explicit
    kind = cls.model_fields["kind"].default
    for path in sorted(root.rglob(f"{kind}-*.json")) if root.is_dir() else []:
        try:
            if canonical_sha256(load_artifact(path, cls)) == sha:
                return path
        except ArtifactError:
            continue
    return None


def observe_endpoint(args: argparse.Namespace, session: Any = None,
                     now: datetime | None = None) -> tuple[CalibrationArtifact, Path]:
    """Read the endpoint's CloudWatch history over ``--since`` and hold it against the plan, for the
    parsed flags of ``bench observe``; the calibration artifact and where it was written."""
    span = parse_since(args.since)
    plan = load_artifact(args.plan, PlanArtifact)
    qmax_path = find_by_sha(args.qmax, args.artifacts, QmaxArtifact, plan.inputs.qmax_sha256, "--qmax")
    if qmax_path is None:
        raise UsageError(f"no qmax artifact with sha256 {plan.inputs.qmax_sha256[:19]}... (the plan's ladder) under "
                         f"{args.artifacts}; pass --qmax FILE")
    qmax = load_artifact(qmax_path, QmaxArtifact)
    ttotal_path = find_by_sha(args.ttotal, args.artifacts, TtotalArtifact, plan.inputs.ttotal_sha256, "--ttotal")
    ttotal_arg = str(ttotal_path) if ttotal_path else f"<ttotal artifact {plan.inputs.ttotal_sha256[:19]}>"

    sess = session or aws.session(command_region(args.region, args.stack, getattr(args, "stack_dir", Path(".")),
                                                 must_exist=False))
    aws.describe_endpoint(sess, args.endpoint)
    end = (now or datetime.now(UTC)).replace(microsecond=0)
    end = end - timedelta(seconds=end.timestamp() % PERIOD_S)
    start = end - span
    model_dim = telemetry.dimensions(args.endpoint, telemetry.DEFAULT_VARIANT, args.emf_model or plan.model)

    occupancy, p95, admitted, rejected = read_window(sess, EMF_NAMESPACE, model_dim, PERIOD_S, start, end)
    activities, read, why = read_scaling_activities(sess, args.endpoint, start)
    if not occupancy and not p95 and admitted + rejected == 0 and not activities:
        raise UsageError(
            f"no data for {args.endpoint} between {start:%Y-%m-%d %H:%M} and {end:%H:%M} UTC (--since {args.since}): no "
            f"{EMF_NAMESPACE} metrics for Model={model_dim['Model']} and no scaling activity; is the endpoint serving "
            "traffic and is the container's EMF reaching CloudWatch? widen --since, or check --emf-model; nothing written"
        )

    checks = occupancy_checks(pair_by_period(occupancy, p95), qmax, plan.inputs.slo_ms, plan.thresholds.c_scale_max)
    rej = rejection_check(admitted, rejected, plan)
    scale = scaling_check(scaling_events(activities), plan, read=read)
    findings = [
        finding_latency(checks, plan.inputs.slo_ms, plan.thresholds.c_scale_max),
        finding_rejections(rej, plan),
        finding_scaling(scale, plan, why),
    ]
    if plan.promise is not None:
        findings.append(finding_promise(rej, plan))
    verdict = "holds" if all(f.level == "ok" for f in findings) else "drifted"
    recs = recommendations(findings, scale, plan, str(qmax_path), ttotal_arg, args.endpoint, args.stack)
    artifact = CalibrationArtifact(
        model=plan.model, endpoint=args.endpoint, since=args.since, window_start=start, window_end=end, period_s=PERIOD_S,
        plan_sha256=canonical_sha256(plan), qmax_sha256=plan.inputs.qmax_sha256, fingerprint=plan.fingerprint,
        slo_ms=plan.inputs.slo_ms, q_max=plan.q_max, c_scale_max=plan.thresholds.c_scale_max, occupancy=checks,
        rejections=rej, scaling=scale, findings=findings, verdict=verdict, recommendations=recs,
        provenance=Provenance(origin="measured", source=f"bench observe: CloudWatch {EMF_NAMESPACE} and Application Auto "
                              f"Scaling activities, {args.since} to {end:%Y-%m-%dT%H:%M}Z", measured_at=end,
                              tool="bench observe", target=f"sagemaker:{args.endpoint}"),
    )
    out = write_artifact(args.out / calibration_filename(artifact), artifact)
    return artifact, out
