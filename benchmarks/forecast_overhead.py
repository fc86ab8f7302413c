"""Where a forecast-floored plan's money goes on diurnal:peak=5000 (issue 45): the forecast, or the
reactive layer on top of it.

    .venv/bin/python benchmarks/forecast_overhead.py [--seeds 6..10] [--plan KNOBS] [--quantile 0.9]

The history is benchmarks/plan_cost.py's five training draws (seeds 1..5, five consecutive days
ending at the 00:00 the judged draws start at); every row runs on draws after it (``--seeds``,
default plan_cost's unseen 6..10). The knobs are plan_cost's tuned diurnal plan (``--plan`` in
benchmarks/share_tail.py's form overrides them). Rows, each against the draw's own floor (x floor,
mean of the per-draw ratios), with the SLO share's mean and lowest:

* the knobs with learned daily floors (plan_cost's tuned plan) and with forecast floors (the
  backtest's model, and Holt-Winters forced): what a forecast buys under the same reactive layer;
* the knobs with the draw's OWN floor as floors (a perfect forecast under the plan's reactive
  layer): what the reactive layer costs when the forecast is exact;
* floors alone (target tracking and the surge step never fire): what the floors cost and keep
  without a reactive layer, forecast and perfect. Not a deployable plan: nothing would answer a
  day the forecast misses;
* the reactive layer capped at x1.03 / x1.06 the scheduled floor in force (what a scheduled
  MaxCapacity beside each floor would do; Application Auto Scaling's scheduled action can set one,
  the plan does not write it yet);
* perfect-forecast (the simulator's clairvoyant row under the plan's mechanics).

A second table: each model's forecast error, on the backtest (the history's last days) and on the
judged draws (pinball loss of its upper curve, mean absolute error of its mean curve, requests/s),
and the spread of the judged draws' floors (day-level noise no forecast of these i.i.d. draws can
know). The baseline of every ratio is the floor of the same draw in the same run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

TUNED = "surge_ratio=1.1,target_share=0.9,datapoints_to_alarm=3,min_instances=14,scale_in_step_share=0.1," \
        "scale_in_window_s=60,scale_in_cooldown_s=321"
"""plan_cost's tuned diurnal plan (docs/plan-cost.md), without its learned floors."""


def own_floors(tuner, knobs, floor) -> object:
    """The scaling numbers of ``knobs``' plan with a draw's OWN floor (``floor``, a
    speech.sim.floor.floor_schedule) as its daily scheduled floors: a perfect forecast at the
    schedule's granularity, each minute's need raised a planning T_total ahead. Shared with
    benchmarks/reactive_layer.py."""
    from speech.plan.forecast import forecast_entries, minute_needs
    from speech.plan.realtime import build_plan
    from speech.plan.schedule import _hhmm
    from speech.schema.config import FloorSchedule, ScheduledFloor
    from speech.sim.scaler import scaling_numbers

    plan = tuner.plan_for(knobs)
    assert plan is not None, f"knobs outside their bounds: {knobs}"
    need = minute_needs(floor.per_minute.astype(float), 1.0, plan.t_total.planning_s, plan.fleet.min_instances,
                        plan.fleet.max_instances)
    _, entries = forecast_entries(need, 0)
    sched = FloorSchedule(timezone="UTC", floors=[ScheduledFloor(at=_hhmm(m), min_instances=v) for m, v in entries])
    return scaling_numbers(build_plan(tuner.qmax, tuner.ttotal, tuner.inputs_for(knobs).model_copy(update={"schedule": sched}),
                                      allow_config_mismatch=True))


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("..")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="6..10", help="judged draws, FIRST..LAST (default 6..10, after the history's 1..5)")
    ap.add_argument("--plan", default=TUNED, help="knob=value,... over the seed knobs (default: plan_cost's tuned diurnal plan)")
    ap.add_argument("--quantile", type=float, default=0.9, help="the forecast floors' upper quantile (default 0.9)")
    ap.add_argument("--plot", type=Path, default=None, metavar="PNG",
                    help="also plot the history's days, the judged draws and each model's forecast (mean and upper curve)")
    ap.add_argument("--plot-only", action="store_true", help="with --plot: the plot alone, no rows")
    args = ap.parse_args()

    import numpy as np
    import plan_cost as pc
    from share_tail import _knobs

    from speech.plan.forecast import forecast_rate, pinball
    from speech.plan.schedule import minute_means
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.floor import floor_schedule
    from speech.sim.floor_policies import PerfectForecastPolicy
    from speech.sim.policies import AwsPolicy
    from speech.sim.scaler import floor_at
    from speech.sim.tune import Tuner

    class CappedPolicy(AwsPolicy):
        """The plan's policy with each decision held to ``cap`` x the scheduled floor in force."""

        def __init__(self, *a, cap: float, **kw) -> None:
            super().__init__(*a, **kw)
            self.cap = cap

        def decide(self, ctx):
            n, why, st = super().decide(ctx)
            floor = floor_at(self.s, ctx.now)
            return min(n, max(floor, math.ceil(floor * self.cap))), why, st

    t0 = time.monotonic()
    q, t, model = pc.reference_model()
    spec = pc.TRACES["diurnal"]
    train = [(i, pc.day(spec, 1 + i)) for i in range(5)]
    hist = pc.forecast_history(train)
    rate = np.mean(np.stack([a for _, a in train]), axis=0)
    tu = Tuner(q, t, pc.seed_inputs(train[0][1]), model, pc.SLO_SHARE, schedule_rate=rate, forecast_history=hist)
    ets = Tuner(q, t, tu.inputs, model, pc.SLO_SHARE, forecast_history=hist, forecast_model="ets")
    base = _knobs(tu.seed_knobs(), args.plan)
    qq = args.quantile
    fk = replace(base, forecast_quantile=qq)
    chosen = tu.forecast(qq)
    plan = tu.plan_for(base)
    assert plan is not None, f"knobs outside their bounds: {base}"
    numbers = {
        "learned": tu.numbers_for(replace(base, scheduled_floors=True)),
        "forecast": tu.numbers_for(fk),
        "ets": ets.numbers_for(fk),
        "forecast x1.06": tu.numbers_for(replace(fk, busy_headroom=1.06)),
    }
    sn = tu.numbers_for(base)
    off = {"target_value": 1e9, "saturation_threshold": 1e9}

    def aws(n, **kw):
        from dataclasses import replace as dreplace

        return AwsPolicy(dreplace(n, **kw) if kw else n, model.cloudwatch_ratio, model.q_max)

    if args.plot is not None:
        _plot(args.plot, hist, [(seed, pc.day(spec, seed)) for seed in _seeds(args.seeds)],
              {m: forecast_rate(hist, model=m, quantile=qq) for m in ("ets", "seasonal-naive")}, chosen.model, qq)
        print(f"wrote {args.plot}", file=sys.stderr)
        if args.plot_only:
            return 0
    label_fc = f"{chosen.model} floors (q {qq:g})"
    rows: dict[str, list[tuple[float, float]]] = {}
    floors_h: list[float] = []
    errors: dict[str, list[tuple[float, float]]] = {}
    models = {m: forecast_rate(hist, model=m, quantile=qq) for m in ("mstl", "ets", "seasonal-naive")}
    for seed in _seeds(args.seeds):
        a = pc.day(spec, seed)
        f = floor_schedule(model, a, pc.SLO_MS, pc.SLO_SHARE)
        floors_h.append(f.instance_hours)
        own = own_floors(tu, base, f)
        m = minute_means(a.tolist(), 1)[:1440]
        for name, fc in models.items():
            errors.setdefault(name, []).append((pinball(m, fc.upper_rps[:1440], qq), float(np.abs(m - fc.point_rps[:1440]).mean())))
        pols = {
            "tuned knobs + learned daily floors (plan_cost's tuned plan)": aws(numbers["learned"]),
            f"tuned knobs + {label_fc}": aws(numbers["forecast"]),
            f"tuned knobs + Holt-Winters floors (q {qq:g})": aws(numbers["ets"]),
            "tuned knobs + the draw's own floor as floors": aws(own),
            f"{label_fc} alone (no reactive layer)": aws(numbers["forecast"], **off),
            f"{label_fc} x1.06 in the busy hours alone": aws(numbers["forecast x1.06"], **off),
            "the draw's own floor alone (no reactive layer)": aws(own, **off),
            f"tuned knobs + {label_fc}, reactive capped at x1.03 the floor": CappedPolicy(
                numbers["forecast"], model.cloudwatch_ratio, model.q_max, cap=1.03),
            f"tuned knobs + {label_fc}, reactive capped at x1.06 the floor": CappedPolicy(
                numbers["forecast"], model.cloudwatch_ratio, model.q_max, cap=1.06),
            "perfect-forecast": PerfectForecastPolicy(
                f.per_second, startup_s=model.startup_s, removal_updating_s=60.0, tick_s=sn.metric_period_s,
                min_instances=sn.min_instances, max_instances=sn.max_instances),
        }
        for label, pol in pols.items():
            warm = numbers["learned"].x_target_rps if isinstance(pol, AwsPolicy) else None  # as plan_cost runs each
            s = summarize(run_policy(model, a, pol, warm_x_rps=warm), model, pc.SLO_MS, numbers["learned"].planning_total_s)
            rows.setdefault(label, []).append((s.within_slo_share, s.instance_hours / f.instance_hours))
        print(f"seed {seed} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)

    print(f"diurnal:peak=5000, history seeds 1..5, judged seeds {args.seeds}; knobs {args.plan}; "
          f"the backtest kept {chosen.model} (pinball: "
          + ", ".join(f"{k} {v:.1f}" for k, v in chosen.backtest.losses.items()) + f"); {time.monotonic() - t0:.0f} s\n")
    print("| row | in SLO mean | in SLO lowest | draws below 99.5 % | x floor |")
    print("|---|---|---|---|---|")
    for label, xs in rows.items():
        shares = [s for s, _ in xs]
        below = sum(s < pc.SLO_SHARE for s in shares)
        print(f"| {label} | {100 * np.mean(shares):.2f}% | {100 * min(shares):.2f}% | {below} of {len(xs)} | "
              f"{np.mean([x for _, x in xs]):.3f} |")
    print(f"\nfloor instance-hours over the judged draws: {min(floors_h):,.1f} .. {max(floors_h):,.1f} "
          f"(mean {np.mean(floors_h):,.1f}" + (f", sd {np.std(floors_h, ddof=1):.1f})\n" if len(floors_h) > 1 else ")\n"))
    print(f"| model | backtest pinball (q {qq:g}, rps) | judged draws: pinball mean | worst | MAE of the mean curve |")
    print("|---|---|---|---|---|")
    for name, errs in errors.items():
        pin = [p for p, _ in errs]
        print(f"| {name} | {chosen.backtest.losses[name]:.1f} | {np.mean(pin):.1f} | {max(pin):.1f} | "
              f"{np.mean([e for _, e in errs]):.1f} |")
    return 0


def _plot(path: Path, hist, judged, forecasts: dict, chosen: str, quantile: float) -> None:
    """The history's days and the judged draws (minute means, one day on the x axis) and each
    model's forecast: the day-level spread no forecast of independent days can place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from speech.plan.schedule import minute_means

    hours = np.arange(1440) / 60
    fig, ax = plt.subplots(figsize=(10, 4.4))
    for i in range(hist.size // 86400):
        ax.plot(hours, minute_means(hist[i * 86400:(i + 1) * 86400].tolist(), 1)[:1440], color="0.75", lw=0.6,
                label="history: seeds 1..5" if i == 0 else None)
    for j, (_seed, a) in enumerate(judged):
        ax.plot(hours, minute_means(a.tolist(), 1)[:1440], color="0.25", lw=0.6,
                label=f"judged draws: seeds {judged[0][0]}..{judged[-1][0]}" if j == 0 else None)
    colors = {"ets": "tab:blue", "seasonal-naive": "tab:red"}
    for m, fc in forecasts.items():
        name = "Holt-Winters" if m == "ets" else m
        kept = " (the backtest's choice)" if m == chosen else ""
        ax.plot(hours, fc.point_rps[:1440], color=colors[m], lw=1.2, label=f"{name}{kept}, mean")
        ax.plot(hours, fc.upper_rps[:1440], color=colors[m], lw=1.0, ls="--", label=f"{name}, {quantile:g} quantile")
    ax.set_xlabel("hour of the day")
    ax.set_ylabel("requests/s (minute means)")
    ax.set_title("diurnal:peak=5000: forecasts from seeds 1..5 against the draws after them")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
