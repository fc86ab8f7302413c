"""Plans that pay only for the traffic: the plan's fleet on a diurnal day against the plan as it was
(the baseline, simulated in the same run), the floor and a fixed peak fleet.

    .venv/bin/python benchmarks/plan_tide.py [--trace diurnal:peak=5000,seed=1] [--slo-share 0.995]

Rows, all on the reference measurements (artifacts/reference/) and the same trace:

* ``before``: the plan as it was before SLO-share sizing: target (1 - h) x Q_max, fleet
  ceil(peak / X(C_scale_max)), scale-in one instance per step (a plan without ``scale_in``);
* ``plan``: today's seed plan (SLO-share target and fleet, a share of the fleet per scale-in step);
* ``plan+schedule``: the same with daily floors derived from the trace (speech.plan.schedule);
* ``floor`` and ``fixed-peak``: the simulator's cost floor and the peak fleet all day.

Prints within-SLO share, refused share, instance-hours and cost against the floor.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


def main(argv: list[str] | None = None) -> int:
    from speech.files import load_artifact
    from speech.plan.realtime import build_plan
    from speech.plan.schedule import derive_schedule
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs
    from speech.sim.fleet import simulate
    from speech.sim.traces import generate

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default="diurnal:peak=5000,seed=1")
    p.add_argument("--trough-rps", type=float, default=250.0, help="the plan's trough (the diurnal trace's is 250)")
    p.add_argument("--slo-share", type=float, default=0.995)
    args = p.parse_args(argv)

    q, t = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    trace = generate(args.trace)
    peak = trace.peak_rps
    base = PlanInputs(peak_rps=peak, trough_rps=min(args.trough_rps, peak), slo_share=args.slo_share)

    old = build_plan(q, t, base.model_copy(update={"target_share": 1 - (base.surge_ratio - 1)}))
    old = old.model_copy(update={
        "scale_in": None,
        "fleet": old.fleet.model_copy(update={"max_instances": max(old.fleet.min_instances, math.ceil(
            peak / old.capacity.throughput_at_target_rps - 1e-9))}),
    })
    plan = build_plan(q, t, base)
    schedule = derive_schedule(trace.arrivals, per_instance_rps=plan.capacity.per_instance_rps,
                               lead_s=plan.t_total.planning_s, floor=plan.fleet.min_instances,
                               max_instances=plan.fleet.max_instances)
    scheduled = build_plan(q, t, base.model_copy(update={"schedule": schedule})) if schedule else plan

    rows = []
    started = time.perf_counter()
    floor_hours = None
    for label, pl, policies in (("before", old, ["plan", "floor", "fixed-peak"]), ("plan", plan, ["plan"]),
                                ("plan+schedule", scheduled, ["plan"])):
        _, _, sums = simulate(pl, q, t, trace.arrivals, peak_rps=peak, policies=policies)
        for s in sums:
            name = label if s.policy == "plan" else s.policy
            if s.policy == "floor":
                floor_hours = s.instance_hours
            rows.append((name, s, pl))
    elapsed = time.perf_counter() - started

    print(f"trace {args.trace} (peak {peak:.0f} rps), reference measurements, SLO share {args.slo_share:g}; "
          f"simulated in {elapsed:.1f} s")
    print(f"{'policy':<14} {'target':>7} {'max':>5} {'step':>6} {'within SLO':>11} {'refused':>8} {'inst-h':>8} "
          f"{'x floor':>8} {'peak N':>7} {'flaps':>6}")
    for name, s, pl in rows:
        step = "-1" if pl.scale_in is None else f"{pl.scale_in.step_percent}%"
        print(f"{name:<14} {pl.thresholds.c_scale_max:>7.2f} {pl.fleet.max_instances:>5} {step:>6} "
              f"{100 * s.within_slo_share:>10.2f}% {100 * s.rejected_share:>7.2f}% {s.instance_hours:>8.0f} "
              f"{s.instance_hours / floor_hours:>8.2f} {s.peak_instances:>7} {s.flaps:>6}")
    if schedule is not None:
        print(f"\nschedule ({len(schedule.floors)} floors, UTC): "
              + ", ".join(f"{f.at}->{f.min_instances}" for f in scheduled.schedule.floors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
