"""How long the fleet simulator takes per simulated day, per policy (1 s resolution).

    .venv/bin/python benchmarks/simulate_day.py [--peak-rps 8900] [--runs 3]

The default peak needs about 500 instances of the reference instance (17.9 rps each at C_scale_max).
Prints a table: per policy the median wall time of one simulated day and the peak instances it ran;
then the whole comparison (instance model + every policy + summaries) against the target of a few
seconds on 2 cores, and against the baseline measured in the same run: a per-request discrete-event
simulation (simpy) of one hour at 2 % of the traffic, scaled up to a day at full traffic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TARGET_S = 10.0


def des_seconds_per_request(rate_rps: float, instances: int, seconds: int) -> tuple[float, int]:
    """A minimal simpy fleet (least outstanding, FIFO one-at-a-time servers): wall s per request."""
    import numpy as np
    import simpy

    rng = np.random.default_rng(1)
    env = simpy.Environment()
    servers = [simpy.Resource(env, capacity=1) for _ in range(instances)]
    held = [0] * instances
    count = [0]

    def request(i):
        with servers[i].request() as r:
            yield r
            yield env.timeout(rng.exponential(1 / 17.9))
        held[i] -= 1

    def source():
        for at in np.sort(rng.uniform(0, seconds, rng.poisson(rate_rps * seconds))):
            yield env.timeout(at - env.now)
            i = min(range(instances), key=held.__getitem__)
            if held[i] < 50:
                held[i] += 1
                count[0] += 1
                env.process(request(i))

    env.process(source())
    t0 = time.perf_counter()
    env.run()
    return (time.perf_counter() - t0) / max(1, count[0]), count[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-rps", type=float, default=8900.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from speech.files import load_artifact
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.instance import build_instance
    from speech.sim.policies import POLICY_NAMES, make_policy
    from speech.sim.traces import generate

    q, t = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=args.peak_rps, trough_rps=args.peak_rps / 20))
    trace = generate(f"diurnal:peak={args.peak_rps:g},seed=1")
    t0 = time.perf_counter()
    model = build_instance(q, t)
    model_s = time.perf_counter() - t0
    rows = []
    total = model_s
    for name in POLICY_NAMES:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()  # building the policy counts: the floor and perfect-forecast solve their schedules there
            pol = make_policy(name, plan=plan, qmax=q, model=model, arrivals=trace.arrivals, peak_rps=trace.peak_rps)
            run = run_policy(model, trace.arrivals, pol)
            s = summarize(run, model, plan.inputs.slo_ms, plan.t_total.planning_s)
            times.append(time.perf_counter() - t0)
        rows.append((name, statistics.median(times), s.peak_instances))
        total += statistics.median(times)

    per_req, n = des_seconds_per_request(0.02 * args.peak_rps / 2, max(1, plan.fleet.max_instances // 50), 3600)
    des_day_s = per_req * trace.total_requests

    print(f"one day at 1 s resolution, diurnal peak {args.peak_rps:g} rps ({trace.total_requests:,.0f} requests), "
          f"plan max_instances {plan.fleet.max_instances}\n")
    print("| policy | s per simulated day | peak instances |")
    print("|---|---:|---:|")
    for name, sec, peak in rows:
        print(f"| {name} | {sec:.2f} | {peak} |")
    print(f"| (instance model, once) | {model_s:.2f} | |")
    print(f"| **all policies** | **{total:.2f}** | |")
    print(f"| baseline: per-request simpy DES, same day (from {n:,} requests timed) | {des_day_s:,.0f} | |")
    ok = total < TARGET_S
    print(f"\nall policies {total:.2f} s vs target < {TARGET_S:g} s: {'pass' if ok else 'FAIL'}; "
          f"{des_day_s / total:,.0f}x faster than per-request simulation")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
