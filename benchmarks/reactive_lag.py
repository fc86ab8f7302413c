"""Why a reactive plan cannot reach 1.25x the floor on azure-code when perfect-forecast does 1.19x
(issue 32): how stale what a reactive fleet has seen is, measured on the floor's own schedule.

    .venv/bin/python benchmarks/reactive_lag.py [--traces azure-code,azure-conv] [--unseen 5]

Per trace, on the unseen draws plan_cost.py judges (seeds 6..10), from the floor's per-second
schedule n(t) (speech.sim.floor: the fewest instances that keep the share, clairvoyant):

* **blocks**: n(t) held at its maximum over blocks one planning T_total long (a clairvoyant fleet
  that may change once per start-up), in instance-hours over the floor's: what foreknowledge still
  pays for bursts shorter than a start-up (perfect-forecast's x floor sits here).
* **short at h**: a causal fleet that at t holds h x the most the floor needed between 2 T_total
  and T_total ago (what a reactive plan could have seen and brought into service by t, changing
  instantly after that lag, with headroom h): the share of requests arriving while it is below the
  floor's n(t), and its instance-hours over the floor's. A reactive plan needs the h at which the
  short share falls under the 0.5 % the SLO share leaves; the cost at that h is what following
  the traffic reactively costs there, to set against fixed-peak's.

Reference measurements, SLO 3000 ms, SLO share 0.995; T_total the reference plan's planning T_total (320 s), printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

HEADROOMS = (1.25, 1.5, 1.75, 2.0, 2.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="azure-code,azure-conv")
    ap.add_argument("--unseen", type=int, default=5)
    args = ap.parse_args()

    import numpy as np
    from plan_cost import SLO_MS, SLO_SHARE, TRACES, day, reference_model

    from speech.plan.realtime import build_plan
    from speech.schema.config import PlanInputs
    from speech.sim.floor import floor_schedule

    q, t, model = reference_model()
    lag_s = int(round(build_plan(q, t, PlanInputs(slo_ms=SLO_MS, peak_rps=500, trough_rps=50),
                                 allow_config_mismatch=True).t_total.planning_s))
    print(f"planning T_total {lag_s} s\n")
    print("| trace | blocks of T_total (x floor) | " + " | ".join(f"h {h:g}: short, x floor" for h in HEADROOMS) + " |")
    print("|---|---|" + "---|" * len(HEADROOMS))
    for name in [x.strip() for x in args.traces.split(",") if x.strip()]:
        blocks, short, cost = [], {h: [] for h in HEADROOMS}, {h: [] for h in HEADROOMS}
        for seed in range(6, 6 + args.unseen):
            a = np.asarray(day(TRACES[name], seed), dtype=float)
            need = np.asarray(floor_schedule(model, a, SLO_MS, SLO_SHARE).per_second, dtype=float)
            n = need.size
            held = np.concatenate([np.full(min(lag_s, n - s), need[s : s + lag_s].max()) for s in range(0, n, lag_s)])
            blocks.append(held.sum() / need.sum())
            seen = np.array([need[max(0, i - 2 * lag_s) : max(1, i - lag_s)].max() for i in range(n)])
            for h in HEADROOMS:
                fleet = np.maximum(np.ceil(h * seen), 1.0)
                short[h].append(a[need > fleet].sum() / a.sum())
                cost[h].append(fleet.sum() / need.sum())
        cells = " | ".join(f"{100 * np.mean(short[h]):.2f}% (max {100 * np.max(short[h]):.2f}%), {np.mean(cost[h]):.2f}x"
                           for h in HEADROOMS)
        print(f"| {TRACES[name]} | {np.mean(blocks):.2f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
