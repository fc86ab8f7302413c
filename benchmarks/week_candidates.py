"""The week's candidates on its three training weeks: which plans keep the tuner's share bound at
<= 1.10x the floor (docs/plan-cost.md, the week's third run).

    nice -n 10 .venv/bin/python benchmarks/week_candidates.py [--only NAME ...]

Builds the tuner as ``benchmarks/plan_cost.py --traces week`` does (three weeks of history, seeds
1..3, a weekly forecast of them, trained on them) and judges each candidate with
``Tuner.candidate`` on those three weeks: each week's SLO share, the share bound for an unseen
week (speech.sim.promise.unseen_share_bound, the rule the search applies) and the mean cost x the
floor. The candidates are the second run's tuned knobs (surge 1.1, target 0.9 x Q_max, floor 14,
scale-in 10 % after 60 s, cooldown the planning T_total) with the forecast floors and the Average
surge changed. A week simulates in about 2 s of CPU; the forecasts about 45 s (one set of
Holt-Winters fits for every quantile), the floor of each week about 12 s: 159 s of CPU in all.

    nice -n 10 .venv/bin/python benchmarks/week_candidates.py --plot docs/forecast-week.png

With ``--plot PNG``, no table: the three history weeks, the weekly forecast's mean and 0.1-quantile
curves, the weekday floors of the third run's tuned plan (docs/plan-cost.md) and the first judged
week (seed 4) over one week, Monday first; it prints what the plot shows (minutes of each week
below the 0.1 curve, weekdays and weekend apart). About 60 s of CPU (the forecast)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def candidates(tuner, tuned):
    """name -> knobs."""
    bare = replace(tuned, forecast_quantile=None)
    out = {
        "second run's plan: floors q0.5, Average 0.5, 3 datapoints": tuned,
        "no floors, Average 0.5, 3 datapoints": bare,
        "no floors, Average 0.45, 3 datapoints": replace(bare, surge_average_share=0.45),
        "no floors, Average 0.45, 1 datapoint": replace(bare, surge_average_share=0.45, datapoints_to_alarm=1),
        "no floors, Average 0.5, 1 datapoint": replace(bare, datapoints_to_alarm=1),
        "no floors, Average 0.55, 1 datapoint": replace(bare, surge_average_share=0.55, datapoints_to_alarm=1),
        "no floors, Average 0.45, scale-in 5 %": replace(bare, surge_average_share=0.45, scale_in_step_share=0.05),
    }
    for q in (0.25, 0.1):
        out[f"floors q{q:g}, Average 0.5, 3 datapoints"] = replace(tuned, forecast_quantile=q)
        for s in (0.45, 0.5, 0.55):
            out[f"floors q{q:g}, Average {s:g}, 1 datapoint"] = replace(tuned, forecast_quantile=q, surge_average_share=s,
                                                                        datapoints_to_alarm=1)
    out["floors q0.5, Average 0.5, 1 datapoint"] = replace(tuned, datapoints_to_alarm=1)
    return out


THIRD_RUN = {"forecast_quantile": 0.1, "surge_average_share": 0.55, "datapoints_to_alarm": 2, "scale_in_window_s": 120}
"""The third run's tuned plan (docs/plan-cost.md, "Third run: floors below the median") over the
second run's knobs: weekday floors at the 0.1 quantile, the surge on the Average at 0.55 x Q_max,
2 datapoints, scale-in after 120 s."""
JUDGED_SEED = 1 + 3
"""The first unseen week after the history (seeds 1..3)."""


def week_tuner():
    """(plan_cost, the tuner on the week's three history weeks, the history, the second run's
    knobs), built as ``plan_cost.py --traces week`` builds them; the training days not yet seen."""
    import numpy as np
    import plan_cost as P

    from speech.sim.names import PROMISE_MISS_CHANCE
    from speech.sim.tune import Tuner

    q, t, model = P.reference_model()
    history = [(i, P.day(P.TRACES["week"], 1 + i)) for i in range(P.WEEK_HISTORY)]
    tuner = Tuner(q, t, P.seed_inputs(history[0][1]), model, P.SLO_SHARE, miss_chance=PROMISE_MISS_CHANCE,
                  forecast_history=P.forecast_history(history), forecast_model="auto", forecast_season_days=7)
    planning = int(np.ceil(tuner.seed_numbers.planning_total_s))
    tuned = replace(tuner.seed_knobs(), surge_ratio=1.1, target_share=0.9, scale_in_step_share=0.1, scale_in_window_s=60,
                    scale_in_cooldown_s=planning, forecast_quantile=0.5, surge_average_share=0.5)
    return P, tuner, history, tuned


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, metavar="TEXT", help="candidates whose name contains one of these")
    ap.add_argument("--plot", type=Path, default=None, metavar="PNG",
                    help="no table: plot the history weeks, the forecast, the third run's weekday floors and seed 4")
    args = ap.parse_args(argv)

    t0, cpu0 = time.monotonic(), time.process_time()
    P, tuner, history, tuned = week_tuner()
    if args.plot is not None:
        plot_week(args.plot, P, tuner, history, replace(tuned, **THIRD_RUN), JUDGED_SEED)
        print(f"wrote {args.plot}; {time.process_time() - cpu0:.0f} s CPU, {time.monotonic() - t0:.0f} s wall")
        return 0
    tuner.see_training(history)
    print("| knobs over the second run's plan | SLO share, weeks 1 / 2 / 3 | bound for an unseen week | keeps 99.5 % "
          "| x floor | inst-h |")
    print("|---|---|---|---|---|---|")
    for name, k in candidates(tuner, tuned).items():
        if args.only and not any(s in name for s in args.only):
            continue
        c = tuner.candidate(k, history)
        if c is None:
            print(f"| {name} | refused by the plan | | | | |")
            continue
        b = c.share_bound
        shares = " / ".join(f"{d.within_slo_share:.3%}" for d in c.days)
        print(f"| {name} | {shares} | {b.bound:.3%} | {'yes' if b.bound >= P.SLO_SHARE else 'no'} | {c.x_floor:.3f} "
              f"| {c.hours:,.1f} |", flush=True)
    print(f"\n{time.process_time() - cpu0:.0f} s CPU, {time.monotonic() - t0:.0f} s wall")
    return 0


def plot_week(path: Path, P, tuner, history, knobs, judged_seed: int) -> None:
    """``path``: the history weeks and the judged week (minute means over one week, Monday first),
    the forecast's mean and ``knobs.forecast_quantile`` curves (requests/s, left axis) and the
    plan's weekday floors (instances, right axis, scaled so N instances sit at N x the plan's
    per-instance rate); prints what it shows. The style of benchmarks/forecast_overhead.py's plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from speech.plan.schedule import minute_means
    from speech.sim.scaler import floor_at

    week_min = 7 * 1440
    qq = knobs.forecast_quantile
    fc = tuner.forecast(qq)
    plan = tuner.plan_for(knobs)
    assert plan is not None, f"knobs outside their bounds: {knobs}"
    numbers = tuner.numbers_for(knobs)
    per = plan.capacity.per_instance_rps or plan.capacity.throughput_at_target_rps
    floors = np.array([floor_at(numbers, 60 * m) for m in range(week_min)])
    judged = P.day(P.TRACES["week"], judged_seed)
    weeks = [(seed + 1, a) for seed, a in history] + [(judged_seed, judged)]
    minutes = {seed: minute_means(a.tolist(), 1)[:week_min] for seed, a in weeks}
    point, upper = fc.point_rps[:week_min], fc.upper_rps[:week_min]
    weekday = np.arange(week_min) < 5 * 1440

    name = "Holt-Winters" if fc.model == "ets" else fc.model
    print(f"week:peak=5000, history seeds 1..{len(history)}, judged seed {judged_seed}: the backtest kept {name} "
          f"(pinball at q {qq:g}: " + ", ".join(f"{k} {v:.1f}" for k, v in fc.backtest.losses.items())
          + f"); the q {qq:g} curve is {fc.ratio:.3f} x the mean")
    print(f"the plan's weekday floors: {len(numbers.floors)} entries, per-instance rate {per:.2f} requests/s; "
          f"weekdays {floors[weekday].min()}..{floors[weekday].max()} instances, "
          f"weekend {floors[~weekday].min()}..{floors[~weekday].max()}")
    days = " / ".join(("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"))
    print(f"each day's mean rate ({days}), requests/s (its busiest minute is the peak, a spike, on every draw):")
    for label, m in [*((f"seed {seed}", m) for seed, m in minutes.items()), ("forecast mean", point),
                     (f"q {qq:g} curve", upper)]:
        print(f"  {label}: " + " / ".join(f"{x:,.0f}" for x in m.reshape(7, 1440).mean(axis=1)))
    sat, sun = np.arange(week_min) // 1440 == 5, np.arange(week_min) // 1440 == 6
    print(f"| week | minutes below the q {qq:g} curve: weekdays | Saturday | Sunday | above what the floors are sized "
          "for: weekdays | weekend |")
    print("|---|---|---|---|---|---|")
    for seed, m in minutes.items():
        below, above = m < upper, m > floors * per
        label = f"seed {seed}" + (" (judged)" if seed == judged_seed else " (history)")
        print(f"| {label} | {below[weekday].mean():.1%} | {below[sat].mean():.1%} | {below[sun].mean():.1%} "
              f"| {above[weekday].mean():.1%} | {above[~weekday].mean():.1%} |")

    hours = np.arange(week_min) / 60
    fig, ax = plt.subplots(figsize=(10, 4.4))
    for i, (seed, m) in enumerate(minutes.items()):
        if seed == judged_seed:
            ax.plot(hours, m, color="0.25", lw=0.5, label=f"judged week: seed {seed} (after the history)")
        else:
            ax.plot(hours, m, color="0.75", lw=0.5, label=f"history: seeds 1..{len(history)}" if i == 0 else None)
    ax.plot(hours, point, color="tab:blue", lw=1.2, label=f"{name} (the backtest's choice), mean")
    ax.plot(hours, upper, color="tab:blue", lw=1.0, ls="--", label=f"{name}, {qq:g} quantile (the tuned plan's)")
    ax.set_xlabel("day of the week (UTC, Monday 00:00 first)")
    ax.set_ylabel("requests/s (minute means)")
    ax.set_xticks(np.arange(8) * 24, ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", ""])
    ax.set_xlim(0, 168)
    ax.set_ylim(0, 1.3 * max(float(m.max()) for m in minutes.values()))  # room for the legend above the peaks
    right = ax.twinx()
    right.plot(hours, floors, color="tab:green", lw=1.0, drawstyle="steps-post")
    right.set_ylim(ax.get_ylim()[0] / per, ax.get_ylim()[1] / per)
    right.set_ylabel(f"scheduled floor, instances ({per:.2f} requests/s each)")
    ax.plot([], [], color="tab:green", lw=1.0, label=f"the tuned plan's weekday floors ({len(numbers.floors)} entries, "
            "right axis)")
    ax.set_title(f"week:peak=5000: the weekly forecast from seeds 1..{len(history)}, its floors, and the week after")
    ax.legend(fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
