"""``bench copies``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Turn a per-copy qmax artifact (bench qmax against ONE copy) and a copy artifact (bench tcopy:
footprint and T_copy) into the numbers of an inference component: copy thresholds and cooldowns
(the instance plan's formulas with T_copy in place of T_total), copies at peak and trough,
copies per instance (whole accelerator devices, host memory and CPU cores, footprint + 10 %),
managed instance scaling's min/max, the compute requirements and the copy-scaling target.
With --ttotal it also says whether adding copies is much faster than adding instances.

  python -m bench copies --qmax qmax-copy.json --copy copy-kokoro-82m-g5xlarge-8b1b96bc.json \\
      --ttotal ttotal.json --instance-type ml.g5.12xlarge --peak-rps 500 --trough-rps 10

Writes copy-plan-<model>.json into --out. Exit 0 ok/warn, 1 stop finding (e.g. the copy fits no
instance of the type), 2 bad input (nothing written).
"""


MARGIN_DEFAULT_TEXT = "0.1"
"""speech.plan.copies.FOOTPRINT_MARGIN as --help states it; the help names it without importing the
plan (numpy, pydantic), and tests/bench/cli/test_entry_points.py checks the two agree."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact of a ladder against one copy")
    p.add_argument("--copy", required=True, type=Path, metavar="FILE", help="copy artifact (bench tcopy)")
    p.add_argument("--ttotal", type=Path, metavar="FILE", help="ttotal artifact of the instance type (to compare T_copy with T_total)")
    p.add_argument("--instance-type", metavar="TYPE",
                   help="instance type to pack into (default: the qmax fingerprint's); one of the instance table "
                        "(speech/schema/instances.py; another type is refused with the list)")
    p.add_argument("--peak-rps", required=True, type=float, metavar="N", help="busiest-hour requests/s")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N", help="quietest-hour requests/s (default 1, or peak if lower)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="p95 TTFAB SLO (default: the SLO the ladder was judged by)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="growth absorbed within one T_copy")
    p.add_argument("--min-copies", type=int, default=1, metavar="N", help="copy floor; 0 scales to zero copies when idle (default 1)")
    p.add_argument("--min-instances", type=int, default=1, metavar="N", help="instance floor while copies run (default 1)")
    p.add_argument("--max-instances", type=int, default=None, metavar="N",
                   help="cap on managed instance scaling (a stop finding when below the need)")
    p.add_argument("--qmax-derate", type=float, default=1.0, metavar="X", help="plan with floor(measured Q_max x X), 0 < X <= 1")
    p.add_argument("--margin", type=float, default=None, metavar="X",
                   help=f"reserve the measured footprint x (1 + X) per copy (default {MARGIN_DEFAULT_TEXT}, "
                        "speech.plan.copies.FOOTPRINT_MARGIN)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR",
                   help="where copy-plan-<model>.json goes (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the copy plan as JSON instead of the report")
