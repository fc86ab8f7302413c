"""Real-time (instance) scaling rules: the deployed scaling equals the recomputed plan, the plan
is feasible, and each variant has exactly one scaling path."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from policy.recompute import NoProvenance, ProvenanceCache
from policy.resources import (
    T_SCALING_POLICY,
    UNKNOWN,
    Res,
    Stack,
    as_number,
    fmt,
    has_unknown,
    parse_resource_id,
    step_direction,
)
from policy.rules.batch import is_async_endpoint, is_batch_route
from policy.rules.common import (
    FIX_HAND_EDIT,
    PREVIEW,
    Scaled,
    StackViolations,
    config_and_variant,
    policies_of,
    scale_in_alarms,
    scale_out_policies,
    scaled_provenance,
    scaled_variants,
    step_policies,
    surge_alarms,
    variant_model,
)
from policy.rules.compare import plan_differences
from speech.deploy import scaling

# --- scaling-matches-plan ----------------------------------------------------------------------

T_SCHEDULED = "aws:appautoscaling/scheduledAction:ScheduledAction"


def _scheduled_actions(stack: Stack, s: Scaled) -> list[Res]:
    """Scheduled actions on the variant's target (by resource id, or by dependency while unknown)."""
    rid = s.resource_id if isinstance(s.resource_id, str) else ""
    return [a for a in stack.of(T_SCHEDULED)
            if a.get("resourceId") == rid or (not isinstance(a.get("resourceId"), str) and a.depends_on(s.target, "resourceId"))]


def scheduled_differences(stack: Stack, s: Scaled, spec: Any, src: str) -> Iterator[tuple[str, Any]]:
    """Each planned daily floor as one scheduled action of its name with the plan's values; no
    other scheduled action on the target (a hand-made one would move the floor the plan sized)."""
    planned = {a.name: a for a in spec.scheduled}
    seen: set[str] = set()
    for res in _scheduled_actions(stack, s):
        name = res.get("name")
        if name is UNKNOWN:
            yield (f"{PREVIEW}: {res.label} name is unknown; name scheduled floors from stack config", res.urn)
            continue
        want = planned.get(name) if isinstance(name, str) else None
        if want is None:
            yield (f"{res.label} ({fmt(name)}) is a scheduled action on {s.target.label} that no plan derived: it would "
                   f"move the fleet's floor ({', '.join(sorted(planned)) or 'the plan has no scheduled floors'}); remove "
                   "it, or derive the floors with bench plan --stack --schedule-from TRACE", res.urn)
            continue
        seen.add(name)
        for msg in plan_differences("scheduled", res, _OneScheduled(spec, want), src):
            yield msg, res.urn
    for name in sorted(set(planned) - seen):
        a = planned[name]
        yield (f"{s.target.label}: the plan's scheduled floor {name!r} ({a.schedule} {a.timezone}: at least "
               f"{a.min_capacity} instances) is not deployed, so the ramp it was derived for finds too few instances; "
               f"{FIX_HAND_EDIT}", s.target.urn)


class _OneScheduled:
    """A view of the spec whose ``scheduled`` part is one scheduled action (plan_differences reads
    ``getattr(spec, part)`` and ``spec.rule_of``)."""

    def __init__(self, spec: Any, one: Any) -> None:
        self.spec, self.scheduled = spec, one

    def rule_of(self, part: str, name: str) -> str:
        return self.spec.rule_of(part, name)




FLOOR_CLOCK_SLACK = timedelta(minutes=10)
"""The program registers a scheduled target with the floor in force when it ran; the pack judges a
little later, so a floor in force up to this long before the pack's clock is also the program's."""


def _with_floor_in_force(spec: Any, target: Res) -> Any:
    """``spec`` with the target's MinCapacity the program registers under daily floors: the floor
    in force now (:func:`speech.deploy.scaling.floor_in_force`), or a little earlier when that is
    the target's (a scheduled action ran between the program and the pack)."""
    if not spec.scheduled:
        return spec
    now = datetime.now(UTC)
    floors = [scaling.floor_in_force(spec.scheduled, spec.target.min_capacity, when)[0]
              for when in (now, now - FLOOR_CLOCK_SLACK)]
    floor = floors[1] if target.get("minCapacity") == floors[1] else floors[0]
    return dataclasses.replace(spec, target=dataclasses.replace(spec.target, min_capacity=floor))


def rule_matches_plan(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    for s in scaled_variants(stack):
        t = s.target
        try:
            prov = scaled_provenance(s, cache)
        except NoProvenance as err:
            yield (f"{t.label}: cannot compare scaling with a plan: {err.message}", t.urn)
            continue
        assert s.endpoint is not None  # scaled_provenance raises NoProvenance for a target without one
        if prov.plan is None or is_async_endpoint(stack, s.endpoint):
            continue  # a batch route: batch-scaling-matches-plan compares it with its batch plan
        plan, src = prov.plan, f"provenance document {prov.document_object.label}"
        if s.endpoint_name is None:
            # The resource id is unknown during preview: its endpoint was found through dependencies.
            name = s.endpoint.get("name")
            endpoint_name = name if isinstance(name, str) else s.endpoint.name
        else:
            endpoint_name = s.endpoint_name
        spec = _with_floor_in_force(scaling.scaling_spec(plan, endpoint_name, s.variant or scaling.VARIANT), t)
        found: list[tuple[str, Res]] = [("target", t)]
        found += [("scale_out", p) for p in scale_out_policies(stack, s)]
        found += [("scale_in", p) for p in step_policies(stack, s, "in")]
        found += [("scale_in_alarm", a) for a in scale_in_alarms(stack, s)]
        found += [("surge", p) for p in step_policies(stack, s, "out")]
        found += [("surge_alarm", a) for a in surge_alarms(stack, s)]
        for part, res in found:
            for msg in plan_differences(part, res, spec, src):
                yield msg, res.urn
        yield from scheduled_differences(stack, s, spec, src)
        if s.endpoint is not None:
            config, variant, problem = config_and_variant(stack, s.endpoint, s.variant)
            model, problem2 = (None, None) if config is None or variant is None else variant_model(stack, config, variant)
            if problem or problem2:
                yield (f"cannot check the container queue depth of {s.endpoint.label}: {problem or problem2}", t.urn)
            elif model is not None:
                for msg in plan_differences("queue", model, spec, src):
                    yield msg, model.urn


# --- scaling-plan-feasible ---------------------------------------------------------------------


def rule_plan_feasible(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    for s in scaled_variants(stack):
        t = s.target
        try:
            prov = scaled_provenance(s, cache)
        except NoProvenance as err:
            yield (f"{t.label}: cannot show that its plan is feasible: {err.message}", t.urn)
            continue
        assert s.endpoint is not None  # scaled_provenance raises NoProvenance for a target without one
        plan = prov.plan
        if prov.verdict == "stop":
            stops = "; ".join(f"{f.name}: {f.message}" for f in prov.findings if f.level == "stop")
            yield (
                f"{t.label} scales {s.endpoint.label}, but the plan recomputed from provenance document "
                f"{prov.document_object.label} has verdict 'stop' ({stops}); a stop plan must not get scaling; "
                "fix: address the stop findings and re-plan, or remove the scaling resources",
                t.urn,
            )
        if plan is None:
            continue  # a batch plan: its cooldowns are compared by batch-scaling-matches-plan
        planning = plan.t_total.planning_s
        for p in step_policies(stack, s, "in"):
            cd = p.get("stepScalingPolicyConfiguration.cooldown")
            n = as_number(cd)
            if cd is UNKNOWN:
                yield (f"{PREVIEW}: {p.label} stepScalingPolicyConfiguration.cooldown is unknown; it must cover the "
                       f"planning T_total {planning:g} s", p.urn)
            elif n is None or n < planning:
                yield (
                    f"{p.label} scale-in cooldown is {fmt(cd)} s, below the planning T_total {planning:g} s "
                    f"(measured {plan.t_total.measured_s:g} s + reaction {plan.t_total.reaction_bound_s:g} s): it would give back "
                    f"capacity faster than it can be regained; fix: use the plan's {plan.cooldowns.scale_in_s} s",
                    p.urn,
                )


# --- one-scaling-path-per-variant --------------------------------------------------------------


def rule_one_path(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    scaled = scaled_variants(stack)
    seen: dict[str, Res] = {}
    fix = (
        "fix: keep exactly the policies the program creates "
        "(one target tracking scale-out, one alarm-driven step scale-in, optionally one surge step)"
    )
    for s in scaled:
        t = s.target
        if isinstance(s.resource_id, str):
            if s.resource_id in seen:
                yield (f"{t.label} and {seen[s.resource_id].label} both register {s.resource_id!r}: competing scalable "
                       "targets; fix: keep one", t.urn)
                continue
            seen[s.resource_id] = t
        if is_batch_route(stack, s, cache):
            continue  # a batch route's two paths (backlog, wake): batch-scaling-matches-plan
        policies = policies_of(stack, s)
        outs = [p for p in policies if p.get("policyType") == "TargetTrackingScaling"]
        ins = step_policies(stack, s, "in")
        surges = step_policies(stack, s, "out")
        where = f"{t.label} ({fmt(s.resource_id)})"
        if len(outs) != 1:
            names = ", ".join(p.label for p in outs) or "none"
            yield (f"{where} has {len(outs)} target-tracking scale-out policies ({names}), expected exactly 1; {fix}", t.urn)
        for p in outs:
            dsi = p.get("targetTrackingScalingPolicyConfiguration.disableScaleIn")
            if dsi is UNKNOWN:
                yield (f"{PREVIEW}: {p.label} disableScaleIn is unknown, expected true", p.urn)
            elif dsi is not True:
                yield (f"{p.label} disableScaleIn is {fmt(dsi)}, expected true: target tracking would scale in too and "
                       f"compete with the alarm-driven scale-in at C_scale_min; {fix}", p.urn)
        if len(ins) != 1:
            names = ", ".join(p.label for p in ins) or "none"
            yield (f"{where} has {len(ins)} step scale-in policies ({names}), expected exactly 1; {fix}", t.urn)
        if len(surges) > 1:
            yield (f"{where} has {len(surges)} surge step policies ({', '.join(p.label for p in surges)}), expected at "
                   f"most 1; {fix}", t.urn)
        for p in policies:
            ptype = p.get("policyType")
            if ptype == "StepScaling" and step_direction(p) not in ("in", "out"):
                d = step_direction(p)
                pre = f"{PREVIEW}: " if d == "unknown" and has_unknown(p.get("stepScalingPolicyConfiguration")) else ""
                yield (f"{pre}{p.label} step adjustments are {d} (expected all negative for scale-in or all positive "
                       f"for surge); {fix}", p.urn)
            elif ptype not in ("StepScaling", "TargetTrackingScaling"):
                yield (f"{p.label} policyType is {fmt(ptype)}, expected TargetTrackingScaling or StepScaling; {fix}", p.urn)
        if s.endpoint_name is not None and ins:
            alarms = scale_in_alarms(stack, s)
            if len(alarms) != 1:
                yield (f"{where} has {len(alarms)} scale-in alarms ({scaling.METRIC} <= threshold on "
                       f"{s.endpoint_name}/{s.variant}: {', '.join(a.label for a in alarms) or 'none'}), expected exactly "
                       f"1 to fire {ins[0].label}; {fix}", t.urn)
    # Policies on a SageMaker variant without a scalable target in this stack: orphans.
    for p in stack.of(T_SCALING_POLICY):
        rid = p.get("resourceId")
        if p.get("serviceNamespace") not in (scaling.SERVICE_NAMESPACE, UNKNOWN) and parse_resource_id(rid) is None:
            continue
        if scaling.parse_component_resource_id(rid) or p.get("scalableDimension") == scaling.COMPONENT_SCALABLE_DIMENSION:
            continue  # copy scaling: copy-scaling-matches-plan owns it
        if rid is UNKNOWN:
            if not any(p.depends_on(s.target) for s in scaled):
                yield (f"{PREVIEW}: {p.label} resourceId is unknown and it depends on no scalable target; {fix}", p.urn)
        elif rid not in seen and not any(s.target.urn in p.dependencies for s in scaled):
            yield (f"{p.label} scales {fmt(rid)}, which has no scalable target in this stack: an orphan policy "
                   f"nothing reviews; {fix}", p.urn)
