"""``bench plan``: artifacts + SLO + surge + traffic -> plan report, plan artifact, stack config."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from bench.report.outputs import RunReport
    from speech.plan.batch import BatchPlan
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact
    from speech.schema.config import ArtifactRef, PlanInputs
    from speech.schema.plan_artifacts import PlanArtifact

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from bench.errors import UsageError
from speech.errors import describe_validation_error

DESCRIPTION = """\
Turn measured artifacts into autoscaling numbers with zero AWS calls.

The default plan (no tuned values; speech/plan/formulas.py):
  h = surge_ratio - 1 (< 0.5); Q_max = floor(measured Q_max x --qmax-derate)
  lambda_SLO = the highest Poisson rate per instance whose share within the SLO (refusals at the
    gate count as misses) is >= --slo-share, on the gated chain: gate at Q_max, departures X(n)
    from the ladder, TTFAB quantiles per level
  C_scale_max = min((1-h) x Q_max, mean in flight at lambda_SLO)   (the surge rule or the SLO share)
  C_scale_min = C_scale_max x (1-2h) / (1-h)   (= (1-2h) x Q_max when the surge rule sets C_scale_max)
  CloudWatch target / scale-in threshold = C_scale_max / C_scale_min x the measured CloudWatch ratio
  per-instance rate = min(rate holding C_scale_max in flight on that chain, X(C_scale_max))
  max_instances = ceil(peak / per-instance rate); min_instances = max(--min-instances,
    ceil(trough / per-instance rate))
  T_total (planning) = measured T_total + metric period x datapoints to alarm + scale-out cooldown
  cooldowns: out clamp(measured T_total / 2, 10, 30) s, in max(300, 3 x planning T_total) s
  scale-in step = 1 - surge_ratio x C_scale_min / C_scale_max of the fleet (at most
    1 - C_scale_min / C_scale_max), after ceil(300 s / period) periods at or below C_scale_min
  surge survival: P(an instance at C_scale_max reaches Q_max within T_total) on the exact chain
--target-share, --scale-in-* and the cooldown flags replace a seed value (bench tune finds them).

Writes plan-<model>.json into --out; with --stack NAME also writes the inputs and the artifacts
into Pulumi.NAME.yaml (other keys kept): each artifact by path and sha256, the file committed
under artifacts/ (copied there when it lies outside the repository). A re-plan keeps the
inputs stored in the entry unless a flag overrides them, and prints what changed.
Exit 0 ok/warn, 1 stop finding, 2 bad input.

A batch route (--max-delay-s S): an asynchronous endpoint scaled on its backlog down to zero.
  throughput per instance X = ladder throughput at Q_max; MaxConcurrentInvocationsPerInstance = Q_max
  backlog target per instance = floor(X x (S - cold start)), cold start = 120 s wake + T_total
  instances at peak = ceil(peak / X), min 0
Writes batch-plan-<model>.json (and, with --stack, the entry as priority batch, hosting async).

Several models: `bench plan --stack NAME` alone re-plans every model of Pulumi.NAME.yaml from
the measurements it references, under the stack's daily budget (speech-endpoints:budget:
critical models at their peak, standard capped with a warning, batch gets the rest), and writes
plan-<model>.json for each plus budget-NAME.json (the allocation).

Stack files whose artifacts are embedded (the earlier form) still load, with a warning:
`bench plan --stack NAME --migrate-config` rewrites them as references.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", type=Path, metavar="FILE",
                   help="qmax artifact (bench qmax); without --qmax/--ttotal/--peak-rps, --stack NAME re-plans every model")
    p.add_argument("--ttotal", type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--peak-rps", type=float, metavar="N", help="busiest-hour requests/s")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N",
                   help="quietest-hour requests/s (default: the stack entry's, else 1, or peak if lower)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS",
                   help="p95 TTFAB SLO (default: the stack entry's, else the SLO the ladder was judged by)")
    p.add_argument("--surge-ratio", type=float, default=None, metavar="X",
                   help="growth absorbed within one scale-out (default: the stack entry's, else 1.25)")
    p.add_argument("--min-instances", type=int, default=None, metavar="N",
                   help="instance floor (default: the stack entry's, else 1)")
    p.add_argument("--max-instances", type=int, default=None, metavar="N",
                   help="hard cap on the fleet, a stop finding when below the need (default: the stack entry's, else none)")
    p.add_argument("--qmax-derate", type=float, default=None, metavar="X",
                   help="plan with floor(measured Q_max x X), 0 < X <= 1, until the endpoint is re-measured "
                        "(bench observe recommends it when the deployed endpoint is slower than its ladder; default: "
                        "the stack entry's, else 1)")
    p.add_argument("--max-delay-s", type=float, default=None, metavar="S",
                   help="plan a batch route: an asynchronous endpoint whose requests may take up to S seconds from "
                        "submission to their response in S3, a cold start from zero included (writes batch-plan-<model>.json)")
    t = p.add_argument_group("tuned values (bench tune searches them; unset: the seed formula, printed next to them)")
    t.add_argument("--slo-share", type=float, default=None, metavar="X",
                   help="share of requests the fleet is sized to answer within the SLO, refused ones missed (default 0.995)")
    t.add_argument("--target-share", type=float, default=None, metavar="X",
                   help="scale-out target as a share of Q_max, at most 1 - h (default: min(1 - h, the SLO-share occupancy))")
    t.add_argument("--scale-in-step-share", type=float, default=None, metavar="X",
                   help="share of the fleet one scale-in step removes, at most 1 - C_scale_min/C_scale_max "
                        "(default 1 - surge x C_scale_min/C_scale_max)")
    t.add_argument("--scale-in-window-s", type=int, default=None, metavar="S",
                   help="seconds at or below C_scale_min before a step (default 300, at least 3 metric periods)")
    t.add_argument("--scale-in-cooldown-s", type=int, default=None, metavar="S",
                   help="seconds between scale-in steps, at least max(window, planning T_total) (default max(300, 3 T_total))")
    t.add_argument("--scale-out-cooldown-s", type=int, default=None, metavar="S",
                   help="target tracking's scale-out cooldown, metric period .. max(30, T_total) (default clamp(T/2, 10, 30))")
    t.add_argument("--reason", action="append", default=[], metavar="NAME=WHY",
                   help="why a tuned value differs from its seed (recorded and printed next to it); repeatable")
    t.add_argument("--promise", type=Path, default=None, metavar="FILE",
                   help="JSON of the simulated promise (bench tune): SLO share, rejected share, instance-hours, cost vs "
                        "floor, trace sha256, seed, simulator version; without it the plan is advisory")
    sch = p.add_argument_group("scheduled floors")
    sch.add_argument("--schedule-from", metavar="TRACE",
                     help="derive daily floors from your traffic: a trace spec as for bench simulate (csv:PATH, "
                          "diurnal:..., azure-conv); each ramp's need is in service one planning T_total ahead")
    sch.add_argument("--schedule-timezone", default="UTC", metavar="TZ",
                     help="IANA time zone of the trace's clock and of the schedule (default UTC)")
    sch.add_argument("--schedule-start", default="00:00", metavar="HH:MM",
                     help="time of day of the trace's first second (default 00:00)")
    sch.add_argument("--floors-from", type=Path, default=None, metavar="FILE",
                     help="the scheduled floors of a forecast artifact (bench forecast), with its provenance: the policy pack "
                          "refuses them at preview once the forecast is past its horizon")
    sch.add_argument("--schedule-slot-min", type=int, default=30, metavar="MIN",
                     help="slot length in minutes, dividing a day (default 30: at most 48 floors)")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="where plan-<model>.json goes (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the plan artifact as JSON instead of the report")
    p.add_argument("--allow-config-mismatch", action="store_true", help="plan artifacts of different fingerprints (warn finding)")
    p.add_argument("--stack", metavar="NAME",
                   help="write the inputs and the artifacts (by path and sha256) into Pulumi.NAME.yaml; NAME, ORG/NAME "
                        "or ORG/PROJECT/NAME. A re-plan keeps the entry's stored inputs unless a flag overrides them")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                   help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    p.add_argument("--migrate-config", action="store_true",
                   help="with --stack NAME alone: rewrite artifacts embedded in the stack file as references (path and "
                        "sha256), writing each under artifacts/ unless the same artifact is already there")
    p.add_argument("--image", metavar="REPO@sha256:...",
                   help="existing ECR image for the stack entry, <account>.dkr.ecr.<region>.amazonaws.com/<repo>@sha256:... "
                   "(default: keep the entry's image; none: the program builds container/Dockerfile)")
    p.add_argument("--tcopy", type=Path, metavar="FILE",
                   help="with --stack: the copy artifact (bench tcopy); the entry becomes hosting: components, --qmax "
                        "being the ladder against one copy (bench copies shows the copy plan)")
    p.add_argument("--hpa", type=Path, metavar="FILE", help="with --stack: store the HPA bench tune --platform kubernetes "
                   "found (target and minReplicas as plan inputs, its scale-down as kubernetes.scale_down); alone with "
                   "--stack NAME: re-plans that model's entry from its stored measurements and peak")
    p.add_argument("--instance-type", metavar="TYPE", help="SageMaker instance type for the stack entry when the artifacts were "
                   "measured locally (the program and the policy pack then see the fingerprint differ)")


def input_changes(old: dict | None, new: PlanInputs, old_max: int | None, new_max: int | None) -> list[str]:
    """What a re-plan changes in the stack entry's inputs, one phrase each (empty: nothing)."""
    from speech.schema.config import PlanInputs

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
    from pydantic import ValidationError

    from speech.schema.config import PlanInputs

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
    from speech.files import parse_artifact
    from speech.schema.artifacts import CopyArtifact
    from speech.stack.read import is_reference, read_reference

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
    from pydantic import ValidationError

    from speech.plan.schedule import derive_schedule
    from speech.schema.config import HHMM_RE, FloorSchedule
    from speech.sim.traces import TraceError, generate

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
    from speech.errors import PlanInputError

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
    from speech.files import load_artifact
    from speech.schema.artifacts import canonical_sha256
    from speech.schema.forecast_artifact import ForecastArtifact

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
    from speech.stack.write import PROJECT, read_stack_file

    return bool((read_stack_file(path).get("config") or {}).get(f"{PROJECT}:budget"))


def run_migrate(args: argparse.Namespace) -> int:
    """``--stack NAME --migrate-config``: embedded artifacts -> files + references; the stack file
    then loads to the same config (checked before this returns)."""
    from speech.stack.read import stack_file
    from speech.stack.replan import load_stack
    from speech.stack.write import migrate_stack_file

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
    from bench.cli.options import plan_inputs
    from bench.commands.plan_hpa import apply, from_stack_entry, stored_line
    from bench.report.text import render_batch_plan, render_plan
    from speech.files import load_artifact, write_artifact
    from speech.plan.batch import BatchPlan, batch_plan_filename, build_batch_plan
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact
    from speech.schema.plan_artifacts import plan_filename
    from speech.stack.entry import model_entry
    from speech.stack.read import stack_file, stack_name

    from_stack_entry(args)  # --stack NAME --hpa FILE alone: the entry's measurements and peak
    given = [flag for flag, v in (("--qmax", args.qmax), ("--ttotal", args.ttotal), ("--peak-rps", args.peak_rps))
             if v is not None]
    if getattr(args, "migrate_config", False):
        if given or not args.stack:
            raise UsageError("--migrate-config rewrites a stack file: pass --stack NAME alone (no --qmax/--ttotal/--peak-rps)")
        return run_migrate(args)
    if not given and args.stack:
        rc, args._report = run_stack(args.stack, args.stack_dir, args.out, args.json)
        return rc
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
        from speech.stack.write import existing_model_entry

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
        from speech.schema.plan_artifacts import PlanArtifact

        assert isinstance(plan, PlanArtifact)  # not a batch route (above)
        inputs, note = with_forecast_floors(args.floors_from, inputs, plan)
        plan = build_plan(q, t, inputs, allow_config_mismatch=args.allow_config_mismatch,
                          max_instances_cap=max_instances)
    if args.schedule_from:
        if batch:
            raise UsageError("--schedule-from: a batch route scales to zero on its backlog; floors are for real-time routes")
        from speech.schema.plan_artifacts import PlanArtifact

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
        from speech.stack.write import write_model_entry

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
    from bench.report.runs import batch_plan_report, plan_report

    args._report = batch_plan_report(plan) if isinstance(plan, BatchPlan) else plan_report(plan)
    return 1 if plan.verdict == "stop" else 0


def _plain(value: object) -> dict | None:
    # ruamel's round-trip containers -> plain JSON values.
    return json.loads(json.dumps(value, default=str)) if value is not None else None


def run_stack(stack: str, stack_dir: Path, out_dir: Path, as_json: bool) -> tuple[int, RunReport]:
    """Re-plan every model of ``Pulumi.<stack>.yaml``; exit 1 when a plan or the budget has a stop,
    with the run's report (``--csv``/``--html``/``--threshold``).
    Writes ``plan-<model>.json`` per measured real-time model (with its ``budget`` section when the
    stack has a budget), ``batch-plan-<model>.json`` per batch model and ``budget-<stack>.json``;
    nothing is written unless every model plans."""
    from bench.report.runs import stack_plan_report
    from bench.report.text import render_stack_plan
    from speech.files import write_artifact
    from speech.plan.batch import batch_plan_filename
    from speech.schema.plan_artifacts import plan_filename
    from speech.stack.read import stack_file, stack_name
    from speech.stack.replan import budget_filename, load_stack, plan_stack

    config = load_stack(stack_file(stack_dir, stack))
    stack = stack_name(stack)
    deployments, allocation = plan_stack(config, stack)
    # Everything is computed; only now write, each file atomically.
    written: list[Path] = []
    plans: dict[str, PlanArtifact] = {n: d.plan for n, d in deployments.items() if d.plan is not None}
    batches = {n: d.batch for n, d in deployments.items() if d.batch is not None}
    for plan in plans.values():
        written.append(write_artifact(out_dir / plan_filename(plan), plan))
    for batch in batches.values():
        written.append(write_artifact(out_dir / batch_plan_filename(batch), batch))
    if allocation is not None:
        written.append(write_artifact(out_dir / budget_filename(stack), allocation))
    if as_json:
        print(json.dumps({
            "stack": stack,
            "plans": {n: json.loads(p.model_dump_json()) for n, p in plans.items()},
            "batch_plans": {n: json.loads(b.model_dump_json()) for n, b in batches.items()},
            "budget": json.loads(allocation.model_dump_json()) if allocation is not None else None,
        }, indent=2))
    else:
        print(render_stack_plan(stack, deployments, allocation))
        print("\nwrote " + ", ".join(str(p) for p in written) if written else "\nnothing measured: no plan written")
    planned: list[PlanArtifact | BatchPlan] = [*plans.values(), *batches.values()]
    stop = (any(p.verdict == "stop" for p in planned)
            or (allocation is not None and allocation.verdict == "stop"))
    return (1 if stop else 0), stack_plan_report(stack, deployments, allocation)
