"""``bench tune``: search the deployable scaling parameters for the fewest instance-hours that keep
the SLO share on simulated days of a trace (speech.sim.tune, docs/design.md §10.10)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    import numpy as np

    from speech.sim.artifact import Promise, TuneArtifact
    from speech.sim.tune import Candidate

from bench.cli.parallel import add_jobs_argument, process_map
from bench.errors import UsageError
from speech.sim.names import DEFAULT_SLO_SHARE, PROMISE_MISS_CHANCE, PROMISE_UNSEEN_DRAWS

DEFAULT_DRAWS = 5
"""Independent draws of the traffic every candidate is judged on: one draw is not the traffic (the
next draw of the same users can land below the share a plan tuned on one kept)."""
MAX_DRAWS = 50

DESCRIPTION = f"""\
Search the scaling parameters for the fewest instance-hours that keep --slo-share of the requests
within the SLO, on simulated days of --trace (the bench simulate instance model and AWS mechanics).

Knobs, all plan inputs, each inside the safety bound bench plan checks: the surge ratio, the target
as a share of Q_max (at most 1 - h), the scale-out alarm's datapoints, the floor, and the scale-in:
the share of the fleet per step (at most 1 - C_scale_min / C_scale_max, so the smaller fleet stays
under the target), its window and its cooldown (at least the window and the planning T_total). The
seed formulas (bench plan) are where the search starts; each tuned value is printed next to its
seed with the reason. Scheduled floors and the scale-out cooldown stay as given.

Judges every candidate on --draws independent draws of the traffic (generator seeds, or
superposition seeds of a file trace) and keeps the cheapest whose share BOUND for draws it has not
seen keeps --slo-share: min(lowest share, mean - t * sd * sqrt(1 + 1/n)) over the n draws, t the
Student-t quantile that leaves at most a {PROMISE_MISS_CHANCE:.0%} chance that any of
{PROMISE_UNSEEN_DRAWS} further draws falls below it (one draw: its share; sd: the draws' own, or,
when that is implausibly small, the spread their 24 blocks show). From a seed that misses, the
cheapest one-knob move that keeps it; where no single knob helps, pairs of two. Checks the winner on
--holdout-days other draws, on the first draw with its spikes raised by the surge ratio, and
shifted by an hour. Writes the tuned plan (plan-<model>-tuned.json: the tuned plan inputs, their
reasons and the promise in inputs.promise: simulated SLO share and instance-hours as the mean over
the draws with their lowest and highest (slo_share_low/high, instance_hours_low/high), the share
bound (slo_share_bound), rejected share, cost vs the floor, the trace's sha256, seed, simulator
version) and
tune-<model>-<trace>.json (every knob seed vs tuned, the checks). Exit 0 when the tuned plan keeps the
share on every check, 1 when a check missed it, 2 bad input (nothing written).

Kubernetes (--platform kubernetes, --autoscaler hpa|keda): the plan as speech.deploy.kubernetes
renders it is the seed HPA; the search moves the HPA's own knobs (the target as a share of Q_max,
the scale-down window and policy, minReplicas, with keda daily floors learned from the training draws) with
the same rule and bound, simulated as the HPA controller acts (bench simulate's hpa-v2/keda), and
writes <autoscaler>-<model>-<trace>.json with the tuned spec as autoscaling/v2 fields.

  python -m bench tune --qmax Q.json --ttotal T.json --trace diurnal:peak=5000
  python -m bench tune --platform kubernetes --qmax Q.json --ttotal T.json --trace diurnal:peak=5000
  python -m bench tune --qmax Q.json --ttotal T.json --trace azure-conv:peak=500 --slo-share 0.995 --json

Default --slo-share {DEFAULT_SLO_SHARE}.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact (bench qmax)")
    p.add_argument("--ttotal", required=True, type=Path, metavar="FILE", help="ttotal artifact (bench ttotal)")
    p.add_argument("--trace", required=True, metavar="SPEC", help="traffic, as for bench simulate (a generator or a CSV)")
    p.add_argument("--slo-share", type=float, default=DEFAULT_SLO_SHARE, metavar="X",
                   help=f"share of requests to answer within the SLO on every training day (default {DEFAULT_SLO_SHARE})")
    p.add_argument("--slo-ms", type=float, default=None, metavar="MS", help="SLO (default: the ladder's)")
    p.add_argument("--peak-rps", type=float, default=None, metavar="N", help="plan input (default: the trace's busiest minute)")
    p.add_argument("--trough-rps", type=float, default=None, metavar="N",
                   help="plan input (default: the first training day's quietest minute)")
    p.add_argument("--surge-ratio", type=float, default=1.25, metavar="X", help="the seed's surge ratio (default 1.25)")
    p.add_argument("--draws", "--train-days", dest="draws", type=int, default=DEFAULT_DRAWS, metavar="N",
                   help=f"independent draws of the traffic (generator seeds, or superposition seeds of a file trace) every "
                        f"candidate is judged on; the cheapest whose share bound for unseen draws (from the draws' mean and "
                        f"spread, at most their lowest) keeps --slo-share wins, and the promise records the mean, lowest, "
                        f"highest and the bound (default {DEFAULT_DRAWS}; --train-days is the old name)"),
    p.add_argument("--holdout-days", type=int, default=2, metavar="N", help="days the winner is checked on (default 2)")
    p.add_argument("--seed", type=int, default=1, metavar="N", help="first training day's seed (default 1)")
    p.add_argument("--forecast-history", default=None, metavar="SPEC",
                   help="request-rate history before the days tuned on (a trace spec, or cloudwatch:PATH as for bench "
                        "forecast), at least three whole days ending at 00:00: forecast floors from it become one more knob "
                        "(off, or sized for the forecast's 0.5, 0.75 or 0.9 quantile)")
    p.add_argument("--out", type=Path, default=Path("out/tune"), metavar="DIR", help="artifact directory (default out/tune)")
    p.add_argument("--json", action="store_true", help="print the tune artifact as JSON instead of the table")
    p.add_argument("--no-progress", action="store_true", help="no progress display (it goes to stderr; -q and --json also turn it off)")
    p.add_argument("--platform", choices=("sagemaker", "kubernetes"), default="sagemaker",
                   help="whose knobs to tune: sagemaker (the plan inputs, default) or kubernetes (the plan rendered as an "
                        "HPA: target, scale-down window and policy, minReplicas, with keda scheduled floors; writes "
                        "hpa-<model>-<trace>.json)")
    p.add_argument("--autoscaler", choices=("hpa", "keda"), default="hpa",
                   help="with --platform kubernetes: an autoscaling/v2 HPA on the Pods metric (default) or a KEDA "
                        "ScaledObject (an External metric)")
    add_jobs_argument(p, "the simulated days")


def with_options(spec: str, **opts) -> str:
    """The spec with keys set (replacing any already there)."""
    from speech.sim.traces import parse_spec

    kind, path, old = parse_spec(spec)
    old.update({k: str(v) for k, v in opts.items()})
    head = kind if path is None else f"{kind}:{path}"
    body = ",".join(f"{k}={v}" for k, v in old.items())
    return f"{head}{',' if path is not None else ':'}{body}" if body else head


def _day(spec: str, seed: int) -> np.ndarray:
    from bench.load.traces import load_trace

    return load_trace(with_options(spec, seed=seed)).arrivals


def _promise(c: Candidate, target: float, spec: str, sha: str, seed: int) -> Promise:
    import numpy as np

    from speech.sim.artifact import Promise
    from speech.sim.tune import SIMULATOR_VERSION

    return Promise(
        slo_share_target=target, within_slo_share=round(float(np.mean([d.within_slo_share for d in c.days])), 6),
        within_slo_share_worst_day=round(c.worst_share, 6), rejected_share=round(c.rejected, 6),
        instance_hours=round(c.hours, 3), cost_vs_floor=round(c.x_floor, 4), trace=spec, trace_sha256=sha, seed=seed,
        simulator_version=SIMULATOR_VERSION, **_interval(c), draws=len(c.days),
        slo_share_bound_sd=round(c.share_bound.sd, 6), slo_share_bound_t=None if c.share_bound.t is None else round(c.share_bound.t, 4),
    )


def _interval(c: Candidate) -> dict[str, float]:
    """The promise's interval over the draws and the bound it was chosen by (rounded as the
    promise's other numbers)."""
    return {"slo_share_low": round(c.worst_share, 6), "slo_share_high": round(c.best_share, 6),
            "slo_share_bound": round(c.share_bound.bound, 6),
            "instance_hours_low": round(c.hours_low, 3), "instance_hours_high": round(c.hours_high, 3)}


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from speech.files import load_artifact, write_artifact
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
    from speech.schema.config import PlanInputs
    from speech.schema.config import Promise as PlanPromise
    from speech.sim.artifact import TuneArtifact, TuneCheck, TunedValue
    from speech.sim.instance import build_instance
    from speech.sim.traces import TraceError, parse_spec, peak_rps
    from speech.sim.tune import KNOBS, MAX_PAIR_MOVES, REASONS, SIMULATOR_VERSION, Tuner, describe_plan, perturbations

    if not 0 < args.slo_share < 1:
        raise UsageError(f"--slo-share {args.slo_share:g}: must be between 0 and 1 (e.g. 0.995)")
    if args.draws < 1 or args.holdout_days < 0:
        raise UsageError(f"--draws {args.draws} / --holdout-days {args.holdout_days}: need at least 1 draw "
                         "and 0 or more held-out days")
    if args.draws > MAX_DRAWS:
        raise UsageError(f"--draws {args.draws}: at most {MAX_DRAWS} (each candidate is simulated on every draw)")
    q = load_artifact(args.qmax, QmaxArtifact)
    t = load_artifact(args.ttotal, TtotalArtifact)
    if q.q_max < 1:
        raise UsageError(f"--qmax {args.qmax}: Q_max is 0 (no level met the SLO); there is nothing to tune")
    try:
        train = [(i, _day(args.trace, args.seed + i)) for i in range(args.draws)]
        hold = [(1000 + i, _day(args.trace, args.seed + args.draws + i)) for i in range(args.holdout_days)]
    except TraceError:
        raise
    first = train[0][1]
    if first.sum() <= 0:
        raise UsageError(f"--trace {args.trace!r}: the trace has no requests")
    peak = args.peak_rps if args.peak_rps is not None else round(peak_rps(first), 3)
    w = min(60, first.size)
    c = np.concatenate([[0.0], np.cumsum(first)])
    trough = args.trough_rps if args.trough_rps is not None else round(min(max(float(((c[w:] - c[:-w]) / w).min()), 1e-3), peak), 3)
    try:
        inputs = PlanInputs(slo_ms=args.slo_ms if args.slo_ms is not None else q.slo.ttfab_p95_ms, surge_ratio=args.surge_ratio,
                            peak_rps=peak, trough_rps=trough)
    except ValueError as err:
        raise UsageError(f"plan inputs from the trace and flags are invalid: {err}; pass --peak-rps/--trough-rps") from None
    model = build_instance(q, t, slo_ms=inputs.slo_ms)
    if args.platform == "kubernetes":
        from bench.commands.tune_k8s import run_kubernetes

        return run_kubernetes(args, q, t, inputs, model, train, hold)

    from bench.cli.progress import RunProgress, wanted

    progress = RunProgress("tune", total=None, enabled=wanted(args), unit="simulated days", every_s=5.0)

    def tick() -> None:
        progress.advance(1)

    lengths = {a.size for _, a in train}
    rate = np.mean(np.stack([a for _, a in train]), axis=0) if len(lengths) == 1 else None
    history = None
    if getattr(args, "forecast_history", None):
        from bench.load.traces import load_history
        from speech.errors import PlanInputError
        from speech.plan.forecast import forecast_rate

        _, history = load_history(args.forecast_history, None)
        try:  # the history must hold a forecast before the search relies on it
            forecast_rate(history, quantile=0.9)
        except PlanInputError as err:
            raise UsageError(f"--forecast-history {args.forecast_history!r}: {err}") from None
    with process_map(args.jobs) as (pmap, width):
        tuner = Tuner(q, t, inputs, model, args.slo_share, on_eval=tick, schedule_rate=rate, map_fn=pmap, width=width,
                      forecast_history=history)
        tuner.see_training(train)  # the fixed-peak floor is one of the choices: count it in the progress total
        options = tuner.choices(tuner.seed_knobs())
        # two passes over the one-knob moves, one pair step (speech.sim.tune.MAX_PAIR_MOVES), the checks: an
        # estimate, since a challenger stops at the first draw that shows it cannot win
        expected = len(train) * (1 + 2 * sum(len(v) - 1 for v in options.values()) + MAX_PAIR_MOVES) + 2 * (len(hold) + 2)
        progress.set_total(expected)
        try:
            seed, best = tuner.search(train)
            spike_factor = float(parse_spec(args.trace)[2].get("spike_factor", 1.2))
            spiked = (_day(with_options(args.trace, spike_factor=spike_factor * args.surge_ratio), args.seed)
                      if parse_spec(args.trace)[0] == "diurnal" else None)
            shift = 3600 if first.size >= 4 * 3600 else max(1, first.size // 24)
            perturbed = perturbations(first, args.surge_ratio, spike_arrivals=spiked, shift_s=shift)
            checks = []
            days = [(f"held-out seed {args.seed + args.draws + i}", i_a) for i, i_a in enumerate(hold)]
            days += [(name, (2000 + j, a)) for j, (name, a) in enumerate(perturbed.items())]
            bare = replace(best.knobs, scheduled_floors=False) if best.knobs.scheduled_floors else None
            # every check at once: seed, winner (and without its floors) on every day, and the days' floors
            tuner.prefetch((k, day) for _, day in days for k in (seed.knobs, best.knobs, bare) if k is not None)
            tuner.prefetch_floors([day for _, day in days])
            for name, day in days:
                s_c, b_c = tuner.candidate(seed.knobs, [day]), tuner.candidate(best.knobs, [day])
                assert s_c is not None and b_c is not None  # search returns knobs that have a plan
                n_c = tuner.candidate(bare, [day]) if bare is not None else None
                checks.append(TuneCheck(day=name, seed_within_slo_share=round(s_c.worst_share, 6),
                                        seed_instance_hours=round(s_c.hours, 3), tuned_within_slo_share=round(b_c.worst_share, 6),
                                        tuned_instance_hours=round(b_c.hours, 3), tuned_keeps_share=b_c.worst_share >= args.slo_share,
                                        without_floors_within_slo_share=None if n_c is None else round(n_c.worst_share, 6),
                                        without_floors_instance_hours=None if n_c is None else round(n_c.hours, 3)))
        finally:
            progress.close()

    digest = hashlib.sha256(b"".join(np.asarray(a, dtype=np.float64).tobytes() for _, a in train)).hexdigest()
    sha = "sha256:" + digest
    sd, bd = describe_plan(tuner.seed_numbers, seed.knobs), describe_plan(tuner.numbers_for(best.knobs), best.knobs)
    reasons = {k: REASONS[k] for k in KNOBS if getattr(seed.knobs, k) != getattr(best.knobs, k)}
    promise = PlanPromise(slo_share=round(best.share, 6), rejected_share=round(best.rejected, 6),
                          instance_hours=round(best.hours, 3), cost_vs_floor=round(best.x_floor, 4), trace_sha256=digest,
                          seed=args.seed, simulator_version=SIMULATOR_VERSION, trace_hours=round(first.size / 3600, 3),
                          **_interval(best))
    best_inputs = tuner.inputs_for(best.knobs)
    assert best_inputs is not None  # the search only keeps knobs whose plan was built
    tuned_inputs = best_inputs.model_copy(update={"promise": promise, "reasons": reasons})
    from speech.plan.realtime import build_plan

    tuned_plan = build_plan(q, t, tuned_inputs, allow_config_mismatch=True)
    values = [TunedValue(knob=k, seed=sd[k], tuned=bd[k], deployable_now=True,
                         reason=reasons.get(k, "the seed formula kept" if sd[k] == bd[k] else
                                            "the seed formula kept; its value follows the tuned inputs above")) for k in KNOBS]
    art = TuneArtifact(
        model=q.model, qmax_sha256=canonical_sha256(q), ttotal_sha256=canonical_sha256(t),
        seed_plan_sha256=canonical_sha256(tuner.seed_plan), tuned_plan_sha256=canonical_sha256(tuned_plan),
        promise=_promise(best, args.slo_share, args.trace, sha, args.seed),
        seed=_promise(seed, args.slo_share, args.trace, sha, args.seed),
        values=values, checks=checks, held=all(c.tuned_keeps_share for c in checks) and best.worst_share >= args.slo_share,
        evaluations=tuner.evaluations, created_at=datetime.now(UTC),
    )
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in parse_spec(args.trace)[0])
    written = [write_artifact(args.out / f"plan-{q.model}-tuned.json", tuned_plan),
               write_artifact(args.out / f"tune-{q.model}-{safe}.json", art)]
    if args.json:
        print(json.dumps(art.model_dump(mode="json"), indent=2))
    else:
        print(render(art))
        print("\nwrote " + ", ".join(str(p) for p in written))
    sys.stdout.flush()
    from bench.report.runs import tune_report

    args._report = tune_report(art)
    return 0 if art.held else 1


def render(a: TuneArtifact) -> str:
    p, s = a.promise, a.seed
    lines = [f"bench tune: {a.model} on {p.trace}, SLO share target {p.slo_share_target:.2%} "
             f"({a.evaluations} simulated days)", "",
             f"{'knob':<20} {'seed':<28} {'tuned':<28} reason"]
    for v in a.values:
        lines.append(f"{v.knob:<20} {v.seed:<28} {v.tuned:<28} {v.reason}")
    lines += ["", f"{'draws (' + str(p.draws or '?') + ')':<22} in SLO: mean  low      high     bound    rejected  inst-h: mean  "
                  "low       high      x floor"]
    for name, x in (("seed", s), ("tuned", p)):
        low = x.slo_share_low if x.slo_share_low is not None else x.within_slo_share_worst_day
        high = x.slo_share_high if x.slo_share_high is not None else x.within_slo_share
        h_lo = x.instance_hours_low if x.instance_hours_low is not None else x.instance_hours
        h_hi = x.instance_hours_high if x.instance_hours_high is not None else x.instance_hours
        bound = "-" if x.slo_share_bound is None else f"{x.slo_share_bound:.3%}"
        lines.append(f"{name:<22} {x.within_slo_share:12.3%}  {low:7.3%}  {high:7.3%}  {bound:>7}  {x.rejected_share:8.3%}  "
                     f"{x.instance_hours:12.1f}  {h_lo:8.1f}  {h_hi:8.1f}  {x.cost_vs_floor:7.2f}")
    if p.slo_share_bound is not None:
        sd_points = 100 * (p.slo_share_bound_sd or 0.0)
        t = "" if p.slo_share_bound_t is None else f" - t {p.slo_share_bound_t:.2f} x sd {sd_points:.3f} points x sqrt(1 + 1/n)"
        lines.append(f"  bound: the share a draw the tuner did not see is predicted to keep, min(low, mean{t}); the tuned "
                     f"plan is the cheapest whose bound keeps {p.slo_share_target:.2%}")
    lines += ["", "checks                 seed in SLO  seed inst-h  tuned in SLO  tuned inst-h  keeps"]
    for c in a.checks:
        lines.append(f"{c.day:<22} {c.seed_within_slo_share:10.3%}  {c.seed_instance_hours:11.1f}  {c.tuned_within_slo_share:11.3%}  "
                     f"{c.tuned_instance_hours:12.1f}  {'yes' if c.tuned_keeps_share else 'NO'}")
    floors = [c for c in a.checks if c.without_floors_instance_hours is not None]
    if floors:
        lines += ["", "scheduled floors (learned on the training draws only): the same tuned knobs without them, on the days "
                      "above"]
        for c in floors:
            assert c.without_floors_instance_hours is not None and c.without_floors_within_slo_share is not None
            saved = c.without_floors_instance_hours - c.tuned_instance_hours
            keeps = "keeps" if c.without_floors_within_slo_share >= p.slo_share_target else "MISSES"
            lines.append(f"  {c.day}: without them {c.without_floors_within_slo_share:.3%} in SLO ({keeps} the target), "
                         f"{c.without_floors_instance_hours:.1f} inst-h: the floors " +
                         (f"saved {saved:.1f} inst-h" if saved >= 0 else f"cost {-saved:.1f} inst-h more") +
                         f" and moved the share {100 * (c.tuned_within_slo_share - c.without_floors_within_slo_share):+.2f} "
                         "points")
    lines += ["", "promise held on every check" if a.held else "promise NOT held on every check (exit 1)"]
    return "\n".join(lines)
