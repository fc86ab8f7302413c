"""What hot-loaded copies buy the tuned plan, against the floor, on unseen draws (issue 45).

    .venv/bin/python benchmarks/hotload_cost.py [--traces azure-code,azure-conv] [--unseen 5]
        [--tail-draws 25] [--instance-type ml.g5.12xlarge] [--copy FILE]

For each trace (benchmarks/plan_cost.py's draws, reference measurements, SLO 3000 ms, share 0.995,
trained on seeds 1..5): the tuner (speech.sim.tune) twice on the same training draws, without and
with the hot-load knob (``Tuner(copy_fleet=...)``: the copy fleet of ``--copy`` on
``--instance-type`` as SageMaker places copies, speech.sim.hotload.tuner_copy_fleet), then a grid of
every hot-load candidate around the tuned plan (headroom x floor x target share x datapoints: what
the descent could have missed), its cheapest that keeps the share bound on the training draws
judged like the others. Every row runs on ``--unseen`` draws the tuner did not see (the next
seeds), with the seed plan, fixed-peak, perfect-forecast and the floor from the same run, and the
rows that kept the share for less than the tuned plan, and the tuned plans, on ``--tail-draws``
further draws.

Cost is in copy slots: instance-hours x copies per instance (device-hours for a copy of one GPU);
for the one-copy-per-instance rows (a plain variant, the reference ml.g5.xlarge) that is their
instance-hours, and the floor and perfect-forecast are per copy. A slot of a larger instance may
cost more than one of the reference instance; not priced here (speech.schema.prices has no
multi-GPU type). ``hot-load, T_copy 0`` is a bound, not a plan: the grid winner with copies serving
the moment they are asked for, so what remains is detection and the room an instance has.

Exit 0 after printing; 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

COPY = ROOT / "examples/artifacts/copy-kokoro-82m-g5xlarge-8b1b96bc.json"
FIXED_ROWS = ("seed plan", "fixed-peak", "perfect-forecast")


def grid(tuner, at):
    """Every hot-load candidate around ``at``'s knobs: headroom (the knob's choices but off) x floor
    (the seed's, 0.5 to 0.9 of the fixed-peak fleet, the fixed-peak fleet) x target share (the seed
    formula and 1 - h) x datapoints (3, 1) x scale-in window (300 s, 60 s) x scale-in cooldown
    (the seed formula, the planning T_total)."""
    import itertools
    import math

    ch = tuner.choices(at)
    b = round(1.0 - (at.surge_ratio - 1.0), 4)
    fixed = tuner.fixed_peak_instances()
    floors = sorted({tuner.seed_knobs().min_instances, fixed, *(math.ceil(f * fixed) for f in (0.5, 0.6, 0.7, 0.8, 0.9))})
    planning = int(math.ceil(tuner.seed_numbers.planning_total_s))
    out = []
    for h, m, ts, dp, win, cd in itertools.product([x for x in ch["hot_load_headroom_copies"] if x is not None], floors,
                                                   (None, b), (3, 1), (None, 60), (None, planning)):
        k = replace(at, hot_load_headroom_copies=h, min_instances=m, target_share=ts, datapoints_to_alarm=dp,
                    scale_in_window_s=win, scale_in_cooldown_s=cd)
        if tuner.plan_for(k) is not None:
            out.append(k)
    return list(dict.fromkeys(out))


def label(k, seed) -> str:
    from speech.sim.tune import HOT_LOAD_KNOBS, KNOBS

    moved = [f"{n}={getattr(k, n)}" for n in (*KNOBS, *HOT_LOAD_KNOBS) if getattr(k, n) != getattr(seed, n)]
    return ", ".join(moved) or "the seed's knobs"


def rows_on(tuner, pc, named: dict, draws, floors, pf, t_copy_zero=None):
    """label -> (shares, rejected, slot-hours, x floor, x perfect-forecast) of each knob setting on ``draws``."""
    import numpy as np

    from speech.sim.hotload import hot_load_day

    out = {}
    for name, k in named.items():
        got = []
        for (seed, a), f, p in zip(draws, floors, pf, strict=True):
            if name == t_copy_zero:
                s = hot_load_day((tuner.model, tuner.numbers_for(k), pc.SLO_MS, a,
                                  replace(tuner.copy_fleet, t_copy_s=0.0, headroom_copies=k.hot_load_headroom_copies)))
            else:
                s = tuner.run(k, seed, a)
            got.append((s.within_slo_share, s.rejected_share, s.instance_hours, s.instance_hours / f, s.instance_hours / p))
        out[name] = [np.array(col) for col in zip(*got, strict=True)]
    return out


@dataclass
class Judged:
    """What every row of a trace is judged with: the plain tuner's trace (the seed plan, fixed-peak,
    perfect-forecast and the floor come from plan_cost's judge of it), the tuner with the copy fleet
    (the rows' knobs run through it), the rows by label, and the label run with T_copy 0."""

    plain: object
    hot_tuner: object
    named: dict
    t_copy_zero: str


def judge_on(pc, q, model, ctx: Judged, draws, labels: set[str]) -> dict:
    """label -> per-draw arrays (share, rejected, slot-hours, x floor, x perfect-forecast) for the rows in
    ``labels`` and plan_cost's seed plan, fixed-peak, perfect-forecast and floor, on the same ``draws``."""
    import numpy as np

    fixed = {r.label: r for r in pc.judge(ctx.plain, q, model, draws, only=set(FIXED_ROWS))}
    floors, pf = fixed["floor"].hours, fixed["perfect-forecast"].hours
    got = rows_on(ctx.hot_tuner, pc, {k: v for k, v in ctx.named.items() if k in labels}, draws, floors, pf,
                  t_copy_zero=ctx.t_copy_zero)
    for lab in (*FIXED_ROWS, "floor"):
        r = fixed[lab]
        got[lab] = [np.array(r.shares), np.array(r.rejected), np.array(r.hours), np.array(r.x_floor), np.array(r.x_pf)]
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="azure-code,azure-conv")
    ap.add_argument("--train-draws", type=int, default=5)
    ap.add_argument("--unseen", type=int, default=5)
    ap.add_argument("--tail-draws", type=int, default=25, help="further unseen draws (default 25: 30 in all)")
    ap.add_argument("--instance-type", default="ml.g5.12xlarge", help="where the copies go (default ml.g5.12xlarge: 4 A10G)")
    ap.add_argument("--copy", type=Path, default=COPY, help="the copy artifact: T_copy and footprint (default the example's)")
    args = ap.parse_args()

    import plan_cost as pc

    from speech.errors import SpeechError
    from speech.files import load_artifact
    from speech.schema.artifacts import CopyArtifact
    from speech.sim.hotload import tuner_copy_fleet
    from speech.sim.tune import Tuner, describe_plan

    names = [x.strip() for x in args.traces.split(",") if x.strip()]
    bad = [n for n in names if n not in pc.TRACES]
    if bad or args.unseen < 2 or args.tail_draws < 0:
        print(f"--traces {','.join(bad)}: use {', '.join(pc.TRACES)}; --unseen >= 2, --tail-draws >= 0", file=sys.stderr)
        return 2
    try:
        copy = load_artifact(args.copy, CopyArtifact)
        fleet = tuner_copy_fleet(copy, args.instance_type)
    except (SpeechError, OSError) as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    if fleet is None:
        print(f"--instance-type {args.instance_type}: one copy of {copy.model} per instance (SageMaker gives a copy whole "
              "devices), so there is nothing to hot-load: the tuner does not offer the knob", file=sys.stderr)
        return 2
    q, t, model = pc.reference_model()
    print(f"copy fleet: {fleet.copies_fit} copies per {args.instance_type}, T_copy {fleet.t_copy_s:g} s ({args.copy.name}, "
          f"origin {copy.provenance.origin}); an instance start-up {model.startup_s:.1f} s (reference T_total)")
    verdicts = []
    for name in names:
        spec = pc.TRACES[name]
        train = [(i, pc.day(spec, 1 + i)) for i in range(args.train_draws)]
        inputs = pc.seed_inputs(train[0][1])
        tuned = {}
        for key, cf in (("plain", None), ("hot", fleet)):
            t0, c0 = time.monotonic(), time.process_time()
            tu = Tuner(q, t, inputs, model, pc.SLO_SHARE, copy_fleet=cf)
            _, best = tu.search(train, passes=2)
            tuned[key] = (tu, best, time.monotonic() - t0, time.process_time() - c0, tu.simulated)
        tu, plain_best = tuned["plain"][0], tuned["plain"][1]
        hot_tu, hot_best = tuned["hot"][0], tuned["hot"][1]
        seed = hot_tu.seed_knobs()
        t0, c0 = time.monotonic(), time.process_time()
        cands = [c for k in grid(hot_tu, plain_best.knobs) if (c := hot_tu.candidate(k, train)) is not None]
        fixed_n = hot_tu.fixed_peak_instances()

        def pick(pool):
            """The cheapest of ``pool`` whose bound keeps the target, else the one with the highest bound."""
            ok = [c for c in pool if c.share_bound.bound >= pc.SLO_SHARE]
            return min(ok, key=lambda c: c.hours) if ok else max(pool, key=lambda c: c.share_bound.bound)

        keeping = [c for c in cands if c.share_bound.bound >= pc.SLO_SHARE]
        cheapest = pick(cands)
        reactive = pick([c for c in cands if c.knobs.min_instances < fixed_n])  # a fleet that scales
        grid_s, grid_cpu = time.monotonic() - t0, time.process_time() - c0

        print(f"\n#### {spec} (tuned on seeds 1..{len(train)})\n")
        for key, what in (("plain", "tuner without the knob"), ("hot", "tuner with the hot-load knob")):
            _, b, wall, cpu, simulated = tuned[key]
            print(f"- {what}: {label(b.knobs, seed)}; training bound {100 * b.share_bound.bound:.2f}%, "
                  f"{b.hours:,.1f} slot-h ({simulated} simulated days, {wall:.0f} s, CPU {cpu:.0f} s)")
        print(f"- hot-load grid around the plain winner: {len(cands)} candidates, {len(keeping)} keep the bound on the training "
              f"draws; {'cheapest of them' if keeping else 'none keeps it; the highest bound'}: {label(cheapest.knobs, seed)}, "
              f"bound {100 * cheapest.share_bound.bound:.2f}%, {cheapest.hours:,.1f} slot-h (CPU {grid_cpu:.0f} s, {grid_s:.0f} s)")
        low = min(cands, key=lambda c: c.hours)
        under = [c for c in cands if c.x_floor <= pc.FLOOR_TARGETS.get(name, 0.0) + 0.005]
        print(f"- the grid's cheapest at all: {label(low.knobs, seed)}, {low.hours:,.1f} slot-h ({low.x_floor:.2f}x the floor), "
              f"bound {100 * low.share_bound.bound:.2f}%, lowest {100 * low.worst_share:.2f}%"
              + (f"; {len(under)} at or under the target's {pc.FLOOR_TARGETS[name]:g}x, the best bound of them "
                 f"{100 * max(c.share_bound.bound for c in under):.2f}%" if under else ""))
        which = "cheapest reactive one keeping it" if reactive.share_bound.bound >= pc.SLO_SHARE else "reactive one with the highest bound"
        print(f"- the grid's {which} "
              f"(floor below the fixed-peak fleet of {fixed_n}): {label(reactive.knobs, seed)}, bound "
              f"{100 * reactive.share_bound.bound:.2f}%, {reactive.hours:,.1f} slot-h")
        print("- tuned plan with the knob: " + ", ".join(f"{k} {v}" for k, v in
                                                         describe_plan(hot_tu.numbers_for(hot_best.knobs), hot_best.knobs).items()))

        named = {"tuned plan (no hot loading)": plain_best.knobs}
        if hot_best.knobs != plain_best.knobs:
            named["tuned plan with the hot-load knob"] = hot_best.knobs
        for h in hot_tu.hot_load_choices():
            if h is not None:
                named[f"tuned plan + hot-load, headroom {h}"] = replace(plain_best.knobs, hot_load_headroom_copies=h)
        named[f"hot-load grid's cheapest: {label(cheapest.knobs, seed)}"] = cheapest.knobs
        grid_label = f"hot-load grid, reactive: {label(reactive.knobs, seed)}"
        named[grid_label] = reactive.knobs
        zero = f"{grid_label}, T_copy 0 (a bound)"
        named[zero] = reactive.knobs

        ctx = Judged(pc.TunedTrace(name, spec, train, train[0][1], tu, plain_best, 0.0), hot_tu, named, zero)
        first = 1 + len(train)
        t0 = time.monotonic()
        draws = [(s, pc.day(spec, s)) for s in range(first, first + args.unseen)]
        res = judge_on(pc, q, model, ctx, draws, set(named))
        print(f"\n{args.unseen} unseen draws (seeds {first}..{first + args.unseen - 1}), {time.monotonic() - t0:.0f} s:\n")
        print("| policy | in SLO mean | in SLO lowest | rejected | slot-h | x floor | x perfect-forecast |")
        print("|---|---|---|---|---|---|---|")
        for lab in ("seed plan", *named, "fixed-peak", "perfect-forecast", "floor"):
            sh, rj, hr, xf, xp = res[lab]
            print(f"| {lab} | {100 * sh.mean():.2f}% | {100 * sh.min():.2f}% | {100 * rj.mean():.3f}% | {hr.mean():,.1f} | "
                  f"{xf.mean():.2f} | {xp.mean():.2f} |")
        tp = res["tuned plan (no hot loading)"]
        cheaper = [lab for lab in named if lab != zero and res[lab][0].min() >= pc.SLO_SHARE and res[lab][2].mean() < tp[2].mean()]
        tail_labels = list(dict.fromkeys(["tuned plan (no hot loading)", *(["tuned plan with the hot-load knob"]
                                                                              if "tuned plan with the hot-load knob" in named else []),
                                          *cheaper]))
        if args.tail_draws:
            t0 = time.monotonic()
            start = first + args.unseen
            more = [(s, pc.day(spec, s)) for s in range(start, start + args.tail_draws)]
            tail = judge_on(pc, q, model, ctx, draws + more, set(tail_labels))
            print(f"\nAll {len(draws) + len(more)} unseen draws (seeds {first}..{start + args.tail_draws - 1}), the tuned plans "
                  f"and what kept the share above for less, {time.monotonic() - t0:.0f} s:\n")
            print("| policy | in SLO mean | in SLO lowest | draws below the target | slot-h | x floor |")
            print("|---|---|---|---|---|---|")
            for lab in tail_labels:
                sh, _, hr, xf, _ = tail[lab]
                print(f"| {lab} | {100 * sh.mean():.2f}% | {100 * sh.min():.2f}% | {int((sh < pc.SLO_SHARE).sum())} of {sh.size} | "
                      f"{hr.mean():,.1f} | {xf.mean():.2f} |")
            res = tail
        hk = "tuned plan with the hot-load knob" if "tuned plan with the hot-load knob" in named else "tuned plan (no hot loading)"
        sh, _, _, xf, _ = res[hk]
        goal = pc.FLOOR_TARGETS.get(name)
        verdicts.append(f"{spec}: the tuner with the hot-load knob chose {label(hot_best.knobs, seed)}: {xf.mean():.2f}x the floor"
                        + (f" (target <= {goal:g}x)" if goal else "") + f", lowest share {100 * sh.min():.2f}% on {sh.size} "
                        "unseen draws -> " + ("held" if (goal is None or xf.mean() <= goal + 0.005) and sh.min() >= pc.SLO_SHARE
                                              else "NOT held"))
        ps = res["tuned plan (no hot loading)"]
        verdicts.append(f"{spec}: against the tuner without it ({ps[3].mean():.2f}x, lowest {100 * ps[0].min():.2f}%) -> "
                        + ("no worse" if xf.mean() <= ps[3].mean() + 0.005 and sh.min() >= pc.SLO_SHARE else "WORSE"))
    print("\n#### verdicts\n")
    for v in verdicts:
        print("- " + v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
