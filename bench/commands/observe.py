"""``bench observe``: calibrate a deployed plan against the endpoint's CloudWatch history."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from container import telemetry

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from bench.errors import UsageError
from bench.report.terminal import render_calibration
from speech.errors import ArtifactError

DESCRIPTION = """\
Calibrate: read the deployed endpoint's CloudWatch history over a window and compare what
happened with what the plan promised. Read-only: it recommends, it never changes the stack.

  latency     per occupancy level (container EMF ConcurrentRequests), the container's TTFABp95
              vs the qmax ladder the plan was built from at that concurrency, and vs the SLO at
              or below C_scale_max
  rejections  the gate's 503s (EMF Rejected / Admitted) vs what the plan's surge finding expects
  scaling     Application Auto Scaling activities: flaps and actions closer than the cooldowns

Verdict `holds`, or `drifted` with recommendations; where the fix is a new plan, the exact
`bench plan` command (e.g. --qmax-derate 0.9 until re-measured). The qmax and ttotal artifacts
the plan was built from are found by their sha256 in --artifacts (or pass --qmax/--ttotal).
Writes calibration-<model>-<endpoint>-<time>.json into --out.

  python -m bench observe --plan artifacts/plan-kokoro-82m.json --endpoint dev-kokoro-82m --since 1d
  python -m bench observe --plan plan.json --endpoint dev-kokoro-82m --since 1h --json

Exit 0 holds, 1 drifted, 2 bad input or no data in the window (nothing written).
"""

EMF_NAMESPACE = telemetry.NAMESPACE
"""The container's embedded-metric namespace, dimensions EndpointName, VariantName, Model."""
PERIOD_S = 60
"""EMF metrics are standard resolution: one-minute periods (kept 15 days by CloudWatch)."""
MAX_WINDOW = timedelta(days=15)
UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path, metavar="FILE", help="plan artifact (bench plan) that is deployed")
    p.add_argument("--endpoint", required=True, metavar="NAME", help="SageMaker endpoint the plan is deployed on")
    p.add_argument("--since", default="1h", metavar="1h|1d|1w",
                   help="window ending now: N followed by m, h, d or w (at most 15 days; default 1h)")
    p.add_argument("--qmax", type=Path, metavar="FILE", help="the qmax artifact the plan was built from (default: found in --artifacts)")
    p.add_argument("--ttotal", type=Path, metavar="FILE", help="the ttotal artifact (default: found in --artifacts)")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), metavar="DIR",
                   help="where to look for them by sha256 (default artifacts/, searched recursively)")
    p.add_argument("--stack", metavar="NAME",
                   help="add --stack NAME to the recommended bench plan command; its aws:region is the default region")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml lives (default .)")
    p.add_argument("--emf-model", metavar="NAME", help="Model dimension of the container's metrics (default: the plan's model)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="where the calibration artifact goes")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: --stack's aws:region, else the environment's)")
    p.add_argument("--json", action="store_true", help="print the calibration artifact as JSON")


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
    from speech.files import load_artifact
    from speech.schema.artifacts import canonical_sha256

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


def run(args: argparse.Namespace, session: Any = None, now: datetime | None = None) -> int:
    from bench.aws import client as aws
    from bench.aws.history import read_scaling_activities, read_window
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

    span = parse_since(args.since)
    plan = load_artifact(args.plan, PlanArtifact)
    qmax_path = find_by_sha(args.qmax, args.artifacts, QmaxArtifact, plan.inputs.qmax_sha256, "--qmax")
    if qmax_path is None:
        raise UsageError(f"no qmax artifact with sha256 {plan.inputs.qmax_sha256[:19]}... (the plan's ladder) under "
                         f"{args.artifacts}; pass --qmax FILE")
    qmax = load_artifact(qmax_path, QmaxArtifact)
    ttotal_path = find_by_sha(args.ttotal, args.artifacts, TtotalArtifact, plan.inputs.ttotal_sha256, "--ttotal")
    ttotal_arg = str(ttotal_path) if ttotal_path else f"<ttotal artifact {plan.inputs.ttotal_sha256[:19]}>"

    from speech.stack.read import command_region

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
    if args.json:
        print(artifact.model_dump_json(indent=2))
    else:
        print(render_calibration(artifact))
        print(f"\nwrote {out}")
    sys.stdout.flush()
    from bench.report.runs import observe_report

    args._report = observe_report(artifact)
    return 0 if verdict == "holds" else 1

