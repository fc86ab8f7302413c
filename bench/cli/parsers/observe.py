"""``bench observe``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

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
