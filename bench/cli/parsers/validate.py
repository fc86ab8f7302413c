"""``bench validate``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.load.locust_engine import add_engine_arguments

DESCRIPTION = """\
Check a deployed endpoint against a plan artifact (bench plan): the scalable target's min/max,
the scale-out target value and cooldown, the scale-in step policy and cooldown, the surge step
size (speech.deploy.scaling.surge_adjustment), both alarms (threshold, comparison, statistic, period,
evaluation periods), and that nothing is frozen or orphaned.

The deployed thresholds are in CloudWatch units (ConcurrentRequestsPerModel = client in-flight x
the plan's CloudWatch/client ratio); the messages give both.

With --live also load it (closed loop, scaling frozen for the check and restored after):
  1. at 0.8 x C_scale_max per instance: p95 TTFAB must stay within the SLO, and (SageMaker)
     CloudWatch must read ConcurrentRequestsPerModel at the plan's ratio, so the deployed target
     value really sits at C_scale_max (polled until CloudWatch covers the window,
     --cloudwatch-wait-s);
  2. just past Q_max per instance: the admission gate must reject (503 queue_saturated) and the
     admitted requests must stay within the SLO.
--url runs only the live checks against a local container (no policy to compare).

On SageMaker scaling is restored on every way out (an AWS error that outlasts the retries,
Ctrl-C, SIGTERM) and stderr says so; if AWS refuses the restore, the error names the exact
`bench thaw` command. An endpoint that leaves service during the load (Failed, OutOfService)
stops the checks with an `endpoint` issue (exit 1) naming the way back.

  python -m bench validate --plan artifacts/plan-kokoro-82m.json --endpoint dev-kokoro-82m
  python -m bench validate --plan plan.json --url http://127.0.0.1:8080 --live --measure-s 20

--engine locust runs each level on Locust processes (--workers N local ones, or --master-bind
HOST:PORT --expect-workers N remote ones), for levels one process cannot keep in flight.

Exit 0 pass, 1 fail, 2 bad input or an AWS error, 130 interrupted (scaling restored).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path, metavar="FILE", help="plan artifact (bench plan)")
    p.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint to check")
    p.add_argument("--url", metavar="URL", help="local container for --live checks only")
    p.add_argument("--transport", choices=["stream", "bidirectional"], default="stream", help="for --live (default stream)")
    p.add_argument("--live", action="store_true", help="also run the two load checks")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="SLO for --live (default: the plan's)")
    p.add_argument("--settle-s", type=float, default=10.0, metavar="S", help="per live check, discarded (default 10)")
    p.add_argument("--measure-s", type=float, default=30.0, metavar="S", help="per live check, measured (default 30)")
    p.add_argument("--mix", default="mixed", choices=["short", "mixed", "long"], help="request texts (default mixed)")
    p.add_argument("--region", metavar="REGION",
                   help="AWS region (default: --stack's aws:region, else the environment's)")
    p.add_argument("--stack", metavar="NAME", help="stack whose aws:region the endpoint is in (reads Pulumi.NAME.yaml)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml lives (default .)")
    p.add_argument("--state-dir", type=Path, default=None, metavar="DIR", help="freeze state directory (see bench thaw)")
    p.add_argument("--json", action="store_true", help="print {ok, issues, live} as JSON")
    p.add_argument("--cloudwatch-wait-s", type=float, default=180.0, metavar="S",
                   help="--live on SageMaker: wait at most this long for ConcurrentRequestsPerModel (default 180)")
    p.add_argument("--poll-s", type=float, default=10.0, metavar="S", help="AWS polling interval (default 10)")
    add_engine_arguments(p, files=False)
