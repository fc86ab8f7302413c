"""Several routes under one daily budget, and a batch route's backlog, simulated on the fleet
model of :mod:`speech.sim.fleet` (docs/design.md §10.9)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speech.plan.batch import BatchPlan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.fleet import Summary, simulate
from speech.sim.instance import build_instance, startup_s

# --- several routes under one budget (docs/design.md §10.9) -------------------------------------


@dataclass(frozen=True)
class BudgetRoute:
    """One real-time route of a stack with a daily budget: its plan (capped by the allocation,
    speech.plan.budget.apply_allocation), the measurements it was planned from, and its own traffic."""

    name: str
    plan: PlanArtifact
    qmax: QmaxArtifact
    ttotal: TtotalArtifact
    arrivals: np.ndarray


@dataclass(frozen=True)
class RouteResult:
    """A route at its budget cap next to the same route with its whole planned need."""

    name: str
    priority: str
    max_instances: int
    """What the budget allows (the capped plan's fleet max)."""
    peak_instances: int
    """What its plan needs at peak."""
    capped: Summary
    """The deployed policy with the fleet capped at the allocation."""
    uncapped: Summary
    """The same policy and traffic with the whole need: the baseline the cap is judged against."""


def simulate_budget(routes: Sequence[BudgetRoute]) -> list[RouteResult]:
    """Every route on its own traffic under the deployed policy, at its budget cap and at its whole
    planned need. Routes are separate endpoints, so they share nothing while running: the budget
    acts only through each fleet's max capacity, which is what this shows (a critical route keeps
    its plan, a capped standard route refuses what its capped fleet cannot admit at peak)."""
    out = []
    for r in routes:
        alloc = r.plan.budget
        peak = alloc.peak_instances if alloc is not None else r.plan.fleet.max_instances
        full = r.plan.model_copy(update={"fleet": r.plan.fleet.model_copy(update={"max_instances": max(
            r.plan.fleet.min_instances, peak)})})
        model = build_instance(r.qmax, r.ttotal, slo_ms=r.plan.inputs.slo_ms)
        _, _, capped = simulate(r.plan, r.qmax, r.ttotal, r.arrivals, policies=("plan",), model=model)
        _, _, uncapped = simulate(full, r.qmax, r.ttotal, r.arrivals, policies=("plan",), model=model)
        out.append(RouteResult(name=r.name, priority=alloc.priority if alloc is not None else "standard",
                               max_instances=r.plan.fleet.max_instances, peak_instances=peak,
                               capped=capped[0], uncapped=uncapped[0]))
    return out


def budget_table(results: Sequence[RouteResult]) -> str:
    """The comparison as a text table (benchmarks/simulate_budget.py prints it)."""
    head = (f"{'route':<14} {'priority':<9} {'fleet':>7} {'':<9} {'within SLO':>10} {'rejected':>9} "
            f"{'p95 ms':>8} {'viol. min':>9} {'inst-h':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        for label, s, n in (("at cap", r.capped, r.max_instances), ("whole need", r.uncapped, r.peak_instances)):
            lines.append(f"{r.name:<14} {r.priority:<9} {n:>7} {label:<9} {100 * s.within_slo_share:>9.1f}% "
                         f"{100 * s.rejected_share:>8.1f}% {s.ttfab_p95_ms:>8.0f} {s.violation_minutes:>9} "
                         f"{s.instance_hours:>8.1f}")
    return "\n".join(lines)


# --- a batch route's backlog (asynchronous inference) -------------------------------------------


@dataclass(frozen=True)
class BacklogRun:
    """A batch route's queue over the trace, one value per second."""

    backlog: np.ndarray
    """Requests waiting (not yet being served) at the end of each second."""
    serving: np.ndarray
    """Instances in service."""
    completed: np.ndarray
    """Requests finished in each second."""
    delay_p95_s: float
    """95th percentile of submission-to-completion delay of the requests finished (FIFO)."""
    delay_max_s: float
    within_delay_share: float
    """Share of all requests finished within the plan's max_delay_s."""
    unfinished: float
    """Requests still waiting when the trace ends."""


def simulate_backlog(plan: BatchPlan, ttotal: TtotalArtifact, arrivals: np.ndarray) -> BacklogRun:
    """A batch plan on a trace: the asynchronous endpoint's queue and its
    backlog scaling, as a fluid model with 1 s steps.

    What it models: every in-service instance completes ``throughput_per_instance_rps`` (X(Q_max),
    the plan's measured sustained rate) while work waits; requests are served in arrival order.
    Every 60 s (the asynchronous metrics' period) target tracking sets desired =
    ceil(backlog / backlog_target_per_instance), clamped to [0, max_instances]; a larger value acts
    after the scale-out cooldown, a smaller one after the scale-in cooldown; at zero instances the
    wake alarm adds one instance after ``wake.datapoints_to_alarm`` periods with a backlog. A new
    instance serves after the measured start-up (:func:`startup_s`). Not modelled: request sizes,
    S3 transfer times, the per-instance concurrency limit below X(Q_max).
    """
    x = float(plan.throughput_per_instance_rps)
    target = max(1, int(plan.backlog_target_per_instance))
    period = int(plan.wake.period_s)
    start = startup_s(ttotal)
    arr = np.asarray(arrivals, dtype=float)
    T = len(arr)
    backlog, serving, done = np.zeros(T), np.zeros(T, dtype=int), np.zeros(T)
    n, desired, b = 0, 0, 0.0
    pending: deque = deque()
    last_out, last_in = -math.inf, -math.inf
    breach = 0
    for t in range(T):
        while pending and pending[0] <= t:
            pending.popleft()
            n += 1
        b += arr[t]
        served = min(b, n * x)
        b -= served
        done[t], backlog[t], serving[t] = served, b, n
        if (t + 1) % period:
            continue
        have = n + len(pending)
        if have == 0:
            breach = breach + 1 if b > 0 else 0
            if breach >= plan.wake.datapoints_to_alarm:
                desired, breach, last_out = plan.wake.instances_added, 0, t
        else:
            want = min(plan.max_instances, math.ceil(b / target - EPS))
            if want > have and t - last_out >= plan.cooldowns.scale_out_s:
                desired, last_out = want, t
            elif want < have and t - last_in >= plan.cooldowns.scale_in_s and t - last_out >= plan.cooldowns.scale_in_s:
                desired, last_in = want, t
            else:
                desired = have
        while n + len(pending) < desired:
            pending.append(t + start)
        while n + len(pending) > desired and pending:
            pending.pop()
        while n > desired:
            n -= 1
    # FIFO delay: the k-th request (cumulative) finishes when cumulative completions reach k.
    cum_in, cum_out = np.cumsum(arr), np.cumsum(done)
    finished = cum_out[-1] if T else 0.0
    ks = np.linspace(0.0, finished, num=min(2000, max(2, int(finished)))) if finished > 0 else np.zeros(0)
    t_in = np.searchsorted(cum_in, ks, side="left")
    t_out = np.searchsorted(cum_out, ks, side="left")
    delays = (t_out - t_in).astype(float)
    total = float(cum_in[-1]) if T else 0.0
    within = float(np.mean(delays <= plan.inputs.max_delay_s)) * finished / total if total > 0 and delays.size else 1.0
    return BacklogRun(
        backlog=backlog, serving=serving, completed=done,
        delay_p95_s=float(np.percentile(delays, 95)) if delays.size else 0.0,
        delay_max_s=float(delays.max()) if delays.size else 0.0,
        within_delay_share=within,
        unfinished=float(b),
    )
