"""Several models, one daily budget: who gets how many instances at peak (docs/design.md §3.11).

Pure: typed needs in, a typed allocation out; no I/O, no clock. The one allocation function
(:func:`allocate`) is what ``bench plan --stack``, the Pulumi program and the policy pack's
``daily-cost-ceiling`` rule call, so the three agree on every cap.

The rule, in order, all in USD per day (instances x USD per instance-hour x 24):

1. every model keeps its floor: real-time models their plan's min_instances; batch (async) models
   one instance, the least max capacity an endpoint can have (it scales to zero when idle, but
   SageMaker creates every endpoint with at least one instance, :data:`BATCH_FLOOR_INSTANCES`);
2. critical models get their whole peak fleet, never less. When the budget cannot pay for that
   plus every other floor, the allocation is a ``stop`` naming the shortfall;
3. standard models share what is left: instances one at a time in a fixed order (the least-served
   model's next) while the next fits, then the rest to the least-served that still fits; a
   standard model below its peak gets a ``warn`` saying which share of its peak it cannot serve;
4. batch models share what standard left, the same way (beyond their floor of one instance);
   below their peak their backlog grows while the peak lasts and drains after it.

A model's need (:class:`ModelNeed`) is plain numbers, so the allocation does not depend on how it
was planned: real-time models from their plan's fleet (:func:`realtime_need`), batch models from
the batch plan's peak instances (:func:`batch_need`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import Field, model_validator

from speech.errors import ConfigError
from speech.plan.findings import verdict
from speech.schema.artifacts import Frozen
from speech.schema.config import Budget, ModelConfig, Priority
from speech.schema.plan_artifacts import BudgetAllocation, Finding, ModelAllocation, PlanArtifact
from speech.schema.prices import HOURS_PER_DAY
from speech.schema.units import EPS

PRIORITY_ORDER: tuple[Priority, ...] = ("critical", "standard", "batch")
"""Who is served first."""
USD_TOL = EPS
"""Costs are sums of a few products of decimals; compare with this slack so that a budget of
exactly the cost fits."""
FINDING = "budget"
"""Name of the finding each model's plan carries (speech.plan.realtime's findings are snake_case)."""
STACK_FINDING = "budget_critical"
"""Name of the stack-level finding: the critical models' peak is covered, or the shortfall."""


class ModelNeed(Frozen):
    """What one model needs from the budget: its priority, its instance type and two fleet sizes."""

    name: str
    priority: Priority
    instance_type: str
    floor_instances: Annotated[int, Field(ge=0)]
    """The least max capacity it can be deployed with, instances: a real-time plan's min_instances
    (kept at all times); 1 for a batch model (:data:`BATCH_FLOOR_INSTANCES`)."""
    peak_instances: Annotated[int, Field(ge=0)]
    """Instances it needs at peak (the plan's max_instances before any budget cap)."""

    @model_validator(mode="after")
    def _peak_covers_floor(self) -> ModelNeed:
        if self.peak_instances < self.floor_instances:
            raise ValueError(
                f"model {self.name!r}: peak_instances {self.peak_instances} is below floor_instances {self.floor_instances}"
            )
        return self


# --- small steps -------------------------------------------------------------------------------


def daily_usd(instances: int, price_usd_per_hour: float) -> float:
    """instances x USD per instance-hour x 24 hours: USD per day at that fleet size."""
    return instances * price_usd_per_hour * HOURS_PER_DAY


def price_of(need: ModelNeed, prices: Mapping[str, float]) -> float:
    """The model's USD per instance-hour, or a ConfigError naming the key that sets it."""
    try:
        return float(prices[need.instance_type])
    except KeyError:
        raise ConfigError(
            f"speech-endpoints:budget.prices_usd_per_hour: no price for {need.instance_type} (model {need.name!r}); "
            f"add its USD per instance-hour (known: {', '.join(sorted(prices))})"
        ) from None


def share_out(needs: list[ModelNeed], prices: Mapping[str, float], available_usd: float) -> dict[str, int]:
    """Instances beyond each model's floor that ``available_usd`` (USD per day) pays for.

    Rule: instances are bought one at a time in one fixed order, the next instance of the model
    whose served fraction of its unmet need (peak - floor) would be lowest after it (ties: the
    name), until the next in that order does not fit; the money left then buys, one at a time, the
    next instance of the least-served model that still fits. Free instance types (price 0) get their
    whole need.

    Why the fixed order first: it does not depend on the budget, so a larger budget buys the same
    instances and more (no model is served less by the fair share when the budget grows). Filling the
    gaps with what still fits spends the rest; earlier, the fair share was an equal rounded-down
    fraction followed by that fill, and a larger budget could then buy one dear instance in place of
    two cheap ones (less spent, fewer instances).
    """
    extra = {n.name: n.peak_instances - n.floor_instances for n in needs}
    day = {n.name: daily_usd(1, price_of(n, prices)) for n in needs}
    out = {n.name: 0 for n in needs}
    left = max(0.0, available_usd)
    for name in out:
        if day[name] == 0:
            out[name] = extra[name]
    paid = [name for name in out if day[name] > 0 and extra[name] > 0]
    while True:
        open_ = [n for n in paid if out[n] < extra[n]]
        if not open_:
            return out
        nxt = min(open_, key=lambda n: ((out[n] + 1) / extra[n], n))
        if day[nxt] > left + USD_TOL:
            break
        out[nxt] += 1
        left -= day[nxt]
    while True:
        fits = [n for n in paid if out[n] < extra[n] and day[n] <= left + USD_TOL]
        if not fits:
            return out
        pick = min(fits, key=lambda n: (out[n] / extra[n], n))
        out[pick] += 1
        left -= day[pick]


def _usd(x: float) -> str:
    return f"${x:,.2f}"


def _line(need: ModelNeed, n: int, price: float) -> str:
    return f"{need.name}: {n} x {need.instance_type} x ${price:g}/h x 24 = {_usd(daily_usd(n, price))}"


def critical_finding(needs: list[ModelNeed], prices: Mapping[str, float], daily_budget_usd: float) -> Finding:
    """stop when the critical models' peak fleets plus every other model's floor cost more than the
    budget (USD per day), naming the shortfall; ok otherwise."""
    crit = [n for n in needs if n.priority == "critical"]
    others = [n for n in needs if n.priority != "critical"]
    crit_usd = sum(daily_usd(n.peak_instances, price_of(n, prices)) for n in crit)
    floors_usd = sum(daily_usd(n.floor_instances, price_of(n, prices)) for n in others)
    required = crit_usd + floors_usd
    parts = [_line(n, n.peak_instances, price_of(n, prices)) for n in crit]
    what = (f"critical models at their measured peak need {_usd(crit_usd)}/day ({'; '.join(parts)})" if crit
            else "no critical model")
    if required <= daily_budget_usd + USD_TOL:
        return Finding(
            name=STACK_FINDING,
            level="ok",
            message=f"{what}; with every other model at its floor ({_usd(floors_usd)}/day) that is {_usd(required)} of "
            f"the daily budget {_usd(daily_budget_usd)}, leaving {_usd(daily_budget_usd - required)}/day to share",
        )
    shortfall = required - daily_budget_usd
    return Finding(
        name=STACK_FINDING,
        level="stop",
        message=f"daily budget {_usd(daily_budget_usd)} cannot cover the critical models' peak: {what}, plus "
        f"{_usd(floors_usd)}/day for the other models' floors = {_usd(required)}/day, a shortfall of "
        f"{_usd(shortfall)}/day; fix: raise speech-endpoints:budget.daily_usd to at least {_usd(required)}, or "
        "lower a critical model's peak_rps, or make it standard",
    )


def model_finding(need: ModelNeed, max_instances: int, price: float, critical: Finding) -> Finding:
    """The finding in this model's plan: the stack's stop for a critical model left uncovered;
    warn for a standard or batch model capped below its peak (the share of its peak it cannot
    serve, and what the rest would cost per day); ok otherwise."""
    if need.priority == "critical":
        if critical.level == "stop":
            return critical
        return Finding(name=FINDING, level="ok", message=f"critical: the whole peak fleet of {need.peak_instances} "
                       f"instances ({_line(need, need.peak_instances, price)})")
    if max_instances >= need.peak_instances:
        return Finding(name=FINDING, level="ok", message=f"{need.priority}: the budget covers the whole peak fleet "
                       f"({_line(need, need.peak_instances, price)})")
    missing = need.peak_instances - max_instances
    unserved = missing / need.peak_instances
    more = daily_usd(missing, price)
    if need.priority == "standard":
        effect = ("requests above what the capped fleet serves get 503 queue_saturated at peak (the SLO still holds "
                  "for what is admitted)")
    else:
        effect = ("while its peak lasts its backlog grows past the planned delay, and it drains after the peak"
                  if max_instances > 0 else "it has no instance: its backlog is not served until budget frees up")
    return Finding(
        name=FINDING,
        level="warn",
        message=f"{need.priority} model {need.name!r} capped at {max_instances} of the {need.peak_instances} instances "
        f"its peak needs by the daily budget: it cannot serve {unserved:.0%} of its peak ({missing} instances); "
        f"{effect}; fix: raise speech-endpoints:budget.daily_usd by {_usd(more)} or lower its peak",
    )


# --- the allocation ----------------------------------------------------------------------------


def allocate(needs: Iterable[ModelNeed], budget: Budget) -> BudgetAllocation:
    """Max instances per model under ``budget.daily_usd`` (USD per day), by priority (module doc).

    Raises ConfigError for a model whose instance type has no price, or two needs of one name.
    """
    needs = sorted(needs, key=lambda n: (PRIORITY_ORDER.index(n.priority), n.name))
    names = [n.name for n in needs]
    if len(set(names)) != len(names):
        raise ConfigError(f"speech-endpoints:models: model names must be unique (got {', '.join(names)})")
    prices = budget.prices()
    critical = critical_finding(needs, prices, budget.daily_usd)
    max_of = {n.name: n.floor_instances for n in needs}
    if critical.level != "stop":
        for n in needs:
            if n.priority == "critical":
                max_of[n.name] = n.peak_instances
        spent = sum(daily_usd(max_of[n.name], price_of(n, prices)) for n in needs)
        for tier in ("standard", "batch"):
            group = [n for n in needs if n.priority == tier]
            extra = share_out(group, prices, budget.daily_usd - spent)
            for n in group:
                max_of[n.name] += extra[n.name]
                spent += daily_usd(extra[n.name], price_of(n, prices))
    else:
        # Uncovered critical models keep their whole need in the allocation (they are never capped);
        # the stop closes their scaling gate, so what deploys is their floor.
        for n in needs:
            if n.priority == "critical":
                max_of[n.name] = n.peak_instances
    models = []
    for n in needs:
        price = price_of(n, prices)
        m = max_of[n.name]
        models.append(ModelAllocation(
            name=n.name,
            priority=n.priority,
            instance_type=n.instance_type,
            price_usd_per_hour=price,
            floor_instances=n.floor_instances,
            peak_instances=n.peak_instances,
            max_instances=m,
            daily_usd_at_max=round(daily_usd(m, price), 6),
            daily_usd_at_peak=round(daily_usd(n.peak_instances, price), 6),
            served_share=round(m / n.peak_instances, 6) if n.peak_instances else 1.0,
            finding=model_finding(n, m, price, critical),
        ))
    findings = [critical] + [m.finding for m in models if m.finding.name == FINDING]
    return BudgetAllocation(
        daily_budget_usd=budget.daily_usd,
        prices_usd_per_hour={k: prices[k] for k in sorted({n.instance_type for n in needs})},
        required_daily_usd=round(sum(daily_usd(n.peak_instances if n.priority == "critical" else n.floor_instances,
                                               price_of(n, prices)) for n in needs), 6),
        total_daily_usd=round(sum(m.daily_usd_at_max for m in models), 6),
        models=models,
        findings=findings,
        verdict=verdict(findings),
    )


# --- needs and plans ---------------------------------------------------------------------------


def realtime_need(name: str, model: ModelConfig, plan: PlanArtifact | None) -> ModelNeed:
    """A real-time model's need: floor = the plan's min_instances, peak = its max_instances (as
    planned, before the budget); without measurements the configured floor, which is all it deploys."""
    floor = plan.fleet.min_instances if plan is not None else model.plan.min_instances
    peak = plan.fleet.max_instances if plan is not None else floor
    return ModelNeed(name=name, priority=model.priority, instance_type=model.instance_type,
                     floor_instances=floor, peak_instances=max(floor, peak))


def apply_allocation(plan: PlanArtifact, alloc: ModelAllocation) -> PlanArtifact:
    """The plan under the budget: max_instances = min(plan's, allocated) (never below its floor),
    the model's ``budget`` finding added, the verdict recomputed, the allocation recorded."""
    cap = max(plan.fleet.min_instances, min(plan.fleet.max_instances, alloc.max_instances))
    findings = [f for f in plan.findings if f.name != FINDING] + [alloc.finding]
    return PlanArtifact.model_validate({
        **plan.model_dump(),
        "fleet": {**plan.fleet.model_dump(), "max_instances": cap},
        "findings": [f.model_dump() for f in findings],
        "verdict": verdict(findings),
        "budget": alloc.model_dump(),
    })


BATCH_FLOOR_INSTANCES = 1
"""The least max capacity a batch (async) model can be deployed with: every SageMaker endpoint is
created with InitialInstanceCount >= 1 (botocore's ProductionVariant shape, min 1), and one whose
scaling is off keeps that instance; with scaling on it scales to 0 when idle, but its max capacity,
which the budget counts, is at least 1 (speech.plan.batch plans max_instances >= 1)."""


def batch_need(name: str, model: ModelConfig, peak_instances: int | None) -> ModelNeed:
    """A batch (async) model's need: floor :data:`BATCH_FLOOR_INSTANCES` (the instance its endpoint
    is created with; idle, it scales to zero, but the budget bounds the maximum), peak = the batch
    plan's peak_instances (speech.plan.batch); without measurements the one instance it deploys."""
    floor = BATCH_FLOOR_INSTANCES
    return ModelNeed(name=name, priority=model.priority, instance_type=model.instance_type, floor_instances=floor,
                     peak_instances=max(floor, peak_instances or 0))


def apply_batch_allocation(plan: Any, alloc: ModelAllocation) -> Any:
    """A batch plan (speech.plan.batch.BatchPlan) under the budget: max_instances = min(plan's,
    allocated), its ``batch_fleet_capacity`` finding judged again at that cap (speech.plan.batch.delay_at_cap:
    warn while the backlog grows at peak, stop when the cap cannot drain it, e.g. 0 instances), the
    model's ``budget`` finding added, the verdict recomputed. The batch module is imported here
    only, so the allocation itself does not depend on it."""
    from speech.plan.batch import delay_at_cap

    cap = min(plan.max_instances, alloc.max_instances)
    capped = plan.model_copy(update={"max_instances": cap})
    findings = []
    for f in plan.findings:
        if f.name == FINDING:
            continue
        findings.append(delay_at_cap(capped, cap) if f.name == "batch_fleet_capacity" else f)
    findings.append(alloc.finding)
    return type(plan).model_validate({**capped.model_dump(), "findings": [f.model_dump() for f in findings],
                                      "verdict": verdict(findings)})


def cap_plan(plan: Any, alloc: ModelAllocation) -> Any:
    """Either kind of plan under the budget: :func:`apply_allocation` for a real-time plan,
    :func:`apply_batch_allocation` for a batch plan (what the pack calls on a recomputed plan)."""
    return apply_allocation(plan, alloc) if isinstance(plan, PlanArtifact) else apply_batch_allocation(plan, alloc)


def check_deployed(allocation: BudgetAllocation, deployed_max: Mapping[str, int]) -> list[Finding]:
    """What the policy pack holds a stack to, from the same allocation: every critical model may
    scale to at least its measured peak need, and sum(max instances x price x 24) over the models
    stays within the daily budget. ``deployed_max``: model -> the max instances it may reach."""
    out: list[Finding] = []
    total = 0.0
    lines = []
    for m in allocation.models:
        n = deployed_max.get(m.name, m.max_instances)
        total += daily_usd(n, m.price_usd_per_hour)
        lines.append(f"{m.name}: {n} x {m.instance_type} x ${m.price_usd_per_hour:g}/h x 24 = "
                     f"{_usd(daily_usd(n, m.price_usd_per_hour))}")
        if m.priority == "critical" and n < m.peak_instances:
            out.append(Finding(
                name="budget_critical_capped",
                level="stop",
                message=f"critical model {m.name!r} may scale to {n} instances, below its measured peak need of "
                f"{m.peak_instances} (limit: a critical model is never capped below its peak); fix: raise its max "
                "capacity to the plan's (remove the hand edit or max_instances), or make the model standard",
            ))
    if total > allocation.daily_budget_usd + USD_TOL:
        out.append(Finding(
            name="budget_exceeded",
            level="stop",
            message=f"the models can reach {_usd(total)}/day at maximum scale ({'; '.join(lines)}), above the daily "
            f"budget {_usd(allocation.daily_budget_usd)} (speech-endpoints:budget.daily_usd); fix: let the program "
            "cap them from the budget allocation (bench plan --stack, then pulumi preview), or raise the budget",
        ))
    return out


__all__ = [
    "BATCH_FLOOR_INSTANCES", "FINDING", "PRIORITY_ORDER", "STACK_FINDING", "ModelNeed", "allocate", "apply_allocation",
    "apply_batch_allocation", "batch_need", "cap_plan", "check_deployed", "critical_finding", "daily_usd",
    "model_finding", "price_of", "realtime_need", "share_out",
]
