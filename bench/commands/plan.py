"""``bench plan``: artifacts + SLO + surge + traffic -> plan report, plan artifact, stack config.
Parses (bench/cli/parsers/plan.py), calls :mod:`bench.operations` (:func:`~bench.operations.plan_model.plan_model`,
:func:`~bench.operations.plan.replan_stack`, :func:`~bench.operations.plan.migrate_stack`), renders
(:mod:`bench.report.text`)."""

from __future__ import annotations

import argparse
import sys

from bench.errors import UsageError
from bench.operations.plan import migrate_stack, replan_stack
from bench.operations.plan_hpa import from_stack_entry, stored_line
from bench.operations.plan_model import plan_model
from bench.report.runs import batch_plan_report, plan_report, stack_plan_report
from bench.report.text import render_batch_plan, render_migration, render_plan, render_stack_plan, stack_plan_json
from speech.plan.batch import BatchPlan
from speech.stack.read import stack_name


def run(args: argparse.Namespace) -> int:
    from_stack_entry(args)  # --stack NAME --hpa FILE alone: the entry's measurements and peak
    given = [flag for flag, v in (("--qmax", args.qmax), ("--ttotal", args.ttotal), ("--peak-rps", args.peak_rps))
             if v is not None]
    if getattr(args, "migrate_config", False):
        if given or not args.stack:
            raise UsageError("--migrate-config rewrites a stack file: pass --stack NAME alone (no --qmax/--ttotal/--peak-rps)")
        mig = migrate_stack(args.stack, args.stack_dir)
        print(render_migration(args.stack, mig.path, mig.bytes_before, mig.bytes_after, mig.changes, args.json))
        return 0
    if not given and args.stack:
        r = replan_stack(args.stack, args.stack_dir, args.out)
        if args.json:
            print(stack_plan_json(r.stack, r.deployments, r.allocation))
        else:
            print(render_stack_plan(r.stack, r.deployments, r.allocation))
            print("\nwrote " + ", ".join(str(p) for p in r.written) if r.written else "\nnothing measured: no plan written")
        args._report = stack_plan_report(r.stack, r.deployments, r.allocation)
        return 1 if r.stop else 0
    if len(given) < 3:
        missing = [f for f in ("--qmax", "--ttotal", "--peak-rps") if f not in given]
        raise UsageError(f"{', '.join(missing)} missing: plan one model with --qmax FILE --ttotal FILE --peak-rps N, "
                         "or re-plan every model of a stack file with --stack NAME alone")
    m = plan_model(args)
    plan, entry = m.plan, m.entry
    if args.json:
        print(plan.model_dump_json(indent=2))
    else:
        print(render_batch_plan(plan) if isinstance(plan, BatchPlan) else render_plan(plan))
        if m.note:
            print(f"\n{m.note}")
        if m.tuned is not None and entry is not None and not isinstance(plan, BatchPlan):
            print("\n" + stored_line(plan, entry.kubernetes, m.tuned))
        print(f"\nwrote {m.out}" + (f" and {m.stack_path}" if entry else "")
              + (f"; stored {', '.join(str(f) for f in m.stored_files)} (commit it: the stack references it)"
                 if m.stored_files else ""))
        if m.replanned:
            print(f"stack {stack_name(args.stack)!r}, {plan.model}: "
                  + ("inputs changed: " + "; ".join(m.changes) if m.changes
                     else "inputs unchanged (kept the entry's stored inputs; flags override them)"))
        if m.stack_has_budget:
            print(f"note: stack {args.stack!r} has a daily budget; this plan is before it. Run "
                  f"`python -m bench plan --stack {args.stack}` to re-plan every model under the budget "
                  "(what the program deploys)")
    sys.stdout.flush()

    args._report = batch_plan_report(plan) if isinstance(plan, BatchPlan) else plan_report(plan)
    return 1 if plan.verdict == "stop" else 0
