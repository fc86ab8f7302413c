"""``bench plan``: artifacts + SLO + surge + traffic -> plan report, plan artifact, stack config."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pydantic import ValidationError

from bench.cli.options import plan_inputs
from bench.errors import UsageError
from bench.operations.plan import replan_stack
from bench.operations.plan_hpa import apply, from_stack_entry, stored_line
from bench.report.runs import batch_plan_report, plan_report, stack_plan_report
from bench.report.text import render_batch_plan, render_plan, render_stack_plan, stack_plan_json
from speech.errors import PlanInputError, describe_validation_error
from speech.files import load_artifact, parse_artifact, write_artifact
from speech.plan.batch import BatchPlan, batch_plan_filename, build_batch_plan
from speech.plan.realtime import build_plan
from speech.plan.schedule import derive_schedule
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import HHMM_RE, ArtifactRef, FloorSchedule, PlanInputs
from speech.schema.forecast_artifact import ForecastArtifact
from speech.schema.plan_artifacts import PlanArtifact, plan_filename
from speech.sim.traces import TraceError, generate
from speech.stack.entry import model_entry
from speech.stack.read import is_reference, read_reference, stack_file, stack_name
from speech.stack.replan import load_stack
from speech.stack.write import PROJECT, existing_model_entry, migrate_stack_file, read_stack_file, write_model_entry


def input_changes(old: dict | None, new: PlanInputs, old_max: int | None, new_max: int | None) -> list[str]:
    """What a re-plan changes in the stack entry's inputs, one phrase each (empty: nothing)."""

    if not old:
        return []
    before = PlanInputs.model_validate(old).model_dump(mode="json") if _valid_inputs(old) else dict(old)
    after = new.model_dump(mode="json")
    out = [f"{k} {_fmt(before.get(k))} -> {_fmt(after.get(k))}" for k in sorted(set(before) | set(after))
           if before.get(k) != after.get(k)]
    if old_max != new_max:
        out.append(f"max_instances {_fmt(old_max)} -> {_fmt(new_max)}")
    return out


def _valid_inputs(old: dict) -> bool:
    try:
        PlanInputs.model_validate(old)
        return True
    except ValidationError:
        return False


def _fmt(v: object) -> str:
    if v is None:
        return "unset"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


def stored_tcopy(stack_path: Path, model: str, old: dict) -> tuple[CopyArtifact | None, ArtifactRef | None]:
    """The copy artifact a components entry already has (by reference or embedded), and its reference."""

    value = (old.get("measurements") or {}).get("tcopy")
    if value is None:
        return None, None
    key = f"speech-endpoints:models.{model}.measurements.tcopy"
    ref, data = read_reference(value, stack_path.parent, key) if is_reference(value) else (None, value)
    return parse_artifact(json.loads(json.dumps(data, default=str)), CopyArtifact, key), ref


def with_schedule(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, inputs: PlanInputs,
                  plan: PlanArtifact) -> tuple[PlanInputs, str]:
    """Inputs with the floors derived from ``--schedule-from`` (the plan's per-instance rate and
    planning T_total), and a line saying what was derived."""

    if not HHMM_RE.match(args.schedule_start):
        raise UsageError(f"--schedule-start {args.schedule_start!r}: use HH:MM (24 h), e.g. 06:00")
    try:
        FloorSchedule(timezone=args.schedule_timezone, floors=[{"at": "00:00", "min_instances": 1},
                                                                 {"at": "00:01", "min_instances": 1}])
    except ValidationError as err:
        raise UsageError(describe_validation_error(err, "--schedule-timezone")) from None
    try:
        trace = generate(args.schedule_from)
    except TraceError as err:
        raise UsageError(f"--schedule-from: {err}") from None
    hh, mm = args.schedule_start.split(":")

    try:
        schedule = derive_schedule(
            # An array of requests/s, which derive_schedule reads by index like a sequence.
            cast(Sequence[float], trace.arrivals),
            per_instance_rps=plan.capacity.per_instance_rps or plan.capacity.throughput_at_target_rps,
            lead_s=plan.t_total.planning_s, floor=plan.fleet.min_instances, max_instances=plan.fleet.max_instances,
            start_minute=int(hh) * 60 + int(mm), slot_minutes=args.schedule_slot_min, timezone=args.schedule_timezone,
            trace_sha256=trace.source_sha256,
        )
    except PlanInputError as err:
        raise UsageError(f"--schedule-from: {err}") from None
    if schedule is None:
        return inputs, f"schedule: the trace has no ramp above the floor {plan.fleet.min_instances}; no floors derived"
    return (inputs.model_copy(update={"schedule": schedule}),
            f"schedule: {len(schedule.floors)} daily floors derived from {args.schedule_from}")


def with_forecast_floors(path: Path, inputs: PlanInputs, plan: PlanArtifact) -> tuple[PlanInputs, str]:
    """Inputs with the scheduled floors of the forecast artifact at ``path`` (``--floors-from``),
    and a line saying what was taken."""

    art = load_artifact(path, ForecastArtifact)
    if art.schedule is None:
        return inputs, f"schedule: the forecast in {path} needs no floor above the plan's; no floors taken"
    other = "" if art.plan_sha256 == canonical_sha256(plan) else (
        "; it was sized for another plan: re-run its refresh command with this plan for floors at this plan's rate")
    prov = art.schedule.forecast
    until = f", valid until {prov.valid_until}" if prov is not None else ""
    return (inputs.model_copy(update={"schedule": art.schedule}),
            f"schedule: {len(art.schedule.floors)} forecast floors from {path}{until}{other}")


def _has_budget(path: Path) -> bool:
    return bool((read_stack_file(path).get("config") or {}).get(f"{PROJECT}:budget"))


def run_migrate(args: argparse.Namespace) -> int:
    """``--stack NAME --migrate-config``: embedded artifacts -> files + references; the stack file
    then loads to the same config (checked before this returns)."""

    path = stack_file(args.stack_dir, args.stack)
    before_bytes = path.stat().st_size if path.exists() else 0
    before = load_stack(path, warn=lambda _m: None)
    changes = migrate_stack_file(path)
    after = load_stack(path)
    if after != before:  # cannot happen unless an artifact file changed under us: say so, loudly
        raise UsageError(f"{path}: after migration the stack loads to a different config; restore it from version "
                         "control and re-run --migrate-config")
    if args.json:
        print(json.dumps({"stack": args.stack, "file": str(path), "bytes_before": before_bytes,
                          "bytes_after": path.stat().st_size,
                          "references": [{"key": k, "path": r.path, "sha256": r.sha256, "written": w is not None}
                                         for k, r, w in changes]}, indent=2))
        return 0
    if not changes:
        print(f"{path}: no embedded artifact; nothing to migrate")
        return 0
    for key, ref, written in changes:
        print(f"{key} -> {ref.path} ({ref.sha256}){' written' if written else ', already in the repository'}")
    print(f"\nwrote {path}: {before_bytes:,} -> {path.stat().st_size:,} bytes; the stack loads to the same config. "
          "Commit the artifact files with it")
    return 0


def run(args: argparse.Namespace) -> int:
    from_stack_entry(args)  # --stack NAME --hpa FILE alone: the entry's measurements and peak
    given = [flag for flag, v in (("--qmax", args.qmax), ("--ttotal", args.ttotal), ("--peak-rps", args.peak_rps))
             if v is not None]
    if getattr(args, "migrate_config", False):
        if given or not args.stack:
            raise UsageError("--migrate-config rewrites a stack file: pass --stack NAME alone (no --qmax/--ttotal/--peak-rps)")
        return run_migrate(args)
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
    q = load_artifact(args.qmax, QmaxArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact)
    if args.max_instances is not None and args.max_instances < 1:
        raise UsageError(f"--max-instances: must be >= 1 (got {args.max_instances})")
    tcopy = load_artifact(args.tcopy, CopyArtifact) if args.tcopy is not None else None
    if tcopy is not None and not args.stack:
        raise UsageError("--tcopy only goes into a stack entry (--stack NAME); to see the copy plan run bench copies")
    path = stack_file(args.stack_dir, args.stack) if args.stack else None
    old = None
    if path is not None:
        old = _plain(existing_model_entry(path, q.model))
    tcopy_ref = None
    if tcopy is None and old and old.get("hosting") == "components":
        assert path is not None  # old is the entry read from the stack file at path
        tcopy, tcopy_ref = stored_tcopy(path, q.model, old)
    stored = (old or {}).get("plan") if isinstance((old or {}).get("plan"), dict) else None
    inputs, old, tuned = apply(args, q, t, plan_inputs(args, q, stored), old)
    max_instances = args.max_instances if args.max_instances is not None else (old or {}).get("max_instances")
    batch = inputs.max_delay_s is not None
    plan: PlanArtifact | BatchPlan = (build_batch_plan if batch else build_plan)(
        q, t, inputs, allow_config_mismatch=args.allow_config_mismatch, max_instances_cap=max_instances
    )
    note = None
    if args.schedule_from and getattr(args, "floors_from", None) is not None:
        raise UsageError("--schedule-from and --floors-from both set floors: pass one")
    if getattr(args, "floors_from", None) is not None:
        if batch:
            raise UsageError("--floors-from: a batch route scales to zero on its backlog; floors are for real-time routes")

        assert isinstance(plan, PlanArtifact)  # not a batch route (above)
        inputs, note = with_forecast_floors(args.floors_from, inputs, plan)
        plan = build_plan(q, t, inputs, allow_config_mismatch=args.allow_config_mismatch,
                          max_instances_cap=max_instances)
    if args.schedule_from:
        if batch:
            raise UsageError("--schedule-from: a batch route scales to zero on its backlog; floors are for real-time routes")

        assert isinstance(plan, PlanArtifact)  # not a batch route (above)
        inputs, note = with_schedule(args, q, t, inputs, plan)
        plan = build_plan(q, t, inputs, allow_config_mismatch=args.allow_config_mismatch,
                          max_instances_cap=max_instances)
    # Build everything that can fail before writing anything.
    entry = model_entry(plan, inputs, q, t, tcopy, old=old, max_instances=max_instances, image=args.image,
                        instance_type=args.instance_type) if path else None
    name = batch_plan_filename(plan) if isinstance(plan, BatchPlan) else plan_filename(plan)
    out = write_artifact(args.out / name, plan)
    stored_files: list[Path] = []
    if entry is not None:
        assert path is not None  # an entry is built only for a stack file (above)
        stored_files = write_model_entry(
            path, q.model, entry, refs={"tcopy": tcopy_ref} if tcopy_ref is not None else None,
            sources={"qmax": args.qmax, "ttotal": args.ttotal, "tcopy": args.tcopy},
            allow_config_mismatch=True if args.allow_config_mismatch else None)
    changes = input_changes(stored, inputs, (old or {}).get("max_instances"), max_instances) if old else []
    if args.json:
        print(plan.model_dump_json(indent=2))
    else:
        print(render_batch_plan(plan) if isinstance(plan, BatchPlan) else render_plan(plan))
        if note:
            print(f"\n{note}")
        if tuned is not None and entry is not None and not isinstance(plan, BatchPlan):
            print("\n" + stored_line(plan, entry.kubernetes, tuned))
        print(f"\nwrote {out}" + (f" and {path}" if entry else "")
              + (f"; stored {', '.join(str(f) for f in stored_files)} (commit it: the stack references it)"
                 if stored_files else ""))
        if old is not None:
            print(f"stack {stack_name(args.stack)!r}, {q.model}: "
                  + ("inputs changed: " + "; ".join(changes) if changes
                     else "inputs unchanged (kept the entry's stored inputs; flags override them)"))
        if entry is not None and path is not None and _has_budget(path):
            print(f"note: stack {args.stack!r} has a daily budget; this plan is before it. Run "
                  f"`python -m bench plan --stack {args.stack}` to re-plan every model under the budget "
                  "(what the program deploys)")
    sys.stdout.flush()

    args._report = batch_plan_report(plan) if isinstance(plan, BatchPlan) else plan_report(plan)
    return 1 if plan.verdict == "stop" else 0


def _plain(value: object) -> dict | None:
    # ruamel's round-trip containers -> plain JSON values.
    return json.loads(json.dumps(value, default=str)) if value is not None else None
