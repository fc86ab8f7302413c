"""Forecast floors against the history and the day after it (issue 45): the model bench forecast
keeps, its backtest against seasonal-naive, and how both forecasts did on the first unseen draw.

    .venv/bin/python benchmarks/forecast_floors.py [--traces diurnal,two-peak] [--plot-dir docs]

History: benchmarks/plan_cost.py's five training draws (seeds 1..5) as consecutive days ending at
00:00; judged on seed 6, the day after, which the forecast never saw. Per trace: the backtest's
pinball loss per model (the history's last days, each forecast from the days before), the model
kept, and on the judged day the mean absolute error of the mean forecast and the share of minutes
above the 0.9 upper curve, for the kept model and for seasonal-naive; the floors (instances at the
plan's per-instance rate, capacity a planning T_total ahead) with and without x1.3 busy-hour
headroom. With --plot-dir: forecast-<trace>.png, the history's last day, the forecast, its upper
curve and the judged day, with the floors' capacity in requests/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):  # plan_cost by file: an installed checkout's benchmarks must not shadow it
    sys.path.insert(0, str(p))

QUANTILE = 0.9
HEADROOM = 1.3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="diurnal,two-peak")
    ap.add_argument("--plot-dir", type=Path, default=None)
    args = ap.parse_args()

    import numpy as np
    from plan_cost import TRACES, day, reference_model, seed_inputs

    from speech.plan.forecast import busy_headroom, forecast_rate, forecast_schedule, minute_needs
    from speech.plan.realtime import build_plan
    from speech.plan.schedule import minute_means

    q, t, _ = reference_model()
    print("| trace | model kept | backtest pinball loss (rps): " + "mstl / ets / seasonal-naive | judged day: MAE model | "
          "MAE seasonal-naive | minutes above the upper curve: model | seasonal-naive | floors | floors x1.3 busy | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in [x.strip() for x in args.traces.split(",") if x.strip()]:
        t0 = time.monotonic()
        spec = TRACES[name]
        train = [day(spec, s) for s in range(1, 6)]
        hist = np.concatenate(train)
        judged = minute_means(day(spec, 6).tolist(), 1)
        plan = build_plan(q, t, seed_inputs(train[0]), allow_config_mismatch=True)
        per, lead = plan.capacity.per_instance_rps, plan.t_total.planning_s
        fc = forecast_rate(hist, quantile=QUANTILE)
        naive = forecast_rate(hist, quantile=QUANTILE, model="seasonal-naive")
        losses = fc.backtest.losses
        s1 = forecast_schedule(fc, per_instance_rps=per, lead_s=lead, floor=plan.fleet.min_instances,
                               max_instances=plan.fleet.max_instances)
        s2 = forecast_schedule(fc, per_instance_rps=per, lead_s=lead, floor=plan.fleet.min_instances,
                               max_instances=plan.fleet.max_instances, headroom=HEADROOM)
        mae = float(np.abs(fc.point_rps - judged).mean())
        mae_n = float(np.abs(naive.point_rps - judged).mean())
        above, above_n = float((judged > fc.upper_rps).mean()), float((judged > naive.upper_rps).mean())
        print(f"| {spec} | {fc.model} | {losses.get('mstl', float('nan')):.1f} / {losses.get('ets', float('nan')):.1f} / "
              f"{losses['seasonal-naive']:.1f} | {mae:.1f} | {mae_n:.1f} | {100 * above:.1f}% | {100 * above_n:.1f}% | "
              f"{len(s1.floors) if s1 else 0} | {len(s2.floors) if s2 else 0} | {time.monotonic() - t0:.0f} |")
        if args.plot_dir is not None:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            hours = np.arange(1440) / 60
            last = minute_means(train[-1].tolist(), 1)
            cap = minute_needs(busy_headroom(fc, HEADROOM), per, lead, plan.fleet.min_instances, plan.fleet.max_instances) * per
            fig, ax = plt.subplots(figsize=(10, 4.2))
            ax.plot(hours - 24, last, color="0.6", lw=0.8, label="history: its last day (seed 5)")
            ax.plot(hours, judged, color="0.2", lw=0.8, label="judged day (seed 6, after the history)")
            ax.plot(hours, fc.point_rps, color="tab:blue", lw=1.2, label=f"forecast ({fc.model}), mean")
            ax.plot(hours, fc.upper_rps, color="tab:blue", lw=1.0, ls="--", label=f"forecast, {QUANTILE:g} quantile")
            ax.step(hours, cap, color="tab:orange", lw=1.0, where="post",
                    label=f"floors x{HEADROOM:g} busy hours, as capacity (x {per:.2f} rps)")
            ax.set_xlabel("hours (0 = the history's end)")
            ax.set_ylabel("requests/s (minute means)")
            ax.set_title(f"{spec}: forecast from seeds 1..5, judged on seed 6")
            ax.legend(fontsize=7, loc="upper left")
            fig.tight_layout()
            out = args.plot_dir / f"forecast-{name}.png"
            fig.savefig(out, dpi=90)
            plt.close(fig)
            print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
