"""``bench copies``: the plan for a model hosted as copies (an inference component), no AWS calls."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    pass

from bench.errors import UsageError
from bench.report.terminal import render_copy_plan

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


def run(args: argparse.Namespace) -> int:
    from bench.cli.options import plan_inputs
    from speech.files import load_artifact, write_artifact
    from speech.plan.copies import FOOTPRINT_MARGIN, build_copy_plan
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact
    from speech.schema.copy_plan import copy_plan_filename
    from speech.schema.instances import INSTANCE_SPECS

    q = load_artifact(args.qmax, QmaxArtifact)
    c = load_artifact(args.copy, CopyArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact) if args.ttotal is not None else None
    if args.max_instances is not None and args.max_instances < 1:
        raise UsageError(f"--max-instances: must be >= 1 (got {args.max_instances})")
    if args.min_copies < 0:
        raise UsageError(f"--min-copies: must be >= 0 (got {args.min_copies}); 0 scales to zero copies")
    if args.margin is None:
        args.margin = FOOTPRINT_MARGIN
    if not 0 <= args.margin < 1:
        raise UsageError(f"--margin: must be 0 <= X < 1 (got {args.margin:g}), e.g. {FOOTPRINT_MARGIN:g}")
    instance = args.instance_type or q.fingerprint.instance_type
    if instance not in INSTANCE_SPECS:
        raise UsageError(
            f"--instance-type {instance!r} is not in the instance table; pass one of {', '.join(INSTANCE_SPECS)}"
            + (" (the artifacts were measured locally: name the SageMaker type to pack into)" if instance.startswith("local") else "")
        )
    plan = build_copy_plan(q, c, plan_inputs(args, q), instance=instance, ttotal=t, min_copies=args.min_copies,
                           max_instances_cap=args.max_instances, margin=args.margin)
    out = write_artifact(args.out / copy_plan_filename(plan), plan)
    if args.json:
        print(plan.model_dump_json(indent=2))
    else:
        print(render_copy_plan(plan))
        print(f"\nwrote {out}")
    sys.stdout.flush()
    return 1 if plan.verdict == "stop" else 0
