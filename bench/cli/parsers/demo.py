"""``bench demo``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

DESCRIPTION = """\
Run the whole chain locally: container (real model) -> qmax -> ttotal -> plan -> tune (bench tune
on the demo's trace: trained on that hour, checked on other hours) -> simulate (one hour of
diurnal traffic at the planned peak: the seed plan, the tuned plan and every other scaling
policy) -> offline preview + policy pack -> report. No AWS account, GPU or Pulumi CLI needed.

The local measurements describe this machine, not a SageMaker instance: the stack entry is
written for --instance-type with allow_config_mismatch, so the program plans real scaling
resources from them, and the policy pack shows that it would block deploying them there
(deployment-matches-fingerprint). That is the guard working; on AWS you measure the endpoint
itself (bench qmax --endpoint ...).

Exit 0 when every step ran (whatever the policy verdict), 1 when a step failed, 2 bad input,
130 interrupted (the container is stopped; artifacts are written atomically or not at all).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("out/demo"), metavar="DIR", help="artifacts, plots, report (default out/demo)")
    p.add_argument("--stack", default="local", metavar="NAME", help="stack config to write: Pulumi.NAME.yaml (default local)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR", help="where Pulumi.NAME.yaml goes (default .)")
    p.add_argument("--slo-ms", type=float, default=2500.0, metavar="MS", help="p95 TTFAB SLO on this CPU (default 2500)")
    p.add_argument("--peak-rps", type=float, default=20.0, metavar="N", help="planned peak (default 20)")
    p.add_argument("--trough-rps", type=float, default=1.0, metavar="N", help="planned trough (default 1)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="planned surge (default 1.25)")
    p.add_argument("--instance-type", default="ml.g5.xlarge", metavar="TYPE",
                   help="instance type of the stack entry (default ml.g5.xlarge)")
    p.add_argument("--max-concurrency", type=int, default=16, metavar="N", help="top of the ladder (default 16)")
    p.add_argument("--settle-s", type=float, default=2.0, metavar="S", help="per level, discarded (default 2)")
    p.add_argument("--measure-s", type=float, default=8.0, metavar="S", help="per level, measured (default 8)")
    p.add_argument("--quick", action="store_true", help="a reduced chain for CI: levels 1,2, short windows")
    p.add_argument("--report-only", action="store_true",
                   help="no container and no measurement: re-run simulate, preview+policy and the report on the newest "
                        "qmax, ttotal, plan and tuned plan artifacts already in --out (a previous demo's)")
    p.add_argument("--serve-cmd", default=f"{shlex.quote(sys.executable)} -m container serve",
                   help="command that starts the container (default: python -m container serve)")
