"""Rebuild the reference artifacts from the public figures below (source: docs/design.md §3.7).

These describe someone else's endpoint (provenance ``reference``): fixtures and a worked example,
never a substitute for measuring your own. Run: ``python artifacts/reference/build.py``.

``--model NAME --out DIR`` writes the same figures for another route of a stack that serves the
same image on the same instance type (examples/Pulumi.multi.yaml): the artifact carries that
model name, keeps origin ``reference`` and says in its source that the figures are the reference
run's, applied to that route.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from speech.files import write_artifact
from speech.schema.artifacts import (
    Fingerprint,
    LadderLevel,
    Phase,
    Provenance,
    QmaxArtifact,
    RequestMix,
    ServiceTime,
    Slo,
    TtotalArtifact,
    qmax_filename,
    ttotal_filename,
)

SOURCE = "aws-samples/sample-kokoro-tts-for-ai-agents (committed artifacts and blog post), public figures"
FINGERPRINT = Fingerprint.of(
    "ml.g5.xlarge", "sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"
)
SLO_MS = 3000.0
MEASURE_S = 60.0

# concurrency, completed, ok, errors, p50, p95, p99, throughput rps
LADDER = [
    (1, 965, 965, 0, 60.0, 65.4, 68.5, 16.08),
    (5, 1074, 1074, 0, 278.0, 286.2, 290.0, 17.90),
    (10, 1075, 1075, 0, 554.9, 568.5, 573.5, 17.92),
    (20, 1075, 1075, 0, 1112.1, 1129.3, 1137.1, 17.92),
    (30, 1074, 1074, 0, 1674.2, 1689.8, 1700.7, 17.90),
    (40, 1073, 1073, 0, 2235.3, 2245.0, 2247.9, 17.88),
    (50, 1072, 1072, 0, 2793.5, 2805.7, 2840.5, 17.87),
    (60, 1074, 1073, 1, 3353.9, 3374.8, 3404.0, 17.90),
]

# name, offset from desired_set (s), source, bounded
PHASES = [
    ("desired_set", 0.0, "UpdateEndpointWeightsAndCapacities call", False),
    ("instance_logging", 180.835, "new log stream's first event", True),
    ("container_started", 184.559, "derived from the first marker's elapsed time", True),
    ("framework_init", 184.573, "container log marker", False),
    ("weights_ready", 191.048, "container log marker", False),
    ("warmup_done", 192.094, "container log marker", False),
    ("ready", 192.094, "container log marker", False),
    ("in_service", 212.808, "DescribeEndpoint CurrentInstanceCount", False),
    ("traffic_recovered", 260.248, "client p95 back near its pre-surge level for 60 s", True),
]
# The published reaction bound (10 s x 3 datapoints + 30 s cooldown = 60 s) is what the plan
# computes from its own reaction policy (speech.plan.realtime.planning_t_total); the artifact keeps only
# what was measured.
# The figures carry no wall-clock date; a fixed one keeps the artifacts reproducible.
T0 = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def source_for(model: str) -> str:
    """The provenance source: the public figures, and for another route, that they were applied to it."""
    if model == "kokoro-82m":
        return SOURCE
    return (f"{SOURCE}; the reference run's figures applied to route {model!r}, which serves the same image on "
            "the same instance type (not measured on it)")


def reference_qmax(model: str = "kokoro-82m") -> QmaxArtifact:
    ladder = [
        LadderLevel(
            concurrency=c,
            completed=done,
            ok=ok,
            rejected=0,
            errors=err,
            ttfab_p50_ms=p50,
            ttfab_p95_ms=p95,
            ttfab_p99_ms=p99,
            throughput_rps=x,
            client_concurrency_mean=float(c),
            cloudwatch_concurrency_max=float(c),
            meets_slo=p95 <= SLO_MS,
            measure_s=MEASURE_S,
        )
        for c, done, ok, err, p50, p95, p99, x in LADDER
    ]
    return QmaxArtifact(
        model=model,
        transport="stream",
        fingerprint=FINGERPRINT,
        slo=Slo(ttfab_p95_ms=SLO_MS),
        ladder=ladder,
        q_max=50,
        bracketed=True,
        first_failing_concurrency=60,
        service_time=ServiceTime(mean_ms=61.3, p95_ms=66.1),
        instances=1,  # "one instance, autoscaling frozen"
        cloudwatch_ratio=1.0,  # ConcurrentRequestsPerModel / client in-flight, read at every level
        cloudwatch_ratio_source="measured",
        request_mix=RequestMix(name="short-utterances", chars_min=20, chars_mean=25.0, chars_max=30, count=1),
        provenance=Provenance(origin="reference", source=source_for(model), measured_at=T0),
    )


def reference_ttotal(model: str = "kokoro-82m") -> TtotalArtifact:
    phases = [
        Phase(name=n, at=T0 + timedelta(seconds=off), offset_s=off, source=src, bounded=b)
        for n, off, src, b in PHASES
    ]
    measured = 260.248
    return TtotalArtifact(
        model=model,
        trigger="forced-desired",
        transport="stream",
        fingerprint=FINGERPRINT,
        phases=phases,
        measured_total_s=measured,
        provenance=Provenance(origin="reference", source=source_for(model), measured_at=T0),
    )


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="kokoro-82m", help="model (route) name the artifacts carry (default kokoro-82m)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="where to write them")
    args = p.parse_args(argv)
    q, t = reference_qmax(args.model), reference_ttotal(args.model)
    for art, name in ((q, qmax_filename(q)), (t, ttotal_filename(t))):
        print(write_artifact(args.out / name, art))


if __name__ == "__main__":
    main()
