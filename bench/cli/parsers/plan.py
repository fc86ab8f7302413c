"""``bench plan``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Turn measured artifacts into autoscaling numbers with zero AWS calls.

The default plan (no tuned values; speech/plan/formulas.py):
  h = surge_ratio - 1 (< 0.5); Q_max = floor(measured Q_max x --qmax-derate)
  lambda_SLO = the highest Poisson rate per instance whose share within the SLO (refusals at the
    gate count as misses) is >= --slo-share, on the gated chain: gate at Q_max, departures X(n)
    from the ladder, TTFAB quantiles per level
  C_scale_max = min((1-h) x Q_max, mean in flight at lambda_SLO)   (the surge rule or the SLO share)
  C_scale_min = C_scale_max x (1-2h) / (1-h)   (= (1-2h) x Q_max when the surge rule sets C_scale_max)
  CloudWatch target / scale-in threshold = C_scale_max / C_scale_min x the measured CloudWatch ratio
  per-instance rate = min(rate holding C_scale_max in flight on that chain, X(C_scale_max))
  max_instances = ceil(peak / per-instance rate); min_instances = max(--min-instances,
    ceil(trough / per-instance rate))
  T_total (planning) = measured T_total + metric period x datapoints to alarm + scale-out cooldown
  cooldowns: out clamp(measured T_total / 2, 10, 30) s, in max(300, 3 x planning T_total) s
  scale-in step = 1 - surge_ratio x C_scale_min / C_scale_max of the fleet (at most
    1 - C_scale_min / C_scale_max), after ceil(300 s / period) periods at or below C_scale_min
  surge survival: P(an instance at C_scale_max reaches Q_max within T_total) on the exact chain
--target-share, --scale-in-* and the cooldown flags replace a seed value (bench tune finds them).

Writes plan-<model>.json into --out; with --stack NAME also writes the inputs and the artifacts
into Pulumi.NAME.yaml (other keys kept): each artifact by path and sha256, the file committed
under artifacts/ (copied there when it lies outside the repository). A re-plan keeps the
inputs stored in the entry unless a flag overrides them, and prints what changed.
Exit 0 ok/warn, 1 stop finding, 2 bad input.

A batch route (--max-delay-s S): an asynchronous endpoint scaled on its backlog down to zero.
  throughput per instance X = ladder throughput at Q_max; MaxConcurrentInvocationsPerInstance = Q_max
  backlog target per instance = floor(X x (S - cold start)), cold start = 120 s wake + T_total
  instances at peak = ceil(peak / X), min 0
Writes batch-plan-<model>.json (and, with --stack, the entry as priority batch, hosting async).

Several models: `bench plan --stack NAME` alone re-plans every model of Pulumi.NAME.yaml from
the measurements it references, under the stack's daily budget (speech-endpoints:budget:
critical models at their peak, standard capped with a warning, batch gets the rest), and writes
plan-<model>.json for each plus budget-NAME.json (the allocation).

Stack files whose artifacts are embedded (the earlier form) still load, with a warning:
`bench plan --stack NAME --migrate-config` rewrites them as references.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", type=Path, metavar="FILE",
                   help="qmax artifact (bench qmax); without --qmax/--ttotal/--peak-rps, --stack NAME re-plans every model")
    p.add_argument("--ttotal", type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--peak-rps", type=float, metavar="N", help="busiest-hour requests/s")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N",
                   help="quietest-hour requests/s (default: the stack entry's, else 1, or peak if lower)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS",
                   help="p95 TTFAB SLO (default: the stack entry's, else the SLO the ladder was judged by)")
    p.add_argument("--surge-ratio", type=float, default=None, metavar="X",
                   help="growth absorbed within one scale-out (default: the stack entry's, else 1.25)")
    p.add_argument("--min-instances", type=int, default=None, metavar="N",
                   help="instance floor (default: the stack entry's, else 1)")
    p.add_argument("--max-instances", type=int, default=None, metavar="N",
                   help="hard cap on the fleet, a stop finding when below the need (default: the stack entry's, else none)")
    p.add_argument("--qmax-derate", type=float, default=None, metavar="X",
                   help="plan with floor(measured Q_max x X), 0 < X <= 1, until the endpoint is re-measured "
                        "(bench observe recommends it when the deployed endpoint is slower than its ladder; default: "
                        "the stack entry's, else 1)")
    p.add_argument("--max-delay-s", type=float, default=None, metavar="S",
                   help="plan a batch route: an asynchronous endpoint whose requests may take up to S seconds from "
                        "submission to their response in S3, a cold start from zero included (writes batch-plan-<model>.json)")
    t = p.add_argument_group("tuned values (bench tune searches them; unset: the seed formula, printed next to them)")
    t.add_argument("--slo-share", type=float, default=None, metavar="X",
                   help="share of requests the fleet is sized to answer within the SLO, refused ones missed (default 0.995)")
    t.add_argument("--target-share", type=float, default=None, metavar="X",
                   help="scale-out target as a share of Q_max, at most 1 - h (default: min(1 - h, the SLO-share occupancy))")
    t.add_argument("--scale-in-step-share", type=float, default=None, metavar="X",
                   help="share of the fleet one scale-in step removes, at most 1 - C_scale_min/C_scale_max "
                        "(default 1 - surge x C_scale_min/C_scale_max)")
    t.add_argument("--scale-in-window-s", type=int, default=None, metavar="S",
                   help="seconds at or below C_scale_min before a step (default 300, at least 3 metric periods)")
    t.add_argument("--scale-in-cooldown-s", type=int, default=None, metavar="S",
                   help="seconds between scale-in steps, at least max(window, planning T_total) (default max(300, 3 T_total))")
    t.add_argument("--scale-out-cooldown-s", type=int, default=None, metavar="S",
                   help="target tracking's scale-out cooldown, metric period .. max(30, T_total) (default clamp(T/2, 10, 30))")
    t.add_argument("--reason", action="append", default=[], metavar="NAME=WHY",
                   help="why a tuned value differs from its seed (recorded and printed next to it); repeatable")
    t.add_argument("--promise", type=Path, default=None, metavar="FILE",
                   help="the simulated promise (SLO share, rejected share, instance-hours, cost vs floor, trace sha256, "
                        "seed, simulator version): bench tune's tune-<model>-<trace>.json, the tuned plan it wrote, or "
                        "the promise's JSON alone; without it the plan is advisory")
    sch = p.add_argument_group("scheduled floors")
    sch.add_argument("--schedule-from", metavar="TRACE",
                     help="derive daily floors from your traffic: a trace spec as for bench simulate (csv:PATH, "
                          "diurnal:..., azure-conv); each ramp's need is in service one planning T_total ahead")
    sch.add_argument("--schedule-timezone", default="UTC", metavar="TZ",
                     help="IANA time zone of the trace's clock and of the schedule (default UTC)")
    sch.add_argument("--schedule-start", default="00:00", metavar="HH:MM",
                     help="time of day of the trace's first second (default 00:00)")
    sch.add_argument("--floors-from", type=Path, default=None, metavar="FILE",
                     help="the scheduled floors of a forecast artifact (bench forecast), with its provenance: the policy pack "
                          "refuses them at preview once the forecast is past its horizon")
    sch.add_argument("--schedule-slot-min", type=int, default=30, metavar="MIN",
                     help="slot length in minutes, dividing a day (default 30: at most 48 floors)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="where plan-<model>.json goes (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the plan artifact as JSON instead of the report")
    p.add_argument("--allow-config-mismatch", action="store_true", help="plan artifacts of different fingerprints (warn finding)")
    p.add_argument("--stack", metavar="NAME",
                   help="write the inputs and the artifacts (by path and sha256) into Pulumi.NAME.yaml; NAME, ORG/NAME "
                        "or ORG/PROJECT/NAME. A re-plan keeps the entry's stored inputs unless a flag overrides them")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                   help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    p.add_argument("--migrate-config", action="store_true",
                   help="with --stack NAME alone: rewrite artifacts embedded in the stack file as references (path and "
                        "sha256), writing each under artifacts/ unless the same artifact is already there")
    p.add_argument("--image", metavar="REPO@sha256:...",
                   help="existing ECR image for the stack entry, <account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:... "
                   "(default: keep the entry's image; none: the program builds container/Dockerfile)")
    p.add_argument("--tcopy", type=Path, metavar="FILE",
                   help="with --stack: the copy artifact (bench tcopy); the entry becomes hosting: components, --qmax "
                        "being the ladder against one copy (bench copies shows the copy plan)")
    p.add_argument("--hpa", type=Path, metavar="FILE", help="with --stack: store the HPA bench tune --platform kubernetes "
                   "found (target and minReplicas as plan inputs, its scale-down as kubernetes.scale_down); alone with "
                   "--stack NAME: re-plans that model's entry from its stored measurements and peak")
    p.add_argument("--instance-type", metavar="TYPE", help="SageMaker instance type for the stack entry when the artifacts were "
                   "measured locally (the program and the policy pack then see the fingerprint differ)")
