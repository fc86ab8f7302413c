"""Several routes under one daily budget at their peak: each route capped at its allocation next to
the same route with its whole planned need (the baseline, simulated in the same run).

    .venv/bin/python benchmarks/simulate_budget.py [--stack-dir examples --stack multi] [--hours 3] [--daily-usd N]

Re-plans every model of the stack file as the program does (speech.stack.replan.plan_stack: build_plan,
then speech.plan.budget.allocate), gives each route a tide from its trough to its planned peak_rps and
back (Poisson, seeded), and runs the deployed scaling policy on it (speech.sim.simulate_budget).
Prints the table and the budget's findings: a critical route keeps its SLO, a capped standard route
refuses what its capped fleet cannot admit at peak.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from speech.schema.config import Budget
    from speech.sim.routes import BudgetRoute, budget_table, simulate_budget
    from speech.sim.traces import diurnal_rate, poisson_arrivals
    from speech.stack.replan import load_stack, plan_stack

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stack-dir", type=Path, default=ROOT / "examples")
    p.add_argument("--stack", default="multi")
    p.add_argument("--hours", type=float, default=3.0, help="length of the tide, hours (peak in the middle)")
    p.add_argument("--daily-usd", type=float, default=None, help="override the stack's daily budget")
    args = p.parse_args(argv)
    config = load_stack(args.stack_dir / f"Pulumi.{args.stack}.yaml")
    if args.daily_usd is not None:
        prices = config.budget.prices_usd_per_hour if config.budget else {}
        config = config.model_copy(update={"budget": Budget(daily_usd=args.daily_usd, prices_usd_per_hour=prices)})
    deployments, allocation = plan_stack(config, args.stack)
    routes = []
    for seed, (name, dep) in enumerate(deployments.items(), start=1):
        if dep.plan is None or dep.config.measurements is None:
            print(f"{name}: {'batch route (see the backlog table below)' if dep.batch else 'not measured'}, skipped")
            continue
        rate = diurnal_rate(peak=dep.config.plan.peak_rps, trough=dep.config.plan.trough_rps,
                            duration_s=int(args.hours * 3600), spikes=0, spike_factor=1.0, spike_s=60, seed=seed)
        routes.append(BudgetRoute(name=name, plan=dep.plan, qmax=dep.config.measurements.qmax,
                                  ttotal=dep.config.measurements.ttotal, arrivals=poisson_arrivals(rate, seed)))
    t0 = time.perf_counter()
    results = simulate_budget(routes)
    wall = time.perf_counter() - t0
    print(f"stack {args.stack!r}, a {args.hours:g} h tide per route, deployed policy; "
          "'whole need' = the same route uncapped (baseline)\n")
    print(budget_table(results))
    if allocation is not None:
        print(f"\ndaily budget ${allocation.daily_budget_usd:,.2f}, at maximum scale ${allocation.total_daily_usd:,.2f}")
        for f in allocation.findings:
            print(f"  [{f.level}] {f.name}: {f.message}")
    import numpy as np

    from speech.sim.routes import simulate_backlog
    from speech.stack.replan import plan_stack as replan

    whole, _ = replan(config.model_copy(update={"budget": None}), args.stack)
    for seed, (name, dep) in enumerate(deployments.items(), start=len(routes) + 1):
        if dep.batch is None or dep.config.measurements is None:
            continue
        duration = int(args.hours * 3600)
        rate = np.concatenate([diurnal_rate(peak=dep.config.plan.peak_rps, trough=dep.config.plan.trough_rps,
                                            duration_s=duration, spikes=0, spike_factor=1.0, spike_s=60, seed=seed),
                               np.full(duration, dep.config.plan.trough_rps)])
        arrivals = poisson_arrivals(rate, seed)
        print(f"\nbatch route {name!r}: a {args.hours:g} h tide to {dep.config.plan.peak_rps:g} rps, then as long at "
              f"the trough; max_delay_s {dep.batch.inputs.max_delay_s:g}")
        print(f"{'':<11} {'instances':>9} {'max backlog':>12} {'at min':>7} {'p95 delay s':>12} {'max delay s':>12} "
              f"{'within delay':>13} {'left':>6}")
        for label, plan in (("at cap", dep.batch), ("whole need", whole[name].batch)):
            r = simulate_backlog(plan, dep.config.measurements.ttotal, arrivals)
            print(f"{label:<11} {plan.max_instances:>9} {r.backlog.max():>12,.0f} {int(np.argmax(r.backlog)) // 60:>7} "
                  f"{r.delay_p95_s:>12,.0f} {r.delay_max_s:>12,.0f} {100 * r.within_delay_share:>12.1f}% "
                  f"{r.unfinished:>6,.0f}")
    print(f"\n{2 * len(routes)} real-time simulations in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
