"""``bench capacity``: where more concurrency goes, copies into the spare room of running instances
first (CPU cores, host memory and accelerator memory, every resource a copy requests), new
instances for the rest."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from speech.plan.capacity import CapacityEvaluation
    from speech.plan.fleet import FleetState

from bench.errors import UsageError
from speech.errors import describe_validation_error

EXAMPLE_FLEET = """\
{"kind": "fleet", "schema_version": 1,
 "instances": [{"name": "i-1", "instance_type": "ml.g5.12xlarge", "accelerator_memory_mib": 98304,
                "used_accelerator_memory_mib": 73728, "copies": {"kokoro-82m": 3}}],
 "models": {"kokoro-82m": {"copy_memory_mib": 24576, "concurrency_per_copy": 37.5, "t_copy_s": 48.1,
            "t_total_s": 320.2, "new_instance_type": "ml.g5.12xlarge",
            "new_instance_accelerator_memory_mib": 98304}}}"""

EXAMPLE_CPU_FLEET = """\
{"kind": "fleet", "schema_version": 1,
 "instances": [{"name": "i-1", "instance_type": "ml.c7i.4xlarge", "cpu_cores": 16, "used_cpu_cores": 12,
                "host_memory_mib": 32768, "used_host_memory_mib": 7590, "copies": {"kokoro-82m": 3}}],
 "models": {"kokoro-82m": {"copy_cpu_cores": 4, "copy_host_memory_mib": 2530, "concurrency_per_copy": 6,
            "t_copy_s": 20.5, "t_total_s": 290, "new_instance_type": "ml.c7i.4xlarge",
            "new_instance_cpu_cores": 16, "new_instance_host_memory_mib": 32768}}}"""


DESCRIPTION = """\
Evaluate an increase in concurrency for one model against a fleet: how many copies fit into the
spare room of running instances, where they go, how many new instances the rest needs, and when
each part serves (T_copy for copies on running instances, T_total for new instances). A copy fits
an instance only if every resource it requests fits there: CPU cores, host memory and accelerator
memory (an inference component's NumberOfCpuCoresRequired, MinMemoryRequiredInMb and
NumberOfAcceleratorDevicesRequired). Placement is best-fit decreasing: each copy goes where it
leaves the fewest copies' worth of room on the resource it makes scarcest. Says so when free room
is split so that no copy fits although it would in total (fragmentation). No AWS calls.

  python -m bench capacity --fleet fleet.json --model kokoro-82m --delta-concurrency 120
  python -m bench capacity --fleet fleet.json --model kokoro-82m --delta-concurrency 120 --json

The fleet file (JSON, kind "fleet") is written by hand or read from a deployed endpoint
(read-only Describe*/List* calls; SageMaker does not say which instance holds which copy, so the
placement is inferred):

  python -m bench capacity --from-endpoint prod-kokoro --write-fleet fleet.json \\
      --t-copy-s 48 --t-total-s 320 [--concurrency-per-copy 37.5] [--region eu-west-1]
  python -m bench capacity --from-endpoint prod-kokoro --write-fleet fleet.json \\
      --copy-plan artifacts/copy-plan-kokoro-82m.json

Exit 0 all placed (or warn: instances needed, fragmentation), 1 copies that fit no instance at
all, 2 bad input (nothing written).

A fleet file by hand (one g5.12xlarge with three of its four GPUs taken; a copy takes a whole
device on SageMaker, so copy_memory_mib is one device's memory):

""" + EXAMPLE_FLEET + """

CPU-only copies (one c7i.4xlarge, 12 of its 16 vCPUs requested; instances name the resources
they have, models what one copy requests; leave out what a copy does not request):

""" + EXAMPLE_CPU_FLEET

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fleet", type=Path, metavar="FILE", help="fleet file (JSON) to evaluate against")
    p.add_argument("--model", metavar="NAME", help="model (fleet file key; an inference component's name when read "
                   "from an endpoint) whose concurrency grows")
    p.add_argument("--delta-concurrency", type=float, metavar="N", help="requests in flight to add (> 0)")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON (for CI)")
    g = p.add_argument_group("reading a deployed endpoint")
    g.add_argument("--from-endpoint", metavar="NAME", help="read the fleet from this inference-component endpoint")
    g.add_argument("--write-fleet", type=Path, metavar="FILE", help="write the fleet read with --from-endpoint here")
    g.add_argument("--t-copy-s", type=float, metavar="S", help="planning T_copy, seconds (the copy plan's t_copy.planning_s)")
    g.add_argument("--t-total-s", type=float, metavar="S", help="planning T_total, seconds (the plan's t_total.planning_s)")
    g.add_argument("--concurrency-per-copy", type=float, metavar="N",
                   help="requests in flight per copy at the scale-out target (default: each component's copy-scaling target)")
    g.add_argument("--copy-plan", type=Path, metavar="FILE",
                   help="copy plan (bench copies --ttotal ...): supplies --t-copy-s, --t-total-s and --concurrency-per-copy "
                   "(flags given explicitly win)")
    g.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")


def load_fleet(path: Path) -> FleetState:
    """Read and validate a fleet file; every failure is a UsageError naming the file and the fix."""
    from pydantic import ValidationError

    from speech.plan.fleet import FleetState

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such fleet file; check --fleet or write one (see --help)") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read ({err.__class__.__name__}); pass a JSON fleet file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}: invalid JSON at line {err.lineno} column {err.colno} ({err.msg})") from None
    if isinstance(data, dict) and data.get("kind", "fleet") != "fleet":
        raise UsageError(f"{path}: is a {data.get('kind')!r} file, expected a fleet file (kind \"fleet\")")
    try:
        return FleetState.model_validate(data)
    except ValidationError as err:
        raise UsageError(
            describe_validation_error(err, str(path), label="field ") + "; fix the field (an example is in --help)"
        ) from None


def _times_from_copy_plan(args: argparse.Namespace) -> None:
    """Fill --t-copy-s, --t-total-s and --concurrency-per-copy from --copy-plan where not given."""
    from speech.files import load_artifact
    from speech.schema.copy_plan import CopyPlan

    if args.copy_plan is None:
        return
    plan = load_artifact(args.copy_plan, CopyPlan)
    if plan.t_total is None and args.t_total_s is None:
        raise UsageError(f"{args.copy_plan}: planned without a ttotal artifact, so it has no T_total; re-run bench copies "
                         "with --ttotal, or pass --t-total-s")
    if args.t_copy_s is None:
        args.t_copy_s = plan.t_copy.planning_s
    if args.t_total_s is None and plan.t_total is not None:
        args.t_total_s = plan.t_total.planning_s
    if args.concurrency_per_copy is None:
        args.concurrency_per_copy = plan.thresholds.c_scale_max


def _check_args(args: argparse.Namespace) -> None:
    evaluating = args.model is not None or args.delta_concurrency is not None
    if args.from_endpoint is None:
        if args.fleet is None:
            raise UsageError("pass --fleet FILE (or --from-endpoint NAME to read one from an endpoint)")
        if args.write_fleet is not None or args.copy_plan is not None:
            raise UsageError("--write-fleet and --copy-plan need --from-endpoint (a fleet file passed with --fleet is already written)")
    else:
        if args.fleet is not None:
            raise UsageError("pass either --fleet or --from-endpoint, not both")
        _times_from_copy_plan(args)
        missing = [f for f, v in (("--t-copy-s", args.t_copy_s), ("--t-total-s", args.t_total_s)) if v is None]
        if missing:
            raise UsageError(f"--from-endpoint needs {' and '.join(missing)} (AWS does not know them): pass --copy-plan "
                             "of a copy plan made with --ttotal, or the copy plan's planning T_copy and the plan's T_total")
        for flag, v in (("--t-copy-s", args.t_copy_s), ("--t-total-s", args.t_total_s),
                        ("--concurrency-per-copy", args.concurrency_per_copy)):
            if v is not None and not v > 0:
                raise UsageError(f"{flag}: must be > 0 (got {v:g})")
        if args.write_fleet is None and not evaluating:
            raise UsageError("--from-endpoint needs --write-fleet FILE, or --model and --delta-concurrency to evaluate")
    if evaluating and (args.model is None or args.delta_concurrency is None):
        raise UsageError("pass both --model NAME and --delta-concurrency N")
    if args.delta_concurrency is not None and not args.delta_concurrency > 0:
        raise UsageError(f"--delta-concurrency: must be > 0 requests in flight (got {args.delta_concurrency:g})")


def run(args: argparse.Namespace) -> int:
    from speech.files import atomic_write_text
    from speech.plan.capacity import evaluate_capacity

    _check_args(args)
    if args.from_endpoint is not None:
        from bench.aws import client as aws
        from bench.aws.fleet_read import read_fleet

        fleet = read_fleet(aws.session(args.region), args.from_endpoint, t_copy_s=args.t_copy_s,
                           t_total_s=args.t_total_s, concurrency_per_copy=args.concurrency_per_copy)
    else:
        fleet = load_fleet(args.fleet)
    evaluation = None
    if args.model is not None:
        if args.model not in fleet.models:
            raise UsageError(f"--model {args.model!r} is not in the fleet's models ({', '.join(sorted(fleet.models))})")
        evaluation = evaluate_capacity(fleet, args.model, args.delta_concurrency)
    if args.write_fleet is not None:
        atomic_write_text(args.write_fleet, fleet.model_dump_json(indent=2) + "\n")
        if evaluation is None and not args.json:
            print(f"wrote {args.write_fleet}: {len(fleet.instances)} instances, models {', '.join(sorted(fleet.models))} "
                  f"(placement {fleet.placement})")
    if evaluation is None:
        if args.json:
            print(fleet.model_dump_json(indent=2))
        return 0
    if args.json:
        print(evaluation.model_dump_json(indent=2))
    else:
        render(evaluation, fleet)
    sys.stdout.flush()
    return 1 if evaluation.verdict == "stop" else 0


def render(ev: CapacityEvaluation, fleet: FleetState) -> None:
    """Tables for a person: the fleet before and after, the parts and when they serve, findings."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from speech.plan.placement import RESOURCES, describe

    console = Console()
    m = fleet.models[ev.model]
    console.print(
        f"[bold]{escape(ev.model)}[/]: +{ev.delta_concurrency:g} in flight = {ev.copies_needed} "
        f"cop{'y' if ev.copies_needed == 1 else 'ies'} of {describe(m.request)} at {ev.concurrency_per_copy:g} in flight each"
    )
    placed = {p.instance: p for p in ev.placements}
    shown = [r for r, need in zip(RESOURCES, m.request, strict=True) if need > 0]
    heading = {"accelerator_memory_mib": "accel. MiB free", "cpu_cores": "cores free", "host_memory_mib": "host MiB free"}
    t = Table(title=f"running instances ({fleet.placement} placement)")
    for col in ("instance", "type", "copies added", *(heading[r] for r in shown)):
        t.add_column(col, justify="left" if col in ("instance", "type") else "right")
    for inst in fleet.candidates(ev.model):
        p = placed.get(inst.name)
        cells = []
        for r in shown:
            before = getattr(inst.free, r)
            after = getattr(p.free_after, r) if p else before
            cells.append(f"{before:g} -> {after:g}" if p else f"{before:g}")
        t.add_row(inst.name, inst.instance_type, str(p.copies) if p else "0", *cells)
    console.print(t)
    s = Table(title="serving")
    for col in ("part", "copies", "in flight", "serving after"):
        s.add_column(col, justify="left" if col == "part" else "right")
    for part in ev.serving:
        s.add_row(part.part, str(part.copies), f"{part.concurrency:g}", f"{part.serving_after_s:g} s")
    if ev.new_instances:
        s.caption = f"{ev.new_instances} new instance(s), {ev.copies_per_new_instance} copies each"
    console.print(s)
    mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]WARN[/]", "stop": "[red]STOP[/]"}
    for f in ev.findings:
        console.print(f"{mark[f.level]} {f.name}: {escape(f.message)}", highlight=False)
    console.print(f"verdict: {ev.verdict}")
