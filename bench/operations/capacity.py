"""``bench capacity``'s evaluation, the one function the command calls (:func:`evaluate`): the fleet
(a fleet file, or read from a deployed endpoint) and where more concurrency for a model goes:
copies into the spare room of running instances first, new instances for the rest."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bench.aws import client as aws
from bench.aws.fleet_read import read_fleet
from bench.errors import UsageError
from speech.errors import describe_validation_error
from speech.files import atomic_write_text, load_artifact
from speech.plan.capacity import CapacityEvaluation, evaluate_capacity
from speech.plan.fleet import FleetState
from speech.schema.copy_plan import CopyPlan


def load_fleet(path: Path) -> FleetState:
    """Read and validate a fleet file; every failure is a UsageError naming the file and the fix."""

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


@dataclass(frozen=True)
class Capacity:
    """The fleet (read from ``--fleet`` or an endpoint), the evaluation for ``--model`` (None without
    one) and where the fleet was written (``--write-fleet``), if it was."""

    fleet: FleetState
    evaluation: CapacityEvaluation | None
    fleet_written: Path | None


def evaluate(args: argparse.Namespace) -> Capacity:
    """The fleet and, with ``--model``, where ``--delta-concurrency`` more goes, for the parsed flags
    of ``bench capacity``; writes the fleet read from an endpoint with ``--write-fleet``."""
    _check_args(args)
    if args.from_endpoint is not None:
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
    return Capacity(fleet, evaluation, args.write_fleet)
