"""What the reactive layer over scheduled floors costs and keeps, idea by idea (issue 45):
diurnal:peak=5000, the five unseen draws of benchmarks/plan_cost.py.

    .venv/bin/python benchmarks/reactive_layer.py [--seeds 6..10] [--floors own,seasonal-naive]

The floors under every row: the draw's OWN floor as scheduled floors (a perfect forecast at the
schedule's granularity, benchmarks/forecast_overhead.py's row) and the seasonal-naive forecast of
the history before the draws (plan_cost's training draws, seeds 1..5) at the 0.9 quantile. The
knobs are plan_cost's tuned diurnal plan (benchmarks/forecast_overhead.py's TUNED). Each row
changes one thing in the reactive layer over the same floors:

* which statistic of ConcurrentRequestsPerModel each alarm reads: the Maximum (what the plan
  deploys today; a period in which one request was refused reads Q_max) or the Average (the
  instances' mean over the period);
* target tracking on, or at Q_max (inert: the gate holds concurrency at or below it);
* the surge alarm's threshold and datapoints (M of N);
* the scale-in alarm's statistic and threshold.

Rows marked "deployable" are what Application Auto Scaling and CloudWatch can run with the
project's spec: target tracking reads the predefined 10 s metric, whose statistic AWS does not
document (the simulator reads the Maximum, speech.sim.policies.AwsReadings); step policies read
CloudWatch alarms, whose statistic, period (10 s for this high-resolution metric), threshold and M
of N the spec sets (PutMetricAlarm). Target tracking on the Average would need a customized metric
specification, which Application Auto Scaling reads at 60 s (no period field in botocore's model),
so those rows are measured as ideas, not offered to the tuner.

Every row runs the fleet simulator (speech.sim.fleet.run_policy) with one policy class below that
reads the same history the plan's policy reads; x floor is the mean of per-draw ratios against the
draw's own floor in the same run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


@dataclass(frozen=True)
class Layer:
    """One reactive layer: each alarm's statistic and threshold (x Q_max), what is switched off."""

    label: str
    deployable: bool
    tt: str | None = "max"
    """Target tracking's statistic; None: at Q_max (never acts)."""
    tt_share: float | None = None
    """Target tracking's target x Q_max; None: the plan's."""
    surge: str | None = "max"
    """The surge alarm's statistic; None: no surge step."""
    surge_share: float = 1.0
    surge_m: int | None = None
    """Datapoints that must breach; None: the plan's."""
    surge_n: int | None = None
    """Of this many (M of N); None: M."""
    low: str = "max"
    low_share: float | None = None
    """The scale-in alarm's threshold x Q_max; None: the plan's C_scale_min."""


LAYERS = (
    Layer("the plan as deployed: target tracking and surge on the Maximum", True),
    Layer("target tracking at Q_max, surge on the Maximum", True, tt=None),
    Layer("target tracking off, surge on the Maximum 15 of 30 datapoints", True, tt=None, surge_m=15, surge_n=30),
    Layer("target tracking on the Maximum, surge on the Maximum 10 of 30", True, surge_m=10, surge_n=30),
    Layer("target tracking on the Average (60 s metric needed), surge on the Maximum", False, tt="avg"),
    Layer("target tracking on the Average at 0.7 Q_max, no surge", False, tt="avg", tt_share=0.7, surge=None),
    Layer("target tracking on the Average, surge and scale-in on the Average", False, tt="avg", surge="avg", low="avg"),
    Layer("target tracking at Q_max, surge on the Average >= 0.55 Q_max, 1 datapoint", True, tt=None, surge="avg",
          surge_share=0.55, surge_m=1),
    Layer("target tracking at Q_max, surge on the Average >= 0.5 Q_max, 1 datapoint", True, tt=None, surge="avg",
          surge_share=0.5, surge_m=1),
    Layer("target tracking at Q_max, surge on the Average >= 0.45 Q_max, 1 datapoint", True, tt=None, surge="avg",
          surge_share=0.45, surge_m=1),
    Layer("target tracking at Q_max, surge on the Average >= 0.45 Q_max, 3 datapoints", True, tt=None, surge="avg",
          surge_share=0.45, surge_m=3),
    Layer("target tracking at Q_max, surge on the Average >= 0.4 Q_max, 1 datapoint, scale-in on the Average "
          "<= 0.3 Q_max", True, tt=None, surge="avg", surge_share=0.4, surge_m=1, low="avg", low_share=0.3),
)


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("..")
    return list(range(int(lo), int(hi or lo) + 1))


def layer_policy(numbers, model, layer: Layer):
    """The plan's policy (speech.sim.policies.AwsPolicy) with the layer's statistics, thresholds
    and switches; the bounds, cooldowns and floors as the plan's."""
    from speech.plan.formulas import to_cloudwatch
    from speech.schema.units import EPS
    from speech.sim.policies import AwsPolicy, AwsState
    from speech.sim.scaler import floor_at, m_of_n_alarm

    q, ratio = model.q_max, model.cloudwatch_ratio
    s = replace(numbers, surge_periods=layer.surge_m or numbers.surge_periods)
    tt_target = s.target_value if layer.tt_share is None else to_cloudwatch(layer.tt_share * q, ratio)
    surge_thr = to_cloudwatch(layer.surge_share * q, ratio)
    low_thr = s.scale_in_threshold if layer.low_share is None else to_cloudwatch(layer.low_share * q, ratio)
    surge_n = layer.surge_n or s.surge_periods

    class LayerPolicy(AwsPolicy):
        def decide(self, ctx):
            st = ctx.state or AwsState()
            now, desired = ctx.now, ctx.desired
            mx, traffic = self.datapoint(ctx)
            stat = {"max": mx, "avg": self.average(ctx)}
            k = self.readings.target_tracking_datapoints
            m_tt = stat[layer.tt] if layer.tt else 0.0
            tt, tt_fire = m_of_n_alarm(st.tt, layer.tt is not None and m_tt > tt_target, k, k)
            surge, surge_fire = m_of_n_alarm(st.surge, layer.surge is not None and stat[layer.surge or "max"] >= surge_thr,
                                             s.surge_periods, surge_n)
            low, low_fire = m_of_n_alarm(st.low, traffic <= 0 or stat[layer.low] <= low_thr, s.scale_in_periods,
                                         s.scale_in_periods)
            st = AwsState(tt, surge, low, st.tt_until, st.tt_base, st.surge_until, st.in_until, st.jump_until)
            best, why = desired, ""
            if tt_fire:
                base = st.tt_base if now < st.tt_until else desired
                new = min(self.max_n, math.ceil(base * m_tt / tt_target - EPS))
                if new > best:
                    best, why = new, "target-tracking"
            if surge_fire and now >= st.surge_until:
                add = desired * s.surge_percent / 100.0
                new = min(self.max_n, desired + max(max(1, math.floor(add)) if add > 0 else 0, s.surge_min_added))
                if new > best:
                    best, why = new, "surge"
            if best > desired:
                if why == "target-tracking":
                    st = replace(st, tt_base=desired if now >= st.tt_until else st.tt_base,
                                 tt_until=now + s.scale_out_cooldown_s)
                else:
                    st = replace(st, surge_until=now + s.surge_cooldown_s)
                return best, why, st
            floor = floor_at(s, now)
            if desired < floor:
                return floor, "scheduled floor", st
            if low_fire and now >= st.in_until and desired > floor:
                st = replace(st, in_until=now + s.scale_in_cooldown_s)
                return max(floor, s.scale_in_to(desired)), "scale-in", st
            return desired, "", st

    return LayerPolicy(s, ratio, q)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="6..10", help="judged draws, FIRST..LAST (default 6..10, after the history's 1..5)")
    ap.add_argument("--floors", default="own,seasonal-naive", help="own, seasonal-naive or both (default both)")
    args = ap.parse_args()

    import numpy as np
    import plan_cost as pc
    from forecast_overhead import TUNED, own_floors
    from share_tail import _knobs

    from speech.sim.fleet import run_policy, summarize
    from speech.sim.floor import floor_schedule
    from speech.sim.tune import Tuner

    t0, c0 = time.monotonic(), time.process_time()
    q, t, model = pc.reference_model()
    spec = pc.TRACES["diurnal"]
    train = [(i, pc.day(spec, 1 + i)) for i in range(5)]
    tu = Tuner(q, t, pc.seed_inputs(train[0][1]), model, pc.SLO_SHARE, forecast_history=pc.forecast_history(train))
    base = _knobs(tu.seed_knobs(), TUNED)
    plan = tu.plan_for(base)
    assert plan is not None
    forecast = tu.numbers_for(replace(base, forecast_quantile=0.9))

    wanted = args.floors.split(",")
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for seed in _seeds(args.seeds):
        a = pc.day(spec, seed)
        f = floor_schedule(model, a, pc.SLO_MS, pc.SLO_SHARE)
        floors = {"own": own_floors(tu, base, f), "seasonal-naive": forecast}
        for name in wanted:
            for layer in LAYERS:
                pol = layer_policy(floors[name], model, layer)
                run = run_policy(model, a, pol, warm_x_rps=floors[name].x_target_rps)
                s = summarize(run, model, pc.SLO_MS, floors[name].planning_total_s)
                rows.setdefault((name, layer.label), []).append((s.within_slo_share, s.instance_hours / f.instance_hours))
        print(f"seed {seed} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)

    print(f"diurnal:peak=5000, judged seeds {args.seeds}; knobs {TUNED}; "
          f"{time.monotonic() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU\n")
    print("| floors | reactive layer | deployable | in SLO mean | in SLO lowest | draws below 99.5 % | x floor |")
    print("|---|---|---|---|---|---|---|")
    deploy = {layer.label: layer.deployable for layer in LAYERS}
    for (name, label), xs in rows.items():
        shares = [s for s, _ in xs]
        floors_label = "the draw's own floor" if name == "own" else "seasonal-naive q 0.9"
        print(f"| {floors_label} | {label} | {'yes' if deploy[label] else 'no'} | {100 * np.mean(shares):.2f}% | "
              f"{100 * min(shares):.2f}% | {sum(s < pc.SLO_SHARE for s in shares)} of {len(xs)} | "
              f"{np.mean([x for _, x in xs]):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
