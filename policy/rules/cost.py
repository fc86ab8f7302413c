"""The daily cost ceiling and the stack budget's allocation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policy.recompute import NoProvenance, Provenance, ProvenanceCache, tags_of
from policy.resources import (
    MISSING,
    T_ENDPOINT,
    UNKNOWN,
    Res,
    Stack,
    as_number,
    at,
    fmt,
    has_unknown,
)
from policy.rules.common import FIX_HAND_EDIT, PREVIEW, StackViolations, scaled_variants
from speech.deploy import provenance as pv
from speech.deploy import scaling
from speech.plan.budget import USD_TOL

# --- daily-cost-ceiling ------------------------------------------------------------------------


def rule_daily_cost(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """sum(max instances x hourly price x 24) within the daily budget; with a stack budget
    (``speech-endpoints:budget``, recorded in the provenance documents) also the allocation the
    program capped with, recomputed by the same function (speech.plan.budget.allocate): its shortfall
    when the critical models' peak is not covered, critical models never capped below their
    measured peak need, and each document's allocation equal to the recomputed one."""
    from policy.config import DEFAULT_DAILY_BUDGET_USD, DEFAULT_HOURLY_PRICES_USD

    budget = as_number(cfg.get("daily-budget-usd", DEFAULT_DAILY_BUDGET_USD))
    prices = dict(DEFAULT_HOURLY_PRICES_USD)
    prices.update(cfg.get("hourly-prices-usd") or {})
    targets = {(s.endpoint.urn, s.variant or scaling.VARIANT): s.target for s in scaled_variants(stack) if s.endpoint}
    lines, total, blocked = [], 0.0, False
    deployed: dict[str, tuple[Res, str | None, float]] = {}
    for e in stack.of(T_ENDPOINT):
        configs, _ = stack.endpoint_config_of(e)
        if not configs:
            yield (f"{PREVIEW if e.get('endpointConfigName') is UNKNOWN else 'cannot price'} {e.label}: its endpoint "
                   "configuration is not identifiable, so its cost is not bounded; fix: create it in this stack", e.urn)
            blocked = True
            continue
        variants = configs[0].get("productionVariants")
        for v in variants if isinstance(variants, list) else []:
            vname = at(v, "variantName")
            itype = at(v, "instanceType")
            target = targets.get((e.urn, vname))
            managed_max = at(v, "managedInstanceScaling.maxInstanceCount")
            if target is not None:
                count, source = target.get("maxCapacity"), f"{target.label} maxCapacity"
            elif managed_max is not MISSING:
                # hosting: components: SageMaker may run up to this many instances for the copies.
                count, source = managed_max, f"{configs[0].label} managedInstanceScaling.maxInstanceCount"
            else:
                count, source = at(v, "initialInstanceCount"), f"{configs[0].label} initialInstanceCount"
                if count is UNKNOWN and (ceiling := _kept_count_ceiling(stack, e)) is not None:
                    # The count is read from the running variant at `up` (capacity kept across an
                    # update) and clamped to this ceiling: the bound is known at preview.
                    count, source = ceiling, f"{configs[0].label} initialInstanceCount (at most the capacity read's ceiling)"
            n = as_number(count)
            if count is UNKNOWN or itype is UNKNOWN:
                yield (f"{PREVIEW}: {e.label} variant {fmt(vname)}: instance type or {source} is unknown, so the daily "
                       "cost cannot be bounded", e.urn)
                blocked = True
                continue
            price = as_number(prices.get(itype)) if isinstance(itype, str) else None
            if price is None:
                yield (f"{e.label} variant {fmt(vname)} uses {fmt(itype)}, which has no hourly price in policy config "
                       f"hourly-prices-usd (known: {', '.join(sorted(prices))}); fix: add its USD/hour price", e.urn)
                blocked = True
                continue
            cost = (n or 0) * price * 24
            total += cost
            lines.append(f"{e.label}/{vname}: {fmt(n)} x {itype} x ${price:g}/h x 24 = ${cost:,.0f}")
            prev = deployed.get(e.urn)
            deployed[e.urn] = (e, itype if isinstance(itype, str) else None, (prev[2] if prev else 0.0) + (n or 0))
    if budget is not None and not blocked and total > budget + USD_TOL:
        yield (
            f"the stack can reach ${total:,.0f}/day at maximum scale ({'; '.join(lines)}), above the daily budget "
            f"${budget:,.0f} (policy config daily-budget-usd); fix: cap the fleet (max_instances in stack config, "
            "then bench plan --stack), or raise daily-budget-usd",
            None,
        )
    if not blocked:
        yield from _stack_budget(deployed, cache)


def _kept_count_ceiling(stack: Stack, endpoint: Res) -> float | None:
    """The ceiling of the capacity read (``<model>-capacity`` Invocation, action ``desired_count``)
    that sets this endpoint's initial instance count, or None when there is none."""
    name = endpoint.get("name")
    for r in stack.of("aws:lambda/invocation:Invocation"):
        raw = r.get("input")
        if not isinstance(raw, str) or has_unknown(raw):
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("action") == "desired_count" and doc.get("endpoint_name") == name:
            return as_number(doc.get("ceiling"))
    return None


def _stack_budget(deployed: Mapping[str, tuple[Res, str | None, float]], cache: ProvenanceCache) -> StackViolations:
    """The stack budget part of daily-cost-ceiling (see :func:`rule_daily_cost`)."""
    from speech.errors import SpeechError
    from speech.plan.budget import BATCH_FLOOR_INSTANCES, ModelNeed, allocate, check_deployed
    from speech.schema.plan_artifacts import PlanArtifact

    provs: dict[str, Provenance | None] = {}
    for urn, (e, _, _) in deployed.items():
        try:
            provs[urn] = cache.get(e)
        except NoProvenance:
            provs[urn] = None  # reported by the provenance rules; here it is a fixed-size endpoint
    budgets = {p.document.stack_budget.model_dump_json(): p.document.stack_budget
               for p in provs.values() if p is not None and p.document.stack_budget is not None}
    if not budgets:
        return
    if len(budgets) > 1:
        yield (f"the provenance documents record {len(budgets)} different stack budgets "
               f"({'; '.join(sorted(budgets))}): one stack has one daily budget; regenerate them from stack config "
               "(pulumi preview)", None)
        return
    stack_budget = next(iter(budgets.values()))
    needs, max_of, docs = [], {}, {}
    for urn, (e, itype, n) in deployed.items():
        p = provs[urn]
        if p is not None and p.document.budget is not None and p.planned is not None:
            name = p.model
            planned = p.planned
            # A real-time plan's fleet, or a batch plan's peak above its floor (speech.plan.budget's needs).
            floor = planned.fleet.min_instances if isinstance(planned, PlanArtifact) else BATCH_FLOOR_INSTANCES
            peak = planned.fleet.max_instances if isinstance(planned, PlanArtifact) else planned.peak_instances
            needs.append(ModelNeed(name=name, priority=p.document.budget.priority, instance_type=p.document.instance_type,
                                   floor_instances=floor, peak_instances=max(floor, peak)))
            docs[name] = p
        else:
            # Unmeasured (or unbudgeted) endpoints deploy a fixed count: that is both their floor and peak.
            try:
                tagged = tags_of(e).get(pv.TAG_MODEL) if p is None else p.model
            except NoProvenance:
                tagged = None
            name = str(tagged or e.name)
            needs.append(ModelNeed(name=name, priority="standard", instance_type=itype or "", floor_instances=int(n),
                                   peak_instances=int(n)))
        max_of[name] = int(n)
    try:
        allocation = allocate(needs, stack_budget)
    except SpeechError as err:
        yield (f"the stack budget cannot be allocated: {err}", None)
        return
    short = allocation.verdict == "stop"
    if short:
        yield (f"{allocation.findings[0].message} (speech.plan.budget.allocate over the provenance documents)", None)
    for name, p in docs.items():
        assert p.document.budget is not None  # docs holds only the documents that record a budget (above)
        if p.document.budget != allocation.of(name):
            yield (f"provenance document {p.document_object.label} records a budget allocation for {name!r} of "
                   f"{p.document.budget.max_instances} instances, but the allocation recomputed over every model is "
                   f"{allocation.of(name).max_instances}; {FIX_HAND_EDIT}", None)
    for f in check_deployed(allocation, max_of):
        if short and f.name == "budget_critical_capped":
            continue  # the shortfall above is why
        yield (f.message, None)
