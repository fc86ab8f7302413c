"""``bench simulate``'s run, the one function the command calls (:func:`simulate_trace`): the plan
(given, or from the stack entry's inputs and the trace), a tuned plan beside it, every scaling
policy on the trace (speech.sim, docs/design.md §10), the floor, the hot-load comparison with
``--hot-load``, and the simulation artifact and plots written. The command renders."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.cli.bounds import RANGES
from bench.cli.options import plan_inputs
from bench.cli.progress import RunProgress, wanted
from bench.errors import UsageError
from bench.load.traces import load_history, load_trace
from bench.report.plots import plot_hot_load, plot_simulation
from speech.errors import PlanInputError
from speech.files import load_artifact, write_artifact
from speech.plan.copies import packing
from speech.plan.realtime import build_plan
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.bounds import SLO_SHARE
from speech.schema.instances import instance_spec
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.artifact import SEED_ROW, TUNED_ROW, SimulationArtifact, simulation_artifact
from speech.sim.fleet import simulate
from speech.sim.floor import floor_schedule
from speech.sim.hotload import CopyFleet, compare, render_table, run_copies
from speech.sim.instance import InstanceModel, build_instance
from speech.sim.names import POLICY_NAMES
from speech.sim.policies import AwsPolicy
from speech.sim.scaler import scaling_numbers
from speech.sim.traces import Trace


def _lowest_minute(arrivals) -> float:
    a = np.asarray(arrivals, dtype=float)
    w = min(60, a.size)
    c = np.concatenate([[0.0], np.cumsum(a)])
    return float(((c[w:] - c[:-w]) / w).min())


def resolve_plan(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, trace: Trace) -> PlanArtifact:
    if args.plan is not None:
        plan = load_artifact(args.plan, PlanArtifact)
        if plan.inputs.qmax_sha256 != canonical_sha256(q) or plan.inputs.ttotal_sha256 != canonical_sha256(t):
            raise UsageError(
                f"--plan {args.plan} was planned from other artifacts than --qmax/--ttotal (sha256 differs); "
                "pass the artifacts the plan was made from, or drop --plan to plan here"
            )
        return plan
    ns = argparse.Namespace(**vars(args))
    if ns.peak_rps is None:
        ns.peak_rps = round(trace.peak_rps, 3)
    if ns.trough_rps is None:
        ns.trough_rps = round(min(max(_lowest_minute(trace.arrivals), 1e-3), ns.peak_rps), 3)
    return build_plan(q, t, plan_inputs(ns, q), allow_config_mismatch=True)


def resolve_tuned_plan(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, seed: PlanArtifact) -> PlanArtifact:
    """The --tuned-plan artifact, refused unless it was planned from these qmax/ttotal artifacts
    and for the seed's SLO (the table judges both plans at one SLO, on one instance model)."""

    path = args.tuned_plan
    tuned = load_artifact(path, PlanArtifact)
    if tuned.inputs.qmax_sha256 != canonical_sha256(q) or tuned.inputs.ttotal_sha256 != canonical_sha256(t):
        raise UsageError(
            f"--tuned-plan {path} was planned from other artifacts than --qmax/--ttotal (sha256 differs); pass the "
            "tuned plan bench tune made from these artifacts, or run bench tune on them"
        )
    if abs(tuned.inputs.slo_ms - seed.inputs.slo_ms) > EPS:
        raise UsageError(
            f"--tuned-plan {path} plans for an SLO of {tuned.inputs.slo_ms:g} ms, the seed plan for "
            f"{seed.inputs.slo_ms:g} ms: both rows are judged at one SLO; tune at the seed's (bench tune "
            f"--slo-ms {seed.inputs.slo_ms:g}) or pass --slo-ms {tuned.inputs.slo_ms:g}"
        )
    return tuned


def add_tuned_rows(tuned: PlanArtifact, q: QmaxArtifact, t: TtotalArtifact, trace: Trace, model, runs: list, sums: list,
                   slo_share: float) -> tuple[list, list]:
    """The tuned plan's run on the same trace and instance model, right after the seed's row; the
    seed's row renamed ``seed plan``, the tuned one's ``tuned plan``."""

    _, [run], [summary] = simulate(tuned, q, t, trace.arrivals, policies=("plan",), model=model, peak_rps=trace.peak_rps,
                                   slo_share=slo_share)
    run.policy = TUNED_ROW
    for r in runs:
        if r.policy == "plan":
            r.policy = SEED_ROW
    sums = [replace(s, policy=SEED_ROW) if s.policy == "plan" else s for s in sums]
    names = [s.policy for s in sums]
    at = names.index(SEED_ROW) + 1 if SEED_ROW in names else 0
    return runs[:at] + [run] + runs[at:], sums[:at] + [replace(summary, policy=TUNED_ROW)] + sums[at:]


@dataclass(frozen=True)
class Simulated:
    """A trace simulated: the artifact, the per-policy runs, the instance model and the plan (for the
    report), the tuned plan if one was given, the hot-load comparison (with --hot-load) and the files
    written, in order."""

    artifact: SimulationArtifact
    runs: list
    model: InstanceModel
    plan: PlanArtifact
    tuned: PlanArtifact | None
    hot: dict | None
    written: list[Path]


def simulate_trace(args: argparse.Namespace) -> Simulated:
    """Simulate ``--trace`` against every policy of ``--policies`` (and a tuned plan) for the parsed
    flags of ``bench simulate``; writes the simulation artifact (and plots with --plot)."""
    q = load_artifact(args.qmax, QmaxArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown or not policies:
        raise UsageError(
            f"--policies {args.policies!r}: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICY_NAMES)}"
        )
    if not SLO_SHARE.holds(args.slo_share):  # a caller that did not parse the flag (its range is this bound)
        raise UsageError(f"--slo-share {args.slo_share:g}: outside {RANGES['--slo-share'].text()} (e.g. 0.995)")
    if args.price_per_hour is not None and not args.price_per_hour > 0:
        raise UsageError(f"--price-per-hour {args.price_per_hour:g}: must be > 0 (USD per instance-hour)")
    if q.q_max < 1:
        raise UsageError(f"--qmax {args.qmax}: Q_max is 0 (no level met the SLO); there is no instance to simulate")
    trace = load_trace(args.trace, args.seed)
    if trace.total_requests <= 0:
        raise UsageError(f"--trace {args.trace!r}: the trace has no requests")
    plan = resolve_plan(args, q, t, trace)
    tuned = resolve_tuned_plan(args, q, t, plan) if getattr(args, "tuned_plan", None) is not None else None
    history = None
    if getattr(args, "history", None):
        _, history = load_history(args.history, None)
    model = build_instance(q, t, slo_ms=plan.inputs.slo_ms)

    with RunProgress("simulate", total=len(policies) + (tuned is not None), enabled=wanted(args), unit="policies",
                     every_s=0.0) as progress:
        def on_policy(name: str, done: int, _total: int) -> None:
            progress.update(done, f"{name} done")

        model, runs, sums = simulate(plan, q, t, trace.arrivals, policies=policies, model=model, peak_rps=trace.peak_rps,
                                     slo_share=args.slo_share, history=history, on_policy=on_policy)
        if tuned is not None:
            runs, sums = add_tuned_rows(tuned, q, t, trace, model, runs, sums, args.slo_share)
            progress.advance(1, "tuned plan done")

    floor = floor_schedule(model, trace.arrivals, plan.inputs.slo_ms, args.slo_share)
    art = simulation_artifact(plan=plan, qmax=q, ttotal=t, trace=trace, model=model, summaries=sums,
                              price_per_hour=args.price_per_hour, created_at=datetime.now(UTC), runs=runs,
                              tuned_plan=tuned, floor_hours=floor.instance_hours)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in trace.name)
    path = args.out / f"simulation-{plan.model}-{safe}.json"
    written = [write_artifact(path, art)]
    if args.plot:
        written += plot_simulation(art, runs, model, plan, args.out / f"simulation-{plan.model}-{safe}")
    hot = hot_load(args, plan, model, trace, written, safe) if args.hot_load else None
    return Simulated(art, runs, model, plan, tuned, hot, written)


def hot_load(args: argparse.Namespace, plan: PlanArtifact, model, trace: Trace, written: list, safe: str) -> dict:
    """instance-only vs hot-load on the same trace and plan (speech.sim.hotload); the table, its rows as
    JSON, and a timeline PNG with --plot."""

    copy = load_artifact(args.hot_load, CopyArtifact)
    if copy.model != plan.model:
        raise UsageError(f"--hot-load {args.hot_load} is a copy of {copy.model!r}, the plan is for {plan.model!r}; "
                         "pass a copy of the same model")
    itype = args.hot_load_instance_type or plan.fingerprint.instance_type
    if args.copies_fit is not None:
        if args.copies_fit < 1:
            raise UsageError(f"--copies-fit {args.copies_fit}: must be at least 1")
        fit, why = args.copies_fit, "--copies-fit"
    else:
        try:
            pk = packing(copy, instance_spec(itype))
        except PlanInputError as err:
            raise UsageError(f"--hot-load-instance-type {itype!r}: {err}; or give --copies-fit N") from None
        if pk.copies_per_instance < 1:
            raise UsageError(f"a copy of {copy.model} ({copy.footprint.packing_memory_mib:g} MiB, {copy.footprint.device}) does not "
                             f"fit an {itype} (limited by {pk.limited_by}); pick a larger --hot-load-instance-type")
        fit, why = pk.copies_per_instance, f"{itype}, limited by {pk.limited_by}"
        if copy.footprint.device == "cpu" and copy.footprint.cpu_cores is None:
            why += "; CPU cores per copy not measured, so this is an upper bound: see --copies-fit"
    if args.headroom_copies < 0:
        raise UsageError(f"--headroom-copies {args.headroom_copies}: must be >= 0")
    s = scaling_numbers(plan)
    fleet = CopyFleet(headroom_copies=args.headroom_copies, instance_memory_mib=float(fit), copy_memory_mib=1.0, t_copy_s=copy.t_copy_s,
                      initial_instances=s.min_instances, min_instances=s.min_instances, instance_type=itype)
    rows = compare(model, trace.arrivals, lambda: AwsPolicy(s, model.cloudwatch_ratio, model.q_max), fleet,
                   slo_ms=plan.inputs.slo_ms, planning_total_s=plan.t_total.planning_s)
    head = (f"hot loading: {fit} copies fit one instance ({why}); instance-only adds instances of one copy"
            + (f" (x{fit}: of {fit} copies)" if fit > 1 else "") + f"; a copy serves after T_copy {copy.t_copy_s:.1f} s "
            f"({args.hot_load.name}), a new instance after {model.startup_s:.1f} s; both fleets start with "
            f"{s.min_instances} instances and run the plan's scaling on the copy count; hot-load keeps "
            f"{args.headroom_copies} copies of headroom")
    foot = ("copies on one instance are simulated as independent servers at the measured per-copy throughput "
            "(docs/design.md §10.8); peak inst counts instances, inst-h bills instances")
    if args.plot:
        runs = [run_copies(model, trace.arrivals, AwsPolicy(s, model.cloudwatch_ratio, model.q_max), fleet, mode)
                for mode in ("instance-only", "hot-load")]  # the plot: one copy per instance vs hot loading
        written.append(plot_hot_load(runs, args.out / f"hotload-{plan.model}-{safe}.png", trace.spec))

    def totals(summary) -> dict:  # the per-block counts are the tuner's evidence, not a result
        return {k: v for k, v in asdict(summary).items() if not k.startswith("block_")}

    return {"copies_fit": fit, "t_copy_s": copy.t_copy_s, "startup_s": model.startup_s,
            "results": [{**totals(r.summary), "peak_copies": r.peak_copies, "first_added_serving_s": r.first_added_serving_s,
                         "hot_loaded": r.hot_loaded, "new_instances": r.new_instances} for r in rows],
            "table": "\n".join([head, "", render_table(rows), "", foot])}
