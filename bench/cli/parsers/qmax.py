"""``bench qmax``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import add_target_arguments
from bench.k8s.options import add_kubernetes_arguments

DESCRIPTION = """\
Find Q_max: the highest number of requests held in flight on one instance whose p95
time-to-first-audio-byte (TTFAB, queueing included) stays within the SLO.

Closed loop: exactly N requests outstanding, a new one starts when one finishes. Each level
settles (--settle-s, discarded) then measures (--measure-s). The ladder climbs the schedule
(--levels, or --start x --factor up to --max-concurrency) until a level breaks the SLO, then
bisects on integer concurrency between the last passing and first failing level, so Q_max is
bracketed to one step. Concurrency 1 is always measured (added first when the schedule starts
higher): it is the uncontended service time.

On SageMaker the ladder measures ONE instance: the scalable target is pinned to min = max =
desired = 1 with all scaling suspended, the run waits until exactly one instance is InService
(and refuses, restoring everything, when the endpoint cannot get there: quota, capacity, a
failed update), and the desired count and scaling are restored on every exit (see `bench thaw`).
After each level it polls CloudWatch until ConcurrentRequestsPerModel covers the level's window
(at most --cloudwatch-wait-s) and records the CloudWatch Maximum beside the client's mean
in-flight; their ratio converts the plan's thresholds into CloudWatch units
(cloudwatch_ratio_source: measured, or assumed when no datapoint ever arrived; not_applicable
for --url).

  python -m bench qmax --url http://127.0.0.1:8080 --slo-ms 3000
  python -m bench qmax --endpoint prod-kokoro-82m --slo-ms 3000 --plot
  python -m bench qmax --url URL --slo-ms 500 --dry-run

Writes qmax-<model>-<transport>-<slug>.json into --out. Exit 0 written, 1 Q_max 0 (no level
met the SLO: a failed run; the artifact is written as the evidence, and the lowest level's
figures and what to change go to stderr), 2 bad input (nothing written, nothing left frozen),
130 interrupted.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:

    add_target_arguments(p)
    p.add_argument("--slo-ms", type=float, default=3000.0, metavar="MS", help="p95 TTFAB SLO in ms (default 3000)")
    p.add_argument("--levels", metavar="N,N,...", help="explicit increasing schedule, e.g. 1,2,4,8,16")
    p.add_argument("--start", type=int, default=1, metavar="N", help="first level of the geometric schedule (default 1)")
    p.add_argument("--factor", type=float, default=2.0, metavar="X", help="growth of the geometric schedule (default 2)")
    p.add_argument("--max-concurrency", type=int, default=256, metavar="N", help="top of the geometric schedule (default 256)")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="F",
                   help="stop refining when the bracket is within F x Q_max (default 0: one step)")
    p.add_argument("--no-refine", action="store_true", help="measure the schedule only, no bisection")
    p.add_argument("--settle-s", type=float, default=20.0, metavar="S", help="per level, discarded (default 20)")
    p.add_argument("--measure-s", type=float, default=60.0, metavar="S", help="per level, measured (default 60)")
    p.add_argument("--mix", default="mixed", choices=["short", "mixed", "long"], help="request texts (default mixed)")
    p.add_argument("--instance-type", metavar="TYPE", help="override the fingerprint's instance type")
    p.add_argument("--image-digest", metavar="sha256:...", help="override the fingerprint's image digest")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="artifact directory (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the artifact as JSON (no progress bar)")
    p.add_argument("--plot", action="store_true", help="also write a PNG of p95 TTFAB vs concurrency")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and a wall-clock estimate; no calls at all")
    g = p.add_argument_group("SageMaker")
    g.add_argument("--cloudwatch-wait-s", type=float, default=180.0, metavar="S",
                   help="per level, wait at most this long for ConcurrentRequestsPerModel to cover the level "
                        "(CloudWatch publishes with a delay; default 180)")
    g.add_argument("--poll-s", type=float, default=10.0, metavar="S", help="AWS polling interval (default 10)")
    g.add_argument("--inference-component", metavar="NAME",
                   help="components endpoint: measure ONE copy of this inference component (invocations name it: "
                        "InferenceComponentName). It must run exactly one copy (copy scaling pinned to 1 by you); the run "
                        "checks that before and after the ladder and leaves the instance count alone. CloudWatch's "
                        "per-model concurrency is not read for it (cloudwatch_ratio assumed 1)")
    g.add_argument("--pin-timeout-s", type=float, default=1800.0, metavar="S",
                   help="give up when the endpoint is not at exactly one InService instance after this long (default 1800)")

    add_kubernetes_arguments(p, "with --url (a port-forward or Service address reaching the Deployment's pods): pause this "
                                "Deployment's autoscaler at exactly one ready pod for the ladder and restore it on every way "
                                "out; the fingerprint is the Deployment's image digest and --instance-type")
