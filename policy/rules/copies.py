"""Inference-component (hosting: components) rules: copy scaling equals the copy plan, compute
reserves the measured footprint, no competing variant scaling, copy provenance."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from policy.recompute import REQUIRED_TAGS, NoProvenance, ProvenanceCache, copy_plan_of
from policy.resources import (
    MISSING,
    T_ALARM,
    T_ENDPOINT,
    T_INFERENCE_COMPONENT,
    T_MODEL,
    T_TARGET,
    UNKNOWN,
    Res,
    Stack,
    as_number,
    at,
    fmt,
    native_tags,
    step_direction,
)
from policy.rules.common import FIX_HAND_EDIT, PREVIEW, StackViolations, config_and_variant, scaled_variants, target_tags_problem
from policy.rules.compare import plan_differences
from speech.deploy import provenance as pv
from speech.deploy import scaling

# --- inference components (hosting: components) -------------------------------------------------

FIX_COMPONENT = ("fix: let the program create the component and its copy scaling from the copy plan (bench qmax "
                 "against one copy, bench ttotal, bench tcopy, bench plan --stack with hosting: components)")


class Component:
    """An inference component and the endpoint that hosts it (when resolvable)."""

    def __init__(self, ic: Res, name: Any, endpoint: Res | None, problem: str | None) -> None:
        self.ic, self.name, self.endpoint, self.problem = ic, name, endpoint, problem

    @property
    def endpoint_name(self) -> str:
        name = self.endpoint.get("name") if self.endpoint is not None else MISSING
        return name if isinstance(name, str) else (self.name if isinstance(self.name, str) else self.ic.name)


def components(stack: Stack) -> list[Component]:
    out = []
    for ic in stack.of(T_INFERENCE_COMPONENT):
        eps, unknown = stack.refers(ic, "endpointName", stack.of(T_ENDPOINT))
        problem = None
        if len(eps) != 1:
            problem = (f"{PREVIEW}: {ic.label} endpointName is unknown and no dependency names its endpoint" if unknown
                       else f"{ic.label} endpointName {fmt(ic.get('endpointName'))} matches "
                       f"{'no endpoint' if not eps else f'{len(eps)} endpoints'} in this stack; {FIX_COMPONENT}")
        out.append(Component(ic, ic.get("inferenceComponentName"), eps[0] if len(eps) == 1 else None, problem))
    return out


def components_on(stack: Stack, endpoint: Res) -> list[Component]:
    return [c for c in components(stack) if c.endpoint is not None and c.endpoint.urn == endpoint.urn]


def component_model(stack: Stack, endpoint: Res) -> tuple[Res | None, str | None]:
    """The SageMaker model an inference-component endpoint serves: its component's ``specification.modelName``."""
    comps = components_on(stack, endpoint)
    if len(comps) != 1:
        return None, (f"{endpoint.label} hosts {len(comps)} inference components in this stack, expected exactly 1 "
                      f"(one model per endpoint); {FIX_COMPONENT}")
    found, unknown = stack.refers(comps[0].ic, "specification.modelName", stack.of(T_MODEL))
    if found:
        return found[0], None
    if unknown:
        return None, f"{PREVIEW}: {comps[0].ic.label} specification.modelName is unknown and no dependency names the model"
    return None, (f"{comps[0].ic.label} specification.modelName {fmt(comps[0].ic.get('specification.modelName'))} "
                  "matches no SageMaker model in this stack; fix: create the model in the same stack")


def component_targets(stack: Stack) -> list[Res]:
    return [t for t in stack.of(T_TARGET)
            if t.get("scalableDimension") == scaling.COMPONENT_SCALABLE_DIMENSION
            or scaling.parse_component_resource_id(t.get("resourceId")) is not None]


def _component_of_target(stack: Stack, target: Res) -> Component | None:
    cname = scaling.parse_component_resource_id(target.get("resourceId"))
    for c in components(stack):
        if (cname is not None and c.name == cname) or (cname is None and target.depends_on(c.ic, "resourceId")):
            return c
    return None


def _copy_plan(c: Component, cache: ProvenanceCache) -> tuple[Any, Any]:
    """(provenance, recomputed copy plan) of a component, or :class:`NoProvenance`."""
    if c.endpoint is None:
        raise NoProvenance(c.problem or f"{c.ic.label}: no endpoint")
    prov = cache.get(c.endpoint)
    return prov, copy_plan_of(prov)


def _variant_view(config: Res, variant: Mapping[str, Any]) -> Res:
    """The endpoint configuration's variant as a resource of its own (its properties at the top)."""
    return dataclasses.replace(config, props=dict(variant))


def _copy_alarms(stack: Stack, component_name: str, metrics: tuple[str, ...]) -> list[Res]:
    out = []
    for a in stack.of(T_ALARM):
        dims, metric = a.get("dimensions"), a.get("metricName")
        queries = a.get("metricQueries")
        if isinstance(queries, (list, tuple)):
            # The zero-floor scale-in alarm is metric math: its metric and dimensions are in its queries.
            view = scaling.read_guarded(queries)
            dims, metric = dict(view["dimensions"] or ()), view["metric_name"]
        if isinstance(dims, Mapping) and at(dims, "InferenceComponentName") == component_name \
                and metric in (*metrics, UNKNOWN):
            out.append(a)
    return out


# --- copy-scaling-matches-plan ------------------------------------------------------------------


def rule_copy_scaling_matches_plan(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """Copy scaling equals the copy plan recomputed from the provenance document: the scalable target
    (copies min/max), target tracking on ConcurrentRequestsPerCopy (target, cooldowns), the scale-in
    step and its alarm, the scale-from-zero step and alarm exactly when the copy floor is 0, managed
    instance scaling's range, and each copy's queue depth; exactly one of each path."""
    kinds = scaling.COMPONENT_PART_KIND
    for t in component_targets(stack):
        c = _component_of_target(stack, t)
        if c is None:
            yield (f"{t.label} scales {fmt(t.get('resourceId'))}, which is no inference component in this stack, so no "
                   f"copy plan says how it scales; {FIX_COMPONENT}", t.urn)
            continue
        try:
            prov, plan = _copy_plan(c, cache)
        except NoProvenance as err:
            yield (f"{t.label}: cannot compare copy scaling with a copy plan: {err.message}", t.urn)
            continue
        assert c.endpoint is not None  # _copy_plan raises NoProvenance for a component without one
        name = c.name if isinstance(c.name, str) else c.endpoint_name
        spec = scaling.component_scaling_spec(plan, c.endpoint_name, name)
        src = f"copy plan recomputed from provenance document {prov.document_object.label}"
        rid = t.get("resourceId") if isinstance(t.get("resourceId"), str) else ""
        policies = stack.policies_on(rid, t)
        outs = [p for p in policies if p.get("policyType") == "TargetTrackingScaling"]
        ins = [p for p in policies if p.get("policyType") == "StepScaling" and step_direction(p) == "in"]
        wakes = [p for p in policies if p.get("policyType") == "StepScaling" and step_direction(p) == "out"]
        low = [a for a in _copy_alarms(stack, name, (scaling.COMPONENT_METRIC,))
               if a.get("comparisonOperator") in ("LessThanOrEqualToThreshold", "LessThanThreshold", UNKNOWN)]
        wake_alarms = _copy_alarms(stack, name, (scaling.NO_CAPACITY_METRIC,))
        where = f"{t.label} ({fmt(t.get('resourceId'))})"
        want_wake = 1 if spec.wake is not None else 0
        for what, got, want, why in (
            ("target-tracking scale-out policies", outs, 1, "one scale-out path on ConcurrentRequestsPerCopy"),
            ("step scale-in policies", ins, 1, "one alarm-driven scale-in path"),
            (f"{scaling.COMPONENT_METRIC} scale-in alarms", low, 1, "one alarm fires the scale-in step"),
            ("scale-from-zero step policies", wakes, want_wake,
             f"copy floor {plan.copies.min_copies}: " + ("scaling to zero needs the step that leaves zero" if want_wake
                                                         else "no scale-from-zero without a floor of 0")),
            (f"{scaling.NO_CAPACITY_METRIC} alarms", wake_alarms, want_wake, "one alarm fires the scale-from-zero step"),
        ):
            if len(got) != want:
                yield (f"{where} has {len(got)} {what} ({', '.join(r.label for r in got) or 'none'}), expected {want} "
                       f"({why}, from {src}); {FIX_HAND_EDIT}", t.urn)
        found: list[tuple[str, Res]] = [("target", t)]
        found += [("scale_out", p) for p in outs] + [("scale_in", p) for p in ins] + [("scale_in_alarm", a) for a in low]
        if spec.wake is not None:
            found += [("wake", p) for p in wakes] + [("wake_alarm", a) for a in wake_alarms]
        for part, res in found:
            for msg in plan_differences(part, res, spec, src, kinds[part]):
                yield msg, res.urn
        for p in outs:
            if p.get("targetTrackingScalingPolicyConfiguration.disableScaleIn") is not True:
                yield (f"{p.label} disableScaleIn is {fmt(p.get('targetTrackingScalingPolicyConfiguration.disableScaleIn'))}"
                       ", expected true: copies scale in by the alarm-driven step at the per-copy C_scale_min; "
                       f"{FIX_HAND_EDIT}", p.urn)
        config, variant, problem = config_and_variant(stack, c.endpoint, spec.variant)
        if problem:
            yield f"cannot check managed instance scaling of {c.endpoint.label}: {problem}", t.urn
        else:
            assert config is not None and variant is not None  # config_and_variant gives both when it finds no problem
            for msg in plan_differences("instances", _variant_view(config, variant), spec, src, kinds["instances"]):
                yield msg, config.urn
        model, problem = component_model(stack, c.endpoint)
        if problem:
            yield f"cannot check the copies' queue depth: {problem}", t.urn
        else:
            assert model is not None  # component_model gives the model when it finds no problem
            for msg in plan_differences("queue", model, spec, src, kinds["queue"]):
                yield msg, model.urn


# --- component-compute-matches-footprint --------------------------------------------------------


def rule_component_compute(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """Each copy reserves what the copy plan says: the measured footprint with the stated margin, and
    that margin within the configured bounds."""
    low = as_number(cfg.get("footprint-margin-min", 0.05))
    high = as_number(cfg.get("footprint-margin-max", 0.5))
    for c in components(stack):
        try:
            prov, plan = _copy_plan(c, cache)
        except NoProvenance as err:
            yield (f"{c.ic.label}: cannot compare its compute requirements with the measured footprint: {err.message}",
                   c.ic.urn)
            continue
        margin = plan.inputs.footprint_margin
        if (low is not None and margin < low - 1e-12) or (high is not None and margin > high + 1e-12):
            yield (f"{c.ic.label} reserves the measured footprint with a margin of {margin:g} (provenance document "
                   f"{prov.document_object.label}), outside the allowed {low:g}..{high:g} (policy config "
                   "footprint-margin-min/-max): too little lets a copy outgrow its reservation, too much strands memory; "
                   "fix: set components.footprint_margin in stack config within the bounds", c.ic.urn)
        spec = scaling.component_scaling_spec(plan, c.endpoint_name, c.name if isinstance(c.name, str) else None)
        fp = plan.packing
        src = (f"measured footprint in provenance document {prov.document_object.label} x (1 + {margin:g}) "
               f"= {fp.reserved_host_memory_mib} MiB host memory"
               + (f", {fp.reserved_accelerator_memory_mib:.0f} MiB accelerator memory" if fp.reserved_accelerator_memory_mib
                  else ""))
        for msg in plan_differences("compute", c.ic, spec, src, "compute"):
            yield msg, c.ic.urn


# --- no-variant-scaling-with-components ---------------------------------------------------------


def rule_no_competing_variant_scaling(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """An endpoint that hosts inference components scales instances one way only: managed instance
    scaling following the copies. A variant scalable target (sagemaker:variant:DesiredInstanceCount)
    would compete with it, and a model on the variant would serve beside the components."""
    variant_targets = scaled_variants(stack)
    for e in stack.of(T_ENDPOINT):
        comps = components_on(stack, e)
        if not comps:
            continue
        names = ", ".join(c.ic.label for c in comps)
        for s in variant_targets:
            if s.endpoint is not None and s.endpoint.urn == e.urn:
                yield (f"{s.target.label} scales {e.label}'s variant by instances ({fmt(s.resource_id)}), but the "
                       f"endpoint hosts {names}, whose instances follow the copies (managed instance scaling): two "
                       f"scaling paths for one set of instances; fix: remove the variant target and its policies, "
                       "scale the copies (copy-scaling-matches-plan)", s.target.urn)
        configs, _ = stack.endpoint_config_of(e)
        for config in configs[:1]:
            variants = config.get("productionVariants")
            for v in variants if isinstance(variants, list) else []:
                if at(v, "modelName") is not MISSING:
                    yield (f"{config.label} variant {fmt(at(v, 'variantName'))} names model {fmt(at(v, 'modelName'))}, "
                           f"but {e.label} hosts {names}: a model on the variant would serve beside them and its "
                           "instances would not follow the copies; fix: leave modelName unset (hosting: components)",
                           config.urn)
                status = at(v, "managedInstanceScaling.status")
                if status is UNKNOWN:
                    yield (f"{PREVIEW}: {config.label} managedInstanceScaling.status is unknown", config.urn)
                elif status != scaling.INSTANCE_SCALING_ENABLED and any(
                        (owner := _component_of_target(stack, t)) is not None and owner.ic.urn in {c.ic.urn for c in comps}
                        for t in component_targets(stack)):
                    yield (f"{config.label} variant {fmt(at(v, 'variantName'))} managedInstanceScaling.status is "
                           f"{fmt(status)}, expected {scaling.INSTANCE_SCALING_ENABLED!r}: the copies of {names} scale, "
                           "but no instance would be added for them; fix: let the program set managed instance scaling "
                           "from the copy plan", config.urn)


# --- copy-scaling-requires-measured-provenance --------------------------------------------------


def rule_component_provenance(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """Copy scaling comes from an endpoint's provenance document of allowed origins: Q_max per copy and
    T_total under the same config as instance scaling, the copy artifact (footprint, T_copy) under
    allow-unmeasured-copy-artifacts; the measurements name this endpoint; the target carries the
    endpoint's provenance tags."""
    allow = {"reference": bool(cfg.get("allow-reference-artifacts", True)),
             "assumption": bool(cfg.get("allow-assumption-artifacts", False)), "measured": True}
    allow_copy = bool(cfg.get("allow-unmeasured-copy-artifacts", True))
    for t in component_targets(stack):
        c = _component_of_target(stack, t)
        if c is None:
            continue  # copy-scaling-matches-plan reports a target on no component
        try:
            prov, _ = _copy_plan(c, cache)
        except NoProvenance as err:
            yield (f"{t.label} scales {c.ic.label}, but {err.message}", t.urn)
            continue
        assert c.endpoint is not None  # _copy_plan raises NoProvenance for a component without one
        m = prov.document.measurements
        for kind, art in (("qmax", m.qmax), ("ttotal", m.ttotal)):
            origin = art.provenance.origin
            if not allow.get(origin, False):
                key = "allow-reference-artifacts" if origin == "reference" else "allow-assumption-artifacts"
                yield (f"{t.label} scales copies from a {kind} artifact of origin {origin!r} (provenance document "
                       f"{prov.document_object.label}); policy config {key} is false; fix: run bench {kind} against "
                       "this endpoint and re-plan (bench plan --stack)", t.urn)
        origin = m.tcopy.provenance.origin if m.tcopy is not None else "missing"
        if origin != "measured" and not allow_copy:
            yield (f"{t.label} sizes and scales copies from a copy artifact of origin {origin!r} (footprint, T_copy not "
                   "measured on this endpoint's copies); policy config allow-unmeasured-copy-artifacts is false; fix: "
                   "run bench tcopy against one copy and re-plan (bench plan --stack)", t.urn)
        bound = pv.target_binding_problem(prov.model, m, c.endpoint_name, prov.document.measured_on)
        if bound:
            yield f"{t.label} scales {c.ic.label}, but {bound}", t.urn
        problem, readable = target_tags_problem(t, c.endpoint, prov.tags)
        if problem:
            yield problem, t.urn
        if not readable:
            continue
        ic_tags = native_tags(c.ic.get("tags"))
        if isinstance(ic_tags, Mapping) and any(at(ic_tags, k) != prov.tags[k] for k in REQUIRED_TAGS):
            yield (f"{c.ic.label} does not carry {c.endpoint.label}'s provenance tags; fix: tag both from the same plan",
                   c.ic.urn)
