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
Holt-Winters fits for every quantile), the floor of each week about 12 s: 159 s of CPU in all."""

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, metavar="TEXT", help="candidates whose name contains one of these")
    args = ap.parse_args(argv)

    import numpy as np
    import plan_cost as P

    from speech.sim.names import PROMISE_MISS_CHANCE
    from speech.sim.tune import Tuner

    t0, cpu0 = time.monotonic(), time.process_time()
    q, t, model = P.reference_model()
    history = [(i, P.day(P.TRACES["week"], 1 + i)) for i in range(P.WEEK_HISTORY)]
    tuner = Tuner(q, t, P.seed_inputs(history[0][1]), model, P.SLO_SHARE, miss_chance=PROMISE_MISS_CHANCE,
                  forecast_history=P.forecast_history(history), forecast_model="auto", forecast_season_days=7)
    tuner.see_training(history)
    planning = int(np.ceil(tuner.seed_numbers.planning_total_s))
    tuned = replace(tuner.seed_knobs(), surge_ratio=1.1, target_share=0.9, scale_in_step_share=0.1, scale_in_window_s=60,
                    scale_in_cooldown_s=planning, forecast_quantile=0.5, surge_average_share=0.5)
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


if __name__ == "__main__":
    sys.exit(main())
