"""``bench plan``'s one-model plan, the one function the command calls for it (:func:`plan_model`):
the artifacts loaded, the stack entry's stored inputs under the flags (a tuned HPA's, with
``--hpa``), the plan (real-time or batch) with its floors (``--schedule-from``, ``--floors-from``,
both at the stored cap), the stack entry built, and only then the plan artifact and the stack
file written."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pydantic import ValidationError

from bench.cli.options import plan_inputs
from bench.errors import UsageError
from bench.operations.plan_hpa import TunedHpa, apply
from speech.errors import PlanInputError, describe_validation_error
from speech.files import load_artifact, parse_artifact, write_artifact
from speech.plan.batch import BatchPlan, batch_plan_filename, build_batch_plan
from speech.plan.realtime import build_plan
from speech.plan.schedule import derive_schedule
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import HHMM_RE, ArtifactRef, FloorSchedule, ModelConfig, PlanInputs
from speech.schema.forecast_artifact import ForecastArtifact
from speech.schema.plan_artifacts import PlanArtifact, plan_filename
from speech.sim.traces import TraceError, generate
from speech.stack.entry import model_entry
from speech.stack.read import is_reference, read_reference, stack_file
from speech.stack.write import PROJECT, existing_model_entry, read_stack_file, write_model_entry


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


def has_budget(path: Path) -> bool:
    return bool((read_stack_file(path).get("config") or {}).get(f"{PROJECT}:budget"))


def _plain(value: object) -> dict | None:
    # ruamel's round-trip containers -> plain JSON values.
    return json.loads(json.dumps(value, default=str)) if value is not None else None


@dataclass(frozen=True)
class ModelPlan:
    """One model planned: the plan, what was derived for it and what was written."""

    plan: PlanArtifact | BatchPlan
    out: Path
    """The plan artifact written."""
    stack_path: Path | None
    """The stack file written (with --stack), else None."""
    entry: ModelConfig | None
    stored_files: list[Path]
    """Artifacts copied under artifacts/ for the stack file to reference."""
    note: str | None
    """What the floors came from (--schedule-from, --floors-from)."""
    tuned: TunedHpa | None
    replanned: bool
    """The stack file had an entry for the model already."""
    changes: list[str]
    """What the re-plan changed in the entry's inputs."""
    stack_has_budget: bool


def plan_model(args: argparse.Namespace) -> ModelPlan:
    """Plan the model of ``--qmax``/``--ttotal`` for the parsed flags of ``bench plan`` and write the
    plan artifact (and, with ``--stack``, the stack entry); UsageError for bad input (nothing
    written)."""
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
    return ModelPlan(plan=plan, out=out, stack_path=path if entry is not None else None, entry=entry,
                     stored_files=stored_files, note=note, tuned=tuned, replanned=old is not None, changes=changes,
                     stack_has_budget=entry is not None and path is not None and has_budget(path))
