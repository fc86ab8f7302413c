"""What reacting can buy at all: the cheapest policy that sees the present exactly (issue 45).

    .venv/bin/python benchmarks/reactive_bound.py [--trace azure-code] [--judged 6..35]
        [--startup-s measured,120,60,30] [--jobs 2]

Every reactive plan the tuner can deploy sees traffic late: a CloudWatch period, its alarm's
datapoints, an evaluation. ``perfect-detection`` (speech.sim.floor_policies.PerfectDetectionPolicy)
sees none of that lag: every 10 s it knows the last 10 s of arrivals exactly and asks for the
instances their rate needs at the plan's per-instance throughput, times 1 + headroom, above a floor,
holding what it asked for over a hold window before removing it. It cannot see ahead: a new
instance still serves a start-up after it is asked for, and SageMaker still takes one capacity
change at a time. Its knobs (floor, headroom, hold) are searched over a grid; a setting is chosen
on the training draws (seeds 1..5) by the rule the tuner keeps (the share bound for an unseen draw,
speech.sim.promise.unseen_share_bound, at the target; the cheapest against the floor) and judged on
the unseen draws (``--judged``). Beside it, the setting chosen with hindsight on the judged draws
themselves (the cheapest that kept the share on every one: no deployable rule can choose better
from the same grid), perfect-forecast (speech.sim.floor_policies.PerfectForecastPolicy: the
future known, the same start-up and one change at a time, no floor or cap) and the tuned plan of
benchmarks/plan_cost.py on the same draws: the baseline of the same run.

Then the same with a shorter start-up (``--startup-s``; the measured one first), every other number
as measured: how fast a new instance would have to serve for reacting to reach a cost target.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
import plan_cost as pc  # noqa: E402

from speech.sim.fleet import run_policy, summarize  # noqa: E402
from speech.sim.floor import floor_schedule  # noqa: E402
from speech.sim.floor_policies import PerfectDetectionPolicy, PerfectForecastPolicy  # noqa: E402
from speech.sim.policies import AwsReadings  # noqa: E402
from speech.sim.promise import unseen_share_bound  # noqa: E402

TRAIN_SEEDS = tuple(range(1, 6))
HEADROOMS = (-0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.5, 0.7)
HOLDS_S = (60, 300, 900)

_DAYS: dict[int, np.ndarray] = {}
"""Each worker's draws, filled by :func:`_init` (a process pool's initializer)."""
_MODEL = None


def _init(spec: str, seeds: tuple[int, ...]) -> None:
    global _MODEL
    _MODEL = pc.reference_model()[2]
    _DAYS.update({s: pc.day(spec, s) for s in seeds})


def _run(task: tuple) -> tuple[float, float, tuple, tuple]:
    """One draw under perfect detection: (instance-hours, SLO share, block requests, block within)."""
    seed, startup_s, per_instance_rps, floor, headroom, hold_s = task
    model = replace(_MODEL, startup_s=startup_s)
    pol = PerfectDetectionPolicy(per_instance_rps, headroom=headroom, min_instances=floor, hold_s=hold_s)
    s = summarize(run_policy(model, _DAYS[seed], pol, warm_x_rps=per_instance_rps), model, pc.SLO_MS, startup_s)
    return s.instance_hours, s.within_slo_share, s.block_requests, s.block_within


def _floor_hours(seed: int) -> float:
    return floor_schedule(_MODEL, _DAYS[seed], pc.SLO_MS, pc.SLO_SHARE).instance_hours


def _perfect_forecast(task: tuple) -> tuple[float, float]:
    """One draw under perfect-forecast (the future known) at this start-up: (instance-hours, share)."""
    seed, startup_s, tick_s, min_instances, max_instances = task
    model = replace(_MODEL, startup_s=startup_s)
    need = floor_schedule(model, _DAYS[seed], pc.SLO_MS, pc.SLO_SHARE).per_second
    pol = PerfectForecastPolicy(need, startup_s=startup_s, removal_updating_s=AwsReadings().removal_updating_s,
                                tick_s=tick_s, min_instances=min_instances, max_instances=max_instances)
    s = summarize(run_policy(model, _DAYS[seed], pol), model, pc.SLO_MS, startup_s)
    return s.instance_hours, s.within_slo_share


@dataclass(frozen=True)
class Setting:
    """One perfect-detection setting: its knobs, its cost and bound on the training draws, its cost
    and shares on the judged ones (cost: the mean of each draw's instance-hours over its floor's)."""

    floor: int
    headroom: float
    hold_s: int
    train_x: float
    train_bound: float
    judged_x: float
    judged_low: float
    judged_below: int

    def knobs(self) -> str:
        return f"floor {self.floor}, headroom {self.headroom:+.0%}, hold {self.hold_s} s"


def _settings(results: list, grid: list, seeds: list[int], train: list[int], floors: dict[int, float]) -> list[Setting]:
    out = []
    n = len(seeds)
    for gi, (floor, headroom, hold_s) in enumerate(grid):
        got = dict(zip(seeds, results[gi * n : (gi + 1) * n], strict=True))
        tr = [got[s] for s in train]
        judged = [s for s in seeds if s not in train]
        bound = unseen_share_bound([g[1] for g in tr], blocks=([g[2] for g in tr], [g[3] for g in tr])).bound
        shares = np.array([got[s][1] for s in judged])
        out.append(Setting(floor, headroom, hold_s,
                           train_x=float(np.mean([got[s][0] / floors[s] for s in train])), train_bound=bound,
                           judged_x=float(np.mean([got[s][0] / floors[s] for s in judged])),
                           judged_low=float(shares.min()), judged_below=int((shares < pc.SLO_SHARE).sum())))
    return out


def pick(found: list[Setting], target: float) -> tuple[Setting | None, Setting | None]:
    """(the setting the tuner's rule takes: the cheapest on the training draws whose share bound for
    an unseen draw keeps ``target``; the cheapest on the judged draws that kept ``target`` on every
    one of them, chosen with hindsight). None where no setting qualifies."""
    kept = [s for s in found if s.train_bound >= target]
    hindsight = [s for s in found if s.judged_below == 0]
    return (min(kept, key=lambda s: s.train_x) if kept else None,
            min(hindsight, key=lambda s: s.judged_x) if hindsight else None)


def plot(path: Path, spec: str, rows: list, tuned_x: float, measured_s: float, target_x: float | None = None) -> None:
    """``path``: x floor against the start-up (s) for perfect detection chosen on the training draws
    (hollow where an unseen draw fell below the share), with hindsight, and perfect-forecast; the
    tuned plan at the measured start-up and ``target_x`` (if given) as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for startup_s, chosen, _, _ in rows:
        if chosen is not None:
            kept = chosen.judged_below == 0
            ax.plot(startup_s, chosen.judged_x, "o", color="tab:blue", markerfacecolor="tab:blue" if kept else "white")
    ax.plot([], [], "o", color="tab:blue", label="perfect detection, chosen on the training draws (hollow: missed on a draw)")
    ax.plot(xs, [r[2].judged_x if r[2] else float("nan") for r in rows], "s--", color="tab:green",
            label="perfect detection, cheapest with hindsight")
    ax.plot(xs, [r[3] for r in rows], "^:", color="tab:purple", label="perfect-forecast (the future known)")
    ax.axhline(tuned_x, color="tab:red", lw=1, label=f"the tuned plan at the measured start-up ({tuned_x:.2f}x)")
    if target_x is not None:
        ax.axhline(target_x, color="black", lw=1, ls="--", label=f"target {target_x:.2f}x")
    ax.axvline(measured_s, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("start-up: from asked for to serving (s)")
    ax.set_ylabel("instance-hours x the floor (mean of the unseen draws)")
    ax.set_title(f"{spec}: what reacting could buy if it saw the present exactly", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)  # never a half-written picture
    plt.close(fig)
    print(f"\nplot: {path}")


def _parse_grid(args: argparse.Namespace) -> tuple | str:
    """(judged seeds, start-ups (None: the measured one), floors (empty: the default), headrooms,
    holds) from the flags, or what is wrong with them."""
    try:
        lo, _, hi = args.judged.partition("..")
        judged = list(range(int(lo), int(hi) + 1))
        startups = [None if s.strip() == "measured" else float(s) for s in args.startup_s.split(",")]
        if args.floors and ".." in args.floors:
            flo, _, fhi = args.floors.partition("..")
            floors = list(range(max(1, int(flo)), int(fhi) + 1))
        else:
            floors = [max(1, int(f)) for f in args.floors.split(",")] if args.floors else []
        headrooms = tuple(float(h) for h in args.headrooms.split(","))
        holds_s = tuple(int(h) for h in args.holds_s.split(","))
    except ValueError as err:
        return (f"--judged FIRST..LAST, --floors LO..HI or a list, --headrooms, --holds-s and --startup-s numbers "
                f"('measured' for the start-up): {err}")
    if any(h <= -1.0 for h in headrooms) or any(h < 1 for h in holds_s):
        return f"--headrooms {args.headrooms} / --holds-s {args.holds_s}: a headroom above -1, a hold of 1 s or more"
    if any(s is not None and s < 0 for s in startups):
        return f"--startup-s {args.startup_s}: a start-up is 0 s or more"
    if not judged or judged[0] <= TRAIN_SEEDS[-1]:
        return f"--judged {args.judged}: the unseen draws start after the training seeds 1..5"
    return judged, startups, floors, headrooms, holds_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="azure-code", help="a benchmarks/plan_cost.py trace (default azure-code)")
    ap.add_argument("--judged", default="6..35", help="unseen draws, FIRST..LAST (default 6..35; training: 1..5)")
    ap.add_argument("--startup-s", default="measured,120,60,30",
                    help="start-ups to try, s, comma-separated; 'measured': the reference T_total's (default "
                         "measured,120,60,30)")
    ap.add_argument("--floors", default=None,
                    help="floors to try, LO..HI or comma-separated (default 1 and 8..the tuned plan's fleet + 2)")
    ap.add_argument("--headrooms", default=",".join(f"{h:g}" for h in HEADROOMS),
                    help=f"headrooms to try, comma-separated fractions (default {','.join(f'{h:g}' for h in HEADROOMS)})")
    ap.add_argument("--holds-s", default=",".join(map(str, HOLDS_S)),
                    help=f"hold windows to try, s, comma-separated (default {','.join(map(str, HOLDS_S))})")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--plot", type=Path, default=None, metavar="PNG",
                    help="also draw x floor against the start-up: perfect detection (chosen, hindsight), "
                         "perfect-forecast, the tuned plan")
    ap.add_argument("--target-x", type=float, default=None, metavar="X",
                    help="with --plot: draw a cost target at X times the floor (e.g. issue 45's 1.30 on azure-code)")
    args = ap.parse_args()
    if args.trace not in pc.TRACES or args.trace == "week":
        print(f"--trace {args.trace!r}: use one of {', '.join(t for t in pc.TRACES if t != 'week')}", file=sys.stderr)
        return 2
    parsed = _parse_grid(args)
    if isinstance(parsed, str):
        print(parsed, file=sys.stderr)
        return 2
    judged, startups_given, floors_given, headrooms, holds_s = parsed
    seeds = list(TRAIN_SEEDS) + judged
    spec = pc.TRACES[args.trace]
    q, t, model = pc.reference_model()
    t0, cpu0 = time.monotonic(), time.process_time()

    # the baseline of the same run: benchmarks/plan_cost.py's tuned plan on the same draws
    tt = pc.tune_trace(args.trace, q, t, model)
    tuned = [tt.tuner.run(tt.best.knobs, s, pc.day(spec, s)) for s in judged]
    per_instance_rps = tt.tuned_numbers.x_target_rps
    tuned_fleet = max(d.peak_instances for d in tt.best.days)
    floor_values = floors_given or [1] + list(range(8, tuned_fleet + 3))
    grid = list(itertools.product(floor_values, headrooms, holds_s))
    startups = [model.startup_s if s is None else s for s in startups_given]

    with ProcessPoolExecutor(max(1, args.jobs), initializer=_init, initargs=(spec, tuple(seeds))) as ex:
        floors = dict(zip(seeds, ex.map(_floor_hours, seeds), strict=True))
        tuned_x = float(np.mean([d.instance_hours / floors[s] for s, d in zip(judged, tuned, strict=True)]))
        tuned_share = np.array([d.within_slo_share for d in tuned])
        rows = []
        for startup_s in startups:
            tasks = [(s, startup_s, per_instance_rps, *g) for g in grid for s in seeds]
            results = list(ex.map(_run, tasks, chunksize=16))
            found = _settings(results, grid, seeds, list(TRAIN_SEEDS), floors)
            chosen, best = pick(found, pc.SLO_SHARE)
            pf_tasks = [(s, startup_s, tt.tuned_numbers.metric_period_s, 1, 10**6) for s in judged]
            pf = float(np.mean([h / floors[s] for s, (h, _) in zip(judged, ex.map(_perfect_forecast, pf_tasks), strict=True)]))
            rows.append((startup_s, chosen, best, pf))
            print(f"  start-up {startup_s:.1f} s: {len(grid)} settings x {len(seeds)} draws "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)

    n = len(judged)
    print(f"{spec}: perfect detection on {n} unseen draws (seeds {judged[0]}..{judged[-1]}), chosen on seeds 1..5; "
          f"{len(grid)} settings (floors {floor_values[0]}..{floor_values[-1]}, headroom "
          f"{min(headrooms):+.0%}..{max(headrooms):+.0%}, hold {'/'.join(map(str, holds_s))} s) at "
          f"{per_instance_rps:.2f} requests/s an instance; floor {np.mean([floors[s] for s in judged]):.1f} "
          f"instance-hours a draw on average\n")
    print(f"baseline (the same draws): the tuned plan of benchmarks/plan_cost.py (floor "
          f"{tt.tuned_numbers.min_instances}, peak {tuned_fleet} instances): "
          f"**{tuned_x:.2f}x** the floor, lowest {100 * tuned_share.min():.2f} %, "
          f"{int((tuned_share < pc.SLO_SHARE).sum())} of {n} below {100 * pc.SLO_SHARE:.1f} %\n")
    print("| start-up | chosen on the training draws | x floor | lowest | draws below | "
          "cheapest keeping the share on every judged draw (hindsight) | x floor | perfect-forecast x floor |")
    print("|---|---|---|---|---|---|---|---|")
    for startup_s, chosen, best, pf in rows:
        label = f"{startup_s:.1f} s" + (" (measured)" if startup_s == model.startup_s else "")
        c = (f"{chosen.knobs()} | {chosen.judged_x:.2f} | {100 * chosen.judged_low:.2f}% | {chosen.judged_below} of {n}"
             if chosen else "none keeps the bound | | |")
        b = f"{best.knobs()} | {best.judged_x:.2f}" if best else "none | "
        print(f"| {label} | {c} | {b} | {pf:.2f} |")
    if args.plot:
        plot(args.plot, spec, rows, tuned_x, model.startup_s, args.target_x)
    print(f"\n{time.monotonic() - t0:.0f} s wall, {time.process_time() - cpu0:.0f} s CPU in this process "
          f"(the workers' not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
