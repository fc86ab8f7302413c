"""``bench simulate``: a traffic trace against a simulated fleet of the measured instance, every
policy side by side (speech.sim, docs/design.md §10)."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.plan_artifacts import PlanArtifact
    from speech.sim.artifact import SimulationArtifact
    from speech.sim.traces import Trace
from bench.errors import UsageError
from speech.schema.units import EPS
from speech.sim.names import ATTRIBUTION, BUILTIN_TRACES, DEFAULT_SLO_SHARE, POLICY_NAMES

DESCRIPTION = f"""\
Replay a traffic trace against a simulated fleet of the measured instance and compare scaling
policies on the same traffic: share answered within the SLO, share rejected at the gate, TTFAB
p95/p99, minutes in violation, instance-hours and cost (as a ratio to the floor), scaling
actions, changes refused while the endpoint was Updating, flaps and peak instances.

floor: the fewest instance-hours that keep --slo-share of the WHOLE trace's requests within the
SLO, clairvoyant, no start-up, at most one change a minute, on the simulator's instance model at
each minute's mean rate (a Lagrangian over minutes); its schedule is then run like any policy.
perfect-forecast: clairvoyant under the plan's mechanics (capacity asked for a start-up ahead, one
endpoint update at a time, the plan's floor and cap). Under the table: plan -> perfect-forecast
(what a forecast could still win) and perfect-forecast -> floor (what the platform's mechanics
cost). target-floor is ceil(arrivals / X(C_scale_max)) every second (the cost at the plan's
utilization, not SLO-meeting). hpa-v2 and keda: the plan as a Kubernetes HorizontalPodAutoscaler on
the pods' in-flight requests (target C_scale_max, the plan's floor, cap and scale-in as scaleDown) and
as a KEDA ScaledObject (an External metric), as the controller acts: a 15 s sync, 10 % tolerance,
pods still starting counted as 0 on scale-up, stabilization windows, behavior policies, no one change
at a time (speech.sim.hpa).

The instance is the measurement: throughput and TTFAB vs occupancy from the qmax ladder, the gate
at Q_max, new instances in service after the ttotal artifact's measured phases. Scaling numbers
come from the plan (--plan FILE, or planned here from --peak-rps etc.; without --peak-rps the
trace's busiest minute and quietest minute are the peak and trough).

Traces (--trace):
  diurnal:peak=5000[,trough=250,hours=24,spikes=3,spike_factor=1.2,spike_s=300,seed=1]
  steady:rps=50[,duration=3600]     step:base=50[,factor=3,at=600,duration=1800]
  csv:PATH[,peak=N][,speedup=X|duration=S][,size=COLUMN][,scale=superpose|multiply][,shift=S][,seed=N]
      (one row per request, timestamp first; peak=N scales by superposing independent copies shifted
      within +-shift s (default 300), or with scale=multiply by multiplying counts: bursts as clumps)
  {' / '.join(BUILTIN_TRACES)}[:peak=N,...]   ({ATTRIBUTION})

Policies (--policies, default all): {', '.join(POLICY_NAMES)}.

Hot loading (--hot-load COPY_FILE from bench tcopy): the plan's scaling on copies, once adding
instances only and once placing copies into spare memory first (speech.plan.capacity's best fit),
side by side: SLO share, rejected share, instance-hours, and how soon the first added copy served.

A tuned plan (--tuned-plan FILE, the plan-<model>-tuned.json bench tune wrote from the same qmax
and ttotal artifacts, at the seed's SLO) runs on the same trace beside the seed (--plan, or the plan
made from the flags): the rows read "seed plan" and "tuned plan", and the lines under the table
give the tuned plan's promise (its simulated SLO share) next to what this trace got.

  python -m bench simulate --qmax Q.json --ttotal T.json --peak-rps 5000 --trace diurnal:peak=5000
  python -m bench simulate --qmax Q.json --ttotal T.json --plan plan.json --trace azure-conv:peak=500 --plot
  python -m bench simulate --qmax Q.json --ttotal T.json --plan plan.json --tuned-plan plan-kokoro-82m-tuned.json \\
      --trace diurnal:peak=20,hours=1

Writes simulation-<model>-<trace>.json (+ PNGs with --plot) into --out. Exit 0 ok, 2 bad input.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact (bench qmax)")
    p.add_argument("--ttotal", required=True, type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--plan", type=Path, metavar="FILE", help="plan artifact (bench plan); else planned from the flags below")
    p.add_argument("--tuned-plan", type=Path, metavar="FILE",
                   help="tuned plan artifact (bench tune's plan-<model>-tuned.json, from the same --qmax/--ttotal, at the "
                        "seed's SLO): simulated beside the seed (--plan or the flags); rows 'seed plan' and 'tuned plan'")
    p.add_argument("--peak-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's busiest minute)")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's quietest minute)")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="plan input (default: the ladder's SLO)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="plan input (default 1.25)")
    p.add_argument("--min-instances", type=int, default=1, metavar="N", help="plan input (default 1)")
    p.add_argument("--qmax-derate", type=float, default=1.0, metavar="X", help="plan input: floor(Q_max x X), 0 < X <= 1 (default 1)")
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic: a generator, a CSV or a shipped trace (see above)")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="seed for generated traces (default: the spec's, else 1)")
    p.add_argument("--history", default=None, metavar="SPEC",
                   help="request-rate history before the trace (a trace spec, or cloudwatch:PATH as for bench forecast), "
                        "what the predictive policy forecasts from besides the trace so far (default: none; under a day of "
                        "data predictive is the reactive plan)")
    p.add_argument("--policies", "--policy", dest="policies", default=",".join(POLICY_NAMES), metavar="A,B,...",
                   help="policies to run (default all; --policy is the same flag)")
    p.add_argument("--slo-share", type=float, default=DEFAULT_SLO_SHARE, metavar="X",
                   help=f"share of the trace's requests the floor keeps within the SLO (default {DEFAULT_SLO_SHARE})")
    p.add_argument("--price-per-hour", type=float, default=None, metavar="USD", help="instance price, for costs in USD")
    p.add_argument("--out", type=Path, default=Path("out/simulate"), metavar="DIR", help="artifact directory (default out/simulate)")
    p.add_argument("--plot", action="store_true", help="also write one timeline of every policy overlaid and a cost-vs-SLO scatter (PNG)")
    p.add_argument("--json", action="store_true", help="print the simulation artifact as JSON instead of the table")
    g = p.add_argument_group("hot loading (copies before instances)")
    g.add_argument("--hot-load", type=Path, metavar="COPY_FILE",
                   help="copy artifact (bench tcopy): also run the plan's scaling on copies of the qmax ladder's server, "
                        "once with every added copy on a new instance (instance-only) and once with copies placed into spare "
                        "memory first, serving after the artifact's T_copy (hot-load), and print both side by side")
    g.add_argument("--hot-load-instance-type", metavar="TYPE",
                   help="instance type the copies are packed into (default: the plan's; speech.plan.copies.packing decides how "
                        "many fit: whole GPUs per copy, host memory, CPU cores when measured)")
    g.add_argument("--headroom-copies", type=int, default=0, metavar="N",
                   help="hot-load: keep N copies' worth of spare memory on running or starting instances, starting empty "
                        "instances when a scale-out leaves less (default 0: instances only when copies do not fit, which "
                        "packs the fleet full and leaves the next spike to wait for new instances)")
    g.add_argument("--copies-fit", type=int, metavar="N",
                   help="override: copies one instance holds (a what-if: MIG partitions, a bigger instance)")


def _lowest_minute(arrivals) -> float:
    import numpy as np

    a = np.asarray(arrivals, dtype=float)
    w = min(60, a.size)
    c = np.concatenate([[0.0], np.cumsum(a)])
    return float(((c[w:] - c[:-w]) / w).min())


def resolve_plan(args: argparse.Namespace, q: QmaxArtifact, t: TtotalArtifact, trace: Trace) -> PlanArtifact:
    from bench.cli.options import plan_inputs
    from speech.files import load_artifact
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import canonical_sha256
    from speech.schema.plan_artifacts import PlanArtifact

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
    from speech.files import load_artifact
    from speech.schema.artifacts import canonical_sha256
    from speech.schema.plan_artifacts import PlanArtifact

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
    from dataclasses import replace

    from speech.sim.artifact import SEED_ROW, TUNED_ROW
    from speech.sim.fleet import simulate

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


def promise_lines(a: SimulationArtifact, tuned: PlanArtifact) -> list[str]:
    """The tuned plan's promise (its own simulation, bench tune) next to this trace's row, and the
    tuned row against the seed's."""
    from bench.report.tuned import promise_check
    from speech.sim.artifact import TUNED_ROW

    row, seed, check = a.result(TUNED_ROW), a.seed_result(), promise_check(tuned, a)
    if row is None or check is None:
        return []
    lines = [f"tuned plan: sized for {100 * check.slo_share:.2f}% within the SLO; on this trace "
             f"{100 * row.within_slo_share:.2f}%: " + ("keeps it" if check.kept else f"MISSES it: {check.why}")]
    pr = tuned.promise
    if pr is not None:
        hours = f"{pr.trace_hours:g} h " if pr.trace_hours else ""
        lines.append(f"  promise (bench tune, {hours}training trace {pr.trace_sha256[:12]}, seed {pr.seed}): "
                     f"{100 * pr.slo_share:.2f}% within the SLO, {100 * pr.rejected_share:.2f}% refused, "
                     f"{pr.instance_hours:.1f} inst-h; this trace: {100 * row.within_slo_share:.2f}%, "
                     f"{100 * row.rejected_share:.2f}% rejected, {row.instance_hours:.1f} inst-h")
        if pr.slo_share_low is not None and pr.slo_share_high is not None:
            where = ("BELOW its low end" if check.below_low else
                     "above its high end" if row.within_slo_share > pr.slo_share_high + EPS else "within it")
            lines.append(f"  promised interval over its draws: {100 * pr.slo_share_low:.2f}-{100 * pr.slo_share_high:.2f}% "
                         f"within the SLO, {pr.instance_hours_low:.1f}-{pr.instance_hours_high:.1f} inst-h; this trace is "
                         f"{where}")
    else:
        lines.append("  the tuned plan carries no promise (not written by bench tune): nothing to compare with")
    if seed is not None and seed.instance_hours > 0:
        d = row.instance_hours / seed.instance_hours - 1
        lines.append(f"  vs the seed plan: {100 * d:+.1f}% instance-hours, "
                     f"{100 * (row.within_slo_share - seed.within_slo_share):+.2f} points within the SLO")
    return lines


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def render(a: SimulationArtifact) -> str:
    tr = a.trace
    lines = [
        f"simulation of {a.model}: trace {tr.spec} ({tr.duration_s / 3600:.2f} h, {tr.requests:,.0f} requests, "
        f"peak minute {tr.peak_rps:,.1f} rps{', seed ' + str(tr.seed) if tr.seed is not None else ''})",
        f"SLO {a.slo_ms:g} ms p95 TTFAB; new instances serve after {a.startup_s:.1f} s; planning T_total "
        f"{a.planning_total_s:.1f} s",
    ]
    if tr.attribution:
        lines.append(f"trace: {tr.attribution}")
    if tr.scaling_detail:
        lines.append(f"rate scaling ({tr.scaling}): {tr.scaling_detail}")
    head = ("policy", "in SLO", "rejected", "p95 ms", "p99 ms", "viol min", "inst-h", "cost", "x floor", "out", "in",
            "refused", "flaps", "peak")
    rows = []
    for r in a.results:
        cost = _fmt(r.cost_usd, ",.2f") if r.cost_usd is not None else "-"
        rows.append((
            r.policy, f"{100 * r.within_slo_share:.2f}%", f"{100 * r.rejected_share:.2f}%", _fmt(r.ttfab_p95_ms, ".0f"),
            _fmt(r.ttfab_p99_ms, ".0f"), str(r.violation_minutes), f"{r.instance_hours:,.1f}", cost,
            _fmt(r.cost_vs_floor, ".2f"), str(r.scale_out_actions), str(r.scale_in_actions), str(r.refused_changes), str(r.flaps),
            str(r.peak_instances),
        ))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    fmt_row = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
    lines += ["", fmt_row(head), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in rows]
    lines += [
        "",
        "in SLO: answered within the SLO (a rejected request never is); p95/p99: answered requests; viol min: "
        "minutes with under 95% in SLO; cost without --price-per-hour: instance-hours only; refused: changes asked "
        "for while the endpoint was Updating (SageMaker applies one at a time); flaps: scale-in then scale-out within "
        "the planning T_total; x floor: instance-hours over the floor's",
    ]
    from speech.sim.artifact import cost_gaps

    gaps = cost_gaps(a)
    if gaps:
        lines += [""] + gaps
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from bench.load.traces import load_trace
    from speech.files import load_artifact, write_artifact
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.sim.artifact import simulation_artifact
    from speech.sim.fleet import simulate
    from speech.sim.instance import build_instance

    q = load_artifact(args.qmax, QmaxArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown or not policies:
        raise UsageError(
            f"--policies {args.policies!r}: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICY_NAMES)}"
        )
    if not 0 < args.slo_share < 1:
        raise UsageError(f"--slo-share {args.slo_share:g}: must be between 0 and 1 (e.g. 0.995)")
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
        from bench.load.traces import load_history

        _, history = load_history(args.history, None)
    model = build_instance(q, t, slo_ms=plan.inputs.slo_ms)
    from bench.cli.progress import RunProgress, wanted

    with RunProgress("simulate", total=len(policies) + (tuned is not None), enabled=wanted(args), unit="policies",
                     every_s=0.0) as progress:
        model, runs, sums = simulate(plan, q, t, trace.arrivals, policies=policies, model=model, peak_rps=trace.peak_rps,
                                     slo_share=args.slo_share, history=history,
                                     on_policy=lambda name, done, total: progress.update(done, f"{name} done"))
        if tuned is not None:
            runs, sums = add_tuned_rows(tuned, q, t, trace, model, runs, sums, args.slo_share)
            progress.advance(1, "tuned plan done")
    from speech.sim.floor import floor_schedule

    floor = floor_schedule(model, trace.arrivals, plan.inputs.slo_ms, args.slo_share)
    art = simulation_artifact(plan=plan, qmax=q, ttotal=t, trace=trace, model=model, summaries=sums,
                              price_per_hour=args.price_per_hour, created_at=datetime.now(UTC), runs=runs,
                              tuned_plan=tuned, floor_hours=floor.instance_hours)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in trace.name)
    path = args.out / f"simulation-{plan.model}-{safe}.json"
    written = [write_artifact(path, art)]
    if args.plot:
        from bench.report.plots import plot_simulation

        written += plot_simulation(art, runs, model, plan, args.out / f"simulation-{plan.model}-{safe}")
    hot = hot_load(args, plan, model, trace, written, safe) if args.hot_load else None
    if args.json:
        if hot is None:
            print(art.model_dump_json(indent=2))
        else:
            import json

            print(json.dumps({"simulation": art.model_dump(mode="json"), "hot_load": hot}, indent=2))
    else:
        print(render(art))
        if tuned is not None:
            print("\n" + "\n".join(promise_lines(art, tuned)))
        if hot is not None:
            print("\n" + hot["table"])
        print("\nwrote " + ", ".join(str(p) for p in written))
    sys.stdout.flush()
    from bench.report.runs import simulation_report

    args._report = simulation_report(art, runs, model, plan)
    return 0


def hot_load(args: argparse.Namespace, plan: PlanArtifact, model, trace: Trace, written: list, safe: str) -> dict:
    """instance-only vs hot-load on the same trace and plan (speech.sim.hotload); the table, its rows as
    JSON, and a timeline PNG with --plot."""
    from dataclasses import asdict

    from speech.errors import PlanInputError
    from speech.files import load_artifact
    from speech.plan.copies import packing
    from speech.schema.artifacts import CopyArtifact
    from speech.schema.instances import instance_spec
    from speech.sim.hotload import CopyFleet, compare, render_table
    from speech.sim.policies import AwsPolicy
    from speech.sim.scaler import scaling_numbers

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
        from bench.report.plots import plot_hot_load
        from speech.sim.hotload import run_copies

        runs = [run_copies(model, trace.arrivals, AwsPolicy(s, model.cloudwatch_ratio, model.q_max), fleet, mode)
                for mode in ("instance-only", "hot-load")]  # the plot: one copy per instance vs hot loading
        written.append(plot_hot_load(runs, args.out / f"hotload-{plan.model}-{safe}.png", trace.spec))
    def totals(summary) -> dict:  # the per-block counts are the tuner's evidence, not a result
        return {k: v for k, v in asdict(summary).items() if not k.startswith("block_")}

    return {"copies_fit": fit, "t_copy_s": copy.t_copy_s, "startup_s": model.startup_s,
            "results": [{**totals(r.summary), "peak_copies": r.peak_copies, "first_added_serving_s": r.first_added_serving_s,
                         "hot_loaded": r.hot_loaded, "new_instances": r.new_instances} for r in rows],
            "table": "\n".join([head, "", render_table(rows), "", foot])}
