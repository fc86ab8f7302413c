"""``bench copies``'s plan, the one function the command calls (:func:`plan_copies`): a per-copy
ladder and a copy artifact turned into an inference component's numbers (no AWS calls), the copy
plan written."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cli.options import plan_inputs
from bench.errors import UsageError
from speech.files import load_artifact, write_artifact
from speech.plan.copies import FOOTPRINT_MARGIN, build_copy_plan
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact
from speech.schema.copy_plan import CopyPlan, copy_plan_filename
from speech.schema.instances import INSTANCE_SPECS


def plan_copies(args: argparse.Namespace) -> tuple[CopyPlan, Path]:
    """The copy plan for the parsed flags of ``bench copies`` (speech.plan.copies.build_copy_plan);
    the plan and where it was written."""
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
    return plan, out
