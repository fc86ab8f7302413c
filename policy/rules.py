"""The validators: small functions over plain resource data, one per rule.

Stack rules take (stack, config, provenance cache) and yield (message, urn); resource rules take
(resource, config) and yield messages. :mod:`policy.policies` wraps them for pulumi_policy.
Every message names the resource, the value, the expected value or limit, and the fix.

Unknown values: everything the scaling rules compare is computed by the program from stack
config, so it is known during preview; an unknown there means it was wired to another
resource's output and cannot be verified before it exists. Those rules report "cannot verify
during preview" at their own level (mandatory by default): fail closed. Values that are
legitimately unknown in a first preview (ARNs inside IAM policy JSON) raise pulumi_policy's
UnknownValueError instead, which the engine shows as an advisory "can't run policy during
preview"; ``pulumi up`` then checks them with real values before the resource is created.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from collections.abc import Iterator, Mapping

from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from speech.deploy import provenance as pv
from speech.deploy import receipts as rc
from speech.schema import receipts as receipt_doc
from speech.deploy import scaling
from speech.deploy.iam_check import ALLOWED_ON_STAR, wildcard_findings

from policy.recompute import FIX_PROVENANCE, REQUIRED_TAGS, NoProvenance, ProvenanceCache, copy_plan_of, provenance_tags_of, tags_of
from policy.resources import (
    MISSING, T_ALARM, T_BUCKET, T_BUCKET_ACL, T_BUCKET_ACL_V2, T_BUCKET_V2, T_ENDPOINT, T_INFERENCE_COMPONENT, T_MODEL,
    T_PUBLIC_ACCESS_BLOCK, T_TARGET, T_SCALING_POLICY, T_SSE, T_SSE_V2, UNKNOWN, Res, Stack, as_number, at, fmt, has_unknown,
    native_tags, parse_resource_id, step_direction,
)

StackViolations = Iterator[tuple[str, str | None]]


class Deferred(str):
    """A check that needs a value the provider computes during ``pulumi up`` (the digest of an image
    built in the same update): not a violation at preview, reported as an advisory "can't run
    during preview", and verified at ``up`` when the value is known."""

FIX_HAND_EDIT = "fix: remove the hand edit and let the program set it from the plan (bench plan --stack, then pulumi preview)"
PREVIEW = "cannot verify during preview"


# --- scaled variants ---------------------------------------------------------------------------


class Scaled:
    """A scalable target on a SageMaker variant and the endpoint it scales (when resolvable)."""

    def __init__(self, target: Res, resource_id: Any, endpoint_name: str | None, variant: str | None,
                 endpoint: Res | None, problem: str | None) -> None:
        self.target, self.resource_id = target, resource_id
        self.endpoint_name, self.variant = endpoint_name, variant
        self.endpoint, self.problem = endpoint, problem


def scaled_variants(stack: Stack) -> list[Scaled]:
    out = []
    for t in stack.sagemaker_targets():
        rid = t.get("resourceId")
        parsed = parse_resource_id(rid)
        if parsed is None:
            deps = [e for e in stack.of(T_ENDPOINT) if t.depends_on(e, "resourceId")]
            if rid is UNKNOWN and len(deps) == 1:
                out.append(Scaled(t, rid, None, None, deps[0], None))
                continue
            problem = (
                f"{PREVIEW}: {t.label} resourceId is unknown, so the endpoint it scales cannot be identified; "
                "build it as endpoint/<endpoint name>/variant/<variant> from stack config"
                if rid is UNKNOWN
                else f"{t.label} resourceId {fmt(rid)} is not endpoint/<endpoint name>/variant/<variant>; "
                "fix: scale a variant of an endpoint in this stack"
            )
            out.append(Scaled(t, rid, None, None, None, problem))
            continue
        name, variant = parsed
        eps = stack.endpoint_by_name(name)
        if len(eps) == 1:
            out.append(Scaled(t, rid, name, variant, eps[0], None))
        elif not eps:
            out.append(Scaled(t, rid, name, variant, None,
                              f"{t.label} scales endpoint {name!r} (resourceId {rid!r}), which is not in this stack, so no "
                              f"provenance says how its scaling was planned; {FIX_PROVENANCE}"))
        else:
            out.append(Scaled(t, rid, name, variant, None,
                              f"{t.label} scales endpoint {name!r}, but {len(eps)} endpoints have that name "
                              f"({', '.join(e.label for e in eps)}); give each endpoint a unique name"))
    return out


def _provenance(s: Scaled, cache: ProvenanceCache):
    if s.endpoint is None:
        raise NoProvenance(s.problem or f"{s.target.label}: no endpoint")
    return cache.get(s.endpoint)


# --- scaling-requires-measured-provenance ------------------------------------------------------


def rule_measured_provenance(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    allow_reference = bool(cfg.get("allow-reference-artifacts", True))
    allow_assumption = bool(cfg.get("allow-assumption-artifacts", False))
    for s in scaled_variants(stack):
        t = s.target
        try:
            prov = _provenance(s, cache)
        except NoProvenance as err:
            prefix = "" if s.endpoint is None else f"{t.label} scales {s.endpoint.label}, but "
            yield prefix + err.message, t.urn
            continue
        origin = prov.origin
        allowed = origin == "measured" or (origin == "reference" and allow_reference) or (
            origin == "assumption" and allow_assumption
        )
        if not allowed:
            key = "allow-reference-artifacts" if origin == "reference" else "allow-assumption-artifacts"
            yield (
                f"{t.label} scales {s.endpoint.label} from {origin!r} figures (provenance document "
                f"{prov.document_object.label}), not measurements of this endpoint; policy config {key} is false; "
                "fix: run bench qmax and bench ttotal against this endpoint and re-plan (bench plan --stack)",
                t.urn,
            )
        endpoint = s.endpoint_name or s.endpoint.get("name")
        bound = pv.target_binding_problem(prov.model, prov.document.measurements, endpoint, prov.document.measured_on) \
            if isinstance(endpoint, str) else None
        if bound:
            yield f"{t.label} scales {s.endpoint.label}, but {bound}", t.urn
        try:
            ttags = provenance_tags_of(t)
        except NoProvenance as err:
            yield f"{err.message} (its endpoint {s.endpoint.label} has them)", t.urn
            continue
        diff = [f"{k}={ttags[k]!r} (endpoint: {prov.tags[k]!r})" for k in ttags if ttags[k] != prov.tags[k]]
        if diff:
            yield (
                f"{t.label} carries provenance different from {s.endpoint.label}: {'; '.join(diff)}; "
                "fix: tag both from the same plan (speech.deploy.provenance.provenance_tags)",
                t.urn,
            )


# --- scaling-matches-plan ----------------------------------------------------------------------


def _scale_out_policies(stack: Stack, s: Scaled) -> list[Res]:
    return [p for p in _policies(stack, s) if p.get("policyType") == "TargetTrackingScaling"]


def _policies(stack: Stack, s: Scaled) -> list[Res]:
    rid = s.resource_id if isinstance(s.resource_id, str) else ""
    return stack.policies_on(rid, s.target)


def _step_policies(stack: Stack, s: Scaled, direction: str) -> list[Res]:
    return [p for p in _policies(stack, s) if p.get("policyType") == "StepScaling" and step_direction(p) == direction]


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


def _scale_in_alarms(stack: Stack, s: Scaled) -> list[Res]:
    if s.endpoint_name is None or s.variant is None:
        return []
    return [
        a for a in stack.alarms_on(s.endpoint_name, s.variant)
        if a.get("metricName") in (scaling.METRIC, UNKNOWN)
        and (a.get("comparisonOperator") in ("LessThanOrEqualToThreshold", "LessThanThreshold", UNKNOWN))
    ]


def _surge_alarms(stack: Stack, s: Scaled) -> list[Res]:
    # GreaterThanThreshold is picked up too, so a surge alarm edited to fire one request late is
    # reported here rather than slipping past as "not a surge alarm".
    if s.endpoint_name is None or s.variant is None:
        return []
    return [
        a for a in stack.alarms_on(s.endpoint_name, s.variant)
        if a.get("metricName") in (scaling.METRIC, UNKNOWN)
        and (a.get("comparisonOperator") in ("GreaterThanOrEqualToThreshold", "GreaterThanThreshold", UNKNOWN))
    ]


def _model_of(stack: Stack, endpoint: Res, variant_name: str | None) -> tuple[Res | None, dict | None, str | None]:
    """(endpoint configuration, variant, problem) then the model via :func:`_model`."""
    configs, unknown = stack.endpoint_config_of(endpoint)
    if not configs:
        if unknown:
            return None, None, (
                f"{PREVIEW}: {endpoint.label} endpointConfigName is unknown and no dependency names its endpoint configuration"
            )
        return None, None, (
            f"{endpoint.label} endpointConfigName {fmt(endpoint.get('endpointConfigName'))} matches no endpoint "
            "configuration in this stack; fix: create the endpoint configuration in the same stack"
        )
    config = configs[0]
    variant = stack.variant_of(config, variant_name or scaling.VARIANT)
    if variant is None:
        variants = config.get("productionVariants")
        if variant_name is None and isinstance(variants, list) and len(variants) == 1 and isinstance(variants[0], Mapping):
            variant = dict(variants[0])
        else:
            return config, None, (
                f"{config.label} has no production variant {variant_name or scaling.VARIANT!r} "
                f"(variants: {fmt(variants)}); fix: scale an existing variant"
            )
    return config, variant, None


def _model(stack: Stack, config: Res, variant: Mapping[str, Any]) -> tuple[Res | None, str | None]:
    models, unknown = stack.model_of_variant(config, variant)
    if models:
        return models[0], None
    if unknown:
        return None, f"{PREVIEW}: {config.label} variant modelName is unknown and no dependency names the model"
    return None, (
        f"{config.label} variant modelName {fmt(at(variant, 'modelName'))} matches no SageMaker model in this stack; "
        "fix: create the model in the same stack"
    )


# Where each field of the scaling spec lives in Pulumi resource properties: the pack reads the
# observed state from these paths and names them in its messages.
PULUMI_PATHS: dict[tuple[str, str], str] = {
    ("target", "resource_id"): "resourceId",
    ("target", "service_namespace"): "serviceNamespace",
    ("target", "scalable_dimension"): "scalableDimension",
    ("target", "min_capacity"): "minCapacity",
    ("target", "max_capacity"): "maxCapacity",
    ("scale_out", "policy_type"): "policyType",
    ("scale_out", "metric_type"): "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
    ("scale_out", "target_value"): "targetTrackingScalingPolicyConfiguration.targetValue",
    ("scale_out", "scale_out_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleOutCooldown",
    ("scale_out", "scale_in_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleInCooldown",
    ("scale_out", "disable_scale_in"): "targetTrackingScalingPolicyConfiguration.disableScaleIn",
    ("step", "policy_type"): "policyType",
    ("step", "adjustment_type"): "stepScalingPolicyConfiguration.adjustmentType",
    ("step", "steps"): "stepScalingPolicyConfiguration.stepAdjustments",
    ("step", "min_adjustment_magnitude"): "stepScalingPolicyConfiguration.minAdjustmentMagnitude",
    ("step", "cooldown_s"): "stepScalingPolicyConfiguration.cooldown",
    ("step", "aggregation"): "stepScalingPolicyConfiguration.metricAggregationType",
    ("alarm", "namespace"): "namespace",
    ("alarm", "metric_name"): "metricName",
    ("alarm", "dimensions"): "dimensions",
    ("alarm", "statistic"): "statistic",
    ("alarm", "period_s"): "period",
    ("alarm", "evaluation_periods"): "evaluationPeriods",
    ("alarm", "datapoints_to_alarm"): "datapointsToAlarm",
    ("alarm", "threshold"): "threshold",
    ("alarm", "comparison"): "comparisonOperator",
    ("alarm", "treat_missing_data"): "treatMissingData",
    ("queue", "max_depth"): "primaryContainer.environment.QUEUE_MAX_DEPTH",
    ("scheduled", "schedule"): "schedule",
    ("scheduled", "timezone"): "timezone",
    ("scheduled", "min_capacity"): "scalableTargetAction.minCapacity",
    ("scheduled", "max_capacity"): "scalableTargetAction.maxCapacity",
    # hosting: components: the variant's managed instance scaling, the component's compute.
    ("instances", "status"): "managedInstanceScaling.status",
    ("instances", "min_instance_count"): "managedInstanceScaling.minInstanceCount",
    ("instances", "max_instance_count"): "managedInstanceScaling.maxInstanceCount",
    ("compute", "min_memory_required_mb"): "specification.computeResourceRequirements.minMemoryRequiredInMb",
    ("compute", "accelerator_devices"): "specification.computeResourceRequirements.numberOfAcceleratorDevicesRequired",
    ("compute", "cpu_cores"): "specification.computeResourceRequirements.numberOfCpuCoresRequired",
    ("backlog", "policy_type"): "policyType",
    ("backlog", "metric_name"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.metricName",
    ("backlog", "namespace"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.namespace",
    ("backlog", "dimensions"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.dimensions",
    ("backlog", "statistic"): "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.statistic",
    ("backlog", "target_value"): "targetTrackingScalingPolicyConfiguration.targetValue",
    ("backlog", "scale_out_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleOutCooldown",
    ("backlog", "scale_in_cooldown_s"): "targetTrackingScalingPolicyConfiguration.scaleInCooldown",
    ("client", "max_concurrent_invocations_per_instance"):
        "asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance",
}
STEP_PATHS = {"scaling_adjustment": "scalingAdjustment", "lower_bound": "metricIntervalLowerBound",
              "upper_bound": "metricIntervalUpperBound"}
KIND = scaling.PART_KIND
PROVIDER_DEFAULTS = {("alarm", "treat_missing_data"): "missing"}
"""What AWS applies when the property is not set (datapointsToAlarm defaults to evaluationPeriods)."""
REPORTED_ELSEWHERE = {("scale_out", "disable_scale_in"), ("target", "resource_id"), ("target", "service_namespace"),
                      ("target", "scalable_dimension")}
"""Owned by other rules: the target's identity selects it (scaled_variants, which reports what it
cannot identify), and one-scaling-path-per-variant owns disableScaleIn; a second report of the
same edit would only repeat it."""


def _path(part: str, name: str, kind: str | None = None) -> str:
    kind = kind or KIND[part]
    if name.startswith("steps.") and name.count(".") == 2:
        _, i, sub = name.split(".")
        return f"{PULUMI_PATHS[(kind, 'steps')]}.{i}.{STEP_PATHS[sub]}"
    return PULUMI_PATHS[(kind, name)]


def _steps(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    def bound(v: Any) -> Any:
        return None if v is MISSING else v
    return tuple(scaling.StepSpec(scaling_adjustment=at(s, "scalingAdjustment"), lower_bound=bound(at(s, "metricIntervalLowerBound")),
                                  upper_bound=bound(at(s, "metricIntervalUpperBound"))) for s in value)


def observed(part: str, res: Res, expected: Any, kind: str | None = None) -> Any:
    """The spec part ``expected`` as ``res`` has it (Pulumi properties normalized into the spec shape)."""
    kind, values = kind or KIND[part], {}
    for f in dataclasses.fields(expected):
        if not f.compare:
            values[f.name] = getattr(expected, f.name)
            continue
        v = res.get(PULUMI_PATHS[(kind, f.name)])
        if v is MISSING:
            v = PROVIDER_DEFAULTS.get((kind, f.name), None)
        if f.name == "steps":
            v = _steps(v)
        elif f.name == "dimensions" and isinstance(v, Mapping):
            v = tuple(sorted((str(k), at(v, k)) for k in v))
        elif f.name == "dimensions" and isinstance(v, list):
            # A customized metric specification lists its dimensions as {name, value}.
            v = tuple(sorted((str(at(d, "name")), at(d, "value")) for d in v))
        values[f.name] = v
    if kind == "alarm" and values["datapoints_to_alarm"] is None:
        values["datapoints_to_alarm"] = values["evaluation_periods"]
    return type(expected)(**values)


def plan_differences(part: str, res: Res, spec: Any, src: str, kind: str | None = None) -> Iterator[str]:
    """:func:`speech.deploy.scaling.diff` of ``res`` against ``spec.<part>``, as the pack's messages
    (``spec`` a ScalingSpec, or a ComponentScalingSpec with ``kind`` from its part kinds)."""
    want = getattr(spec, part)
    for d in scaling.diff(part, want, observed(part, res, want, kind)):
        if (part, d.field) in REPORTED_ELSEWHERE:
            continue
        path, why = _path(part, d.field, kind), spec.rule_of(part, d.field)
        raw = res.get(path)
        if raw is UNKNOWN or has_unknown(raw):
            yield (f"{PREVIEW}: {res.label} {path} is unknown, expected {_show(d.expected)} ({why}); "
                   "compute it from stack config, not from another resource's output")
        elif d.field == "steps" and isinstance(raw, list):
            yield (f"{res.label} has {len(raw)} step adjustments, expected {len(d.expected)} ({why}): further steps would "
                   f"add capacity no plan sized; {FIX_HAND_EDIT}")
        elif part == "queue":
            # Environment values are strings.
            yield f"{res.label} {path} is {fmt(raw)}, expected {fmt(str(d.expected))} ({why}, from {src}); {FIX_HAND_EDIT}"
        else:
            yield f"{res.label} {path} is {fmt(raw)}, expected {_show(d.expected)} ({why}, from {src}); {FIX_HAND_EDIT}"


def _show(value: Any) -> str:
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        return "[" + ", ".join(", ".join(f"{k}={fmt(v)}" for k, v in dataclasses.asdict(s).items() if v is not None)
                               for s in value) + "]"
    if isinstance(value, tuple):
        return fmt(dict(value))
    return fmt(value)


def rule_matches_plan(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    for s in scaled_variants(stack):
        t = s.target
        try:
            prov = _provenance(s, cache)
        except NoProvenance as err:
            yield (f"{t.label}: cannot compare scaling with a plan: {err.message}", t.urn)
            continue
        if prov.plan is None or _is_async(stack, s.endpoint):
            continue  # a batch route: batch-scaling-matches-plan compares it with its batch plan
        plan, src = prov.plan, f"provenance document {prov.document_object.label}"
        if s.endpoint_name is None:
            # The resource id is unknown during preview: its endpoint was found through dependencies.
            name = s.endpoint.get("name")
            endpoint_name = name if isinstance(name, str) else s.endpoint.name
        else:
            endpoint_name = s.endpoint_name
        spec = scaling.scaling_spec(plan, endpoint_name, s.variant or scaling.VARIANT)
        found: list[tuple[str, Res]] = [("target", t)]
        found += [("scale_out", p) for p in _scale_out_policies(stack, s)]
        found += [("scale_in", p) for p in _step_policies(stack, s, "in")]
        found += [("scale_in_alarm", a) for a in _scale_in_alarms(stack, s)]
        found += [("surge", p) for p in _step_policies(stack, s, "out")]
        found += [("surge_alarm", a) for a in _surge_alarms(stack, s)]
        for part, res in found:
            for msg in plan_differences(part, res, spec, src):
                yield msg, res.urn
        yield from scheduled_differences(stack, s, spec, src)
        if s.endpoint is not None:
            config, variant, problem = _model_of(stack, s.endpoint, s.variant)
            model, problem2 = (None, None) if variant is None else _model(stack, config, variant)
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
            prov = _provenance(s, cache)
        except NoProvenance as err:
            yield (f"{t.label}: cannot show that its plan is feasible: {err.message}", t.urn)
            continue
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
        for p in _step_policies(stack, s, "in"):
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


# --- deployment-matches-fingerprint ------------------------------------------------------------


def rule_fingerprint(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    scaled_endpoints = {s.endpoint.urn for s in scaled_variants(stack) if s.endpoint is not None}
    for e in stack.of(T_ENDPOINT):
        try:
            # speech:model and speech:stack name every endpoint; the measurement tags claim a plan.
            tagged = any(k in tags_of(e) for k in REQUIRED_TAGS if k != pv.TAG_MODEL)
        except NoProvenance:
            tagged = True
        if not tagged and e.urn not in scaled_endpoints:
            continue  # nothing claims this endpoint was measured; the scaling rules cover scaling
        try:
            prov = cache.get(e)
        except NoProvenance as err:
            yield (f"cannot compare {e.label} with the artifacts' fingerprint: {err.message}", e.urn)
            continue
        fp = prov.document.measurements.qmax.fingerprint
        config, variant, problem = _model_of(stack, e, None)
        if problem:
            yield (f"cannot compare {e.label} with the artifacts' fingerprint: {problem}", e.urn)
            continue
        fix = (f"fix: deploy what was measured ({fp.instance_type}, {fp.image_digest[:19]}...) or measure what is "
               "deployed (bench qmax, bench ttotal on it) and re-plan")
        itype = at(variant, "instanceType")
        if itype is UNKNOWN:
            yield (f"{PREVIEW}: {config.label} instanceType is unknown; expected {fp.instance_type!r} ({fp.slug})", config.urn)
        elif itype != fp.instance_type:
            yield (f"{config.label} deploys instance type {fmt(itype)}, but the artifacts in provenance document "
                   f"{prov.document_object.label} were measured on {fp.instance_type!r} ({fp.slug}); {fix}", config.urn)
        model, problem = _model(stack, config, variant) if at(variant, "modelName") is not MISSING or not \
            components_on(stack, e) else _component_model(stack, e)
        if problem:
            yield (f"cannot compare the image of {e.label} with the artifacts' fingerprint: {problem}", e.urn)
            continue
        image = model.get("primaryContainer.image")
        builds = stack.built_images(model, "primaryContainer")
        if image is UNKNOWN and builds:
            # The image is built and pushed in this update: its digest exists only then. The
            # program compares it with the measurements before it creates the Model, and this rule
            # compares it again when `pulumi up` sends the known value.
            yield Deferred(f"{model.label} runs the image {builds[0].label} builds in this update; its digest is "
                           f"compared with the measured {fp.image_digest[:19]}... when it is pushed (pulumi up)"), model.urn
        elif image is UNKNOWN:
            yield (f"{PREVIEW}: {model.label} primaryContainer.image is unknown; expected an image pinned to "
                   f"{fp.image_digest}", model.urn)
        elif not isinstance(image, str) or "@" not in image:
            yield (f"{model.label} primaryContainer.image {fmt(image)} is not pinned by digest (<repo>@sha256:...), "
                   f"so nothing ties it to the measured {fp.image_digest[:19]}...; {fix}", model.urn)
        elif image.rsplit("@", 1)[1] != fp.image_digest:
            yield (f"{model.label} deploys image digest {image.rsplit('@', 1)[1][:19]}..., but the artifacts in "
                   f"provenance document {prov.document_object.label} were measured on {fp.image_digest[:19]}... "
                   f"({fp.slug}); {fix}", model.urn)


# --- measured-artifacts-match-receipts ----------------------------------------------------------


def rule_receipts(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """Every measured SageMaker artifact in an endpoint's provenance document has the receipt the
    program read from the bucket (tags :data:`speech.deploy.receipts.RECEIPT_TAGS`), for exactly that
    artifact; judged with :func:`speech.deploy.receipts.receipt_problem`, the gate's own comparison."""
    for e in stack.of(T_ENDPOINT):
        try:
            tags = tags_of(e)
        except NoProvenance:
            continue  # unknown tags: deployment-matches-fingerprint reports them
        if pv.TAG_DOC_SHA not in tags:
            continue  # claims no plan, so no measurements
        try:
            prov = cache.get(e)
        except NoProvenance:
            continue  # deployment-matches-fingerprint and the scaling rules report it
        doc = prov.document
        stack_name = at(tags, "speech:stack")
        stack_name = stack_name if isinstance(stack_name, str) else "<stack>"
        own = prov.document_object.get("bucket")
        for claim in rc.receipt_claims(doc.measurements, doc.measured_on):
            bucket = claim.bucket or (own if isinstance(own, str) and not has_unknown(own)
                                      else f"<the bucket of {prov.document_object.label}>")
            tag = receipt_doc.RECEIPT_TAGS[claim.kind]
            read = at(tags, tag) if claim.key is not None else receipt_doc.NO_RECEIPT
            if read is UNKNOWN:
                # The bucket is created in this update: the program reads the receipt at `pulumi up`
                # and keeps scaling off unless it matches; this rule then checks the known value.
                yield Deferred(f"{e.label}: the {claim.kind} receipt {claim.key!r} is read from the bucket once it "
                               f"exists (pulumi up); it must be for artifact {claim.artifact_sha256}"), e.urn
                continue
            if read is MISSING or not isinstance(read, str):
                yield (f"{e.label} has no {tag} tag although models.{prov.model}.measurements.{claim.kind} is a "
                       f"measurement of SageMaker endpoint {claim.artifact.provenance.target_endpoint!r}: nothing read "
                       f"its receipt {claim.key!r}; fix: deploy with this program, which reads the receipt and tags "
                       "the endpoint (never hand-write provenance tags)", e.urn)
                continue
            problem = rc.receipt_problem(prov.model, claim, read, bucket=bucket, stack=stack_name,
                                         inputs=doc.inputs, max_instances=doc.max_instances_cap)
            if problem is not None:
                yield f"{e.label}: {problem.message}", e.urn


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
        if _batch_route(stack, s, cache):
            continue  # a batch route's two paths (backlog, wake): batch-scaling-matches-plan
        policies = _policies(stack, s)
        outs = [p for p in policies if p.get("policyType") == "TargetTrackingScaling"]
        ins = _step_policies(stack, s, "in")
        surges = _step_policies(stack, s, "out")
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
            alarms = _scale_in_alarms(stack, s)
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


# --- batch-scaling-matches-plan ----------------------------------------------------------------


def _is_async(stack: Stack, endpoint: Res | None) -> bool:
    """The endpoint's configuration in this stack has an asyncInferenceConfig (a batch route)."""
    if endpoint is None:
        return False
    configs, _ = stack.endpoint_config_of(endpoint)
    return any(c.get("asyncInferenceConfig") not in (MISSING, None) for c in configs)


def _batch_route(stack: Stack, s: Scaled, cache: ProvenanceCache) -> bool:
    """An asynchronous endpoint, or one whose provenance is a batch plan: batch-scaling-matches-plan judges it."""
    if _is_async(stack, s.endpoint):
        return True
    try:
        return s.endpoint is not None and cache.get(s.endpoint).batch is not None
    except NoProvenance:
        return False


def _metric_of_policy(p: Res) -> Any:
    """What a target-tracking policy tracks: the predefined type, else the customized metric's name."""
    pre = p.get("targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType")
    if pre is not MISSING:
        return pre
    return p.get("targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.metricName")


def _realtime_metric(value: Any) -> bool:
    return isinstance(value, str) and any(m in value for m in scaling.REALTIME_METRICS)


def _endpoint_alarms(stack: Stack, endpoint_name: str) -> list[Res]:
    """Alarms whose dimensions name this endpoint (with or without a variant)."""
    return [a for a in stack.of(T_ALARM) if isinstance(a.get("dimensions"), Mapping)
            and at(a.get("dimensions"), "EndpointName") == endpoint_name]


def rule_batch_scaling(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """A batch route is an asynchronous endpoint scaled only on its backlog, as its batch plan says:
    no real-time scaling (concurrency or invocations target tracking, concurrency step alarms), one
    backlog target tracking, one wake step behind HasBacklogWithoutCapacity, min 0."""
    fix_rt = ("fix: a batch route queues instead of scaling for latency; remove the real-time scaling and let the "
              "program create the backlog scaling (priority: batch, hosting: async, then pulumi preview)")
    for s in scaled_variants(stack):
        t = s.target
        is_async = _is_async(stack, s.endpoint)
        try:
            prov = _provenance(s, cache) if s.endpoint is not None else None
        except NoProvenance as err:
            if is_async:
                yield (f"{t.label}: cannot compare the asynchronous endpoint's scaling with a batch plan: {err.message}",
                       t.urn)
            continue
        batch = prov.batch if prov is not None else None
        if not is_async and batch is None:
            continue  # a real-time route: the real-time rules judge it
        src = f"provenance document {prov.document_object.label}" if prov is not None else "its provenance"
        if is_async and batch is None:
            yield (f"{t.label} scales the asynchronous endpoint {s.endpoint.label} from a real-time plan ({src} has no "
                   "max_delay_s); fix: set priority: batch, hosting: async and plan.max_delay_s for the model, then "
                   "bench plan --stack", t.urn)
            continue
        if not is_async:
            yield (f"{s.endpoint.label} is a batch model ({src} plans a completion delay of "
                   f"{batch.inputs.max_delay_s:g} s) but its endpoint configuration has no asyncInferenceConfig: a "
                   "real-time endpoint cannot queue or scale to zero; fix: deploy it with hosting: async", t.urn)
            continue
        endpoint_name = s.endpoint_name if s.endpoint_name is not None else s.endpoint.get("name")
        if not isinstance(endpoint_name, str):
            endpoint_name = s.endpoint.name
        spec = scaling.batch_scaling_spec(batch, endpoint_name, s.variant or scaling.VARIANT)
        policies = _policies(stack, s)
        tracking = [p for p in policies if p.get("policyType") == "TargetTrackingScaling"]
        backlog = [p for p in tracking if _metric_of_policy(p) == scaling.BACKLOG_METRIC]
        wakes = _step_policies(stack, s, "out")
        alarms = _endpoint_alarms(stack, endpoint_name)
        wake_alarms = [a for a in alarms if a.get("metricName") == scaling.WAKE_METRIC]

        # 1. No real-time scaling on a batch route.
        for p in tracking:
            metric = _metric_of_policy(p)
            if _realtime_metric(metric):
                yield (f"{p.label} tracks {fmt(metric)} on the batch endpoint {endpoint_name!r}: real-time scaling on a "
                       f"route whose requests wait in its queue (the backlog, {scaling.BACKLOG_METRIC}, is what it "
                       f"scales on); {fix_rt}", p.urn)
            elif metric != scaling.BACKLOG_METRIC:
                yield (f"{p.label} tracks {fmt(metric)} on the batch endpoint {endpoint_name!r}, expected "
                       f"{scaling.BACKLOG_METRIC} only; {fix_rt}", p.urn)
        for p in _step_policies(stack, s, "in"):
            yield (f"{p.label} is a step scale-in policy on the batch endpoint {endpoint_name!r}: backlog target "
                   f"tracking scales it in (to zero); {fix_rt}", p.urn)
        for a in alarms:
            if _realtime_metric(a.get("metricName")):
                yield (f"{a.label} watches {fmt(a.get('metricName'))} of the batch endpoint {endpoint_name!r}: a "
                       f"real-time scaling alarm; {fix_rt}", a.urn)

        # 2. The backlog scaling is the batch plan's.
        found: list[tuple[str, Res]] = [("target", t)]
        if len(backlog) != 1:
            yield (f"{t.label} has {len(backlog)} {scaling.BACKLOG_METRIC} target-tracking policies "
                   f"({', '.join(p.label for p in backlog) or 'none'}), expected exactly 1 at backlog target "
                   f"{batch.backlog_target_per_instance} ({spec.rule_of('backlog', 'target_value')}, from {src}); "
                   f"{FIX_HAND_EDIT}", t.urn)
        found += [("backlog", p) for p in backlog]
        if len(wakes) != 1 or len(wake_alarms) != 1:
            yield (f"{t.label} has {len(wakes)} step scale-out (wake) policies and {len(wake_alarms)} "
                   f"{scaling.WAKE_METRIC} alarms on {endpoint_name!r}, expected exactly 1 each: target tracking cannot "
                   f"scale up from zero instances (no backlog per instance exists there), so without the wake the "
                   f"endpoint stays at zero with requests queued; {FIX_HAND_EDIT}", t.urn)
        found += [("wake", p) for p in wakes[:1]] + [("wake_alarm", a) for a in wake_alarms[:1]]
        for part, res in found:
            for msg in plan_differences(part, res, spec, src):
                yield msg, res.urn
        configs, _ = stack.endpoint_config_of(s.endpoint)
        for c in configs[:1]:
            for msg in plan_differences("client", c, spec, src):
                yield msg, c.urn


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
    if budget is not None and not blocked and total > budget + 1e-9:
        yield (
            f"the stack can reach ${total:,.0f}/day at maximum scale ({'; '.join(lines)}), above the daily budget "
            f"${budget:,.0f} (policy config daily-budget-usd); fix: cap the fleet (max_instances in stack config, "
            "then bench plan --stack), or raise daily-budget-usd",
            None,
        )
    if not blocked:
        yield from _stack_budget(deployed, cache)


def _stack_budget(deployed: Mapping[str, tuple[Res, str | None, float]], cache: ProvenanceCache) -> StackViolations:
    """The stack budget part of daily-cost-ceiling (see :func:`rule_daily_cost`)."""
    from speech.schema.plan_artifacts import PlanArtifact
    from speech.plan.budget import BATCH_FLOOR_INSTANCES, ModelNeed, allocate, check_deployed
    from speech.errors import SpeechError

    provs = {}
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
        if p.document.budget != allocation.of(name):
            yield (f"provenance document {p.document_object.label} records a budget allocation for {name!r} of "
                   f"{p.document.budget.max_instances} instances, but the allocation recomputed over every model is "
                   f"{allocation.of(name).max_instances}; {FIX_HAND_EDIT}", None)
    for f in check_deployed(allocation, max_of):
        if short and f.name == "budget_critical_capped":
            continue  # the shortfall above is why
        yield (f.message, None)


# --- S3 -----------------------------------------------------------------------------------------

PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_ACLS = ("public-read", "public-read-write", "authenticated-read")


def rule_bucket_not_public(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    blocks = stack.of(T_PUBLIC_ACCESS_BLOCK)
    for pab in blocks:
        off = [f for f in PAB_FLAGS if pab.get(f) is not True]
        if off:
            vals = ", ".join(f"{f}={fmt(pab.get(f))}" for f in off)
            pre = f"{PREVIEW}: " if any(pab.get(f) is UNKNOWN for f in off) else ""
            yield (f"{pre}{pab.label} leaves public access open ({vals}); expected all of {', '.join(PAB_FLAGS)} true; "
                   "fix: set them to true (weights and provenance must never be public)", pab.urn)
    for b in stack.of(T_BUCKET, T_BUCKET_V2):
        acl = b.get("acl")
        if acl in PUBLIC_ACLS:
            yield (f"{b.label} acl is {acl!r}, expected private; fix: remove the acl", b.urn)
        matched, unknown = _settings_for(stack, b, blocks)
        if not matched:
            yield (
                f"{PREVIEW}: {b.label}: its public access block cannot be identified" if unknown else
                f"{b.label} has no public access block; expected one with {', '.join(PAB_FLAGS)} true; fix: add "
                "aws.s3.BucketPublicAccessBlock for it",
                b.urn,
            )
    for acl_res in stack.of(T_BUCKET_ACL, T_BUCKET_ACL_V2):
        acl = acl_res.get("acl")
        if acl in PUBLIC_ACLS:
            yield (f"{acl_res.label} acl is {acl!r}, expected private; fix: remove it", acl_res.urn)


def _settings_for(stack: Stack, bucket: Res, settings: list[Res]) -> tuple[list[Res], bool]:
    hits, unknown = [], False
    for s in settings:
        found, unk = stack.refers(s, "bucket", [bucket])
        hits += [s] if found else []
        unknown = unknown or unk
    return hits, unknown


SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")


def rule_bucket_encrypted(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    sses = stack.of(T_SSE, T_SSE_V2)
    for b in stack.of(T_BUCKET, T_BUCKET_V2):
        matched, unknown = _settings_for(stack, b, sses)
        inline = b.get("serverSideEncryptionConfiguration.rule.applyServerSideEncryptionByDefault.sseAlgorithm")
        if inline in SSE_ALGORITHMS:
            continue
        if not matched:
            yield (
                f"{PREVIEW}: {b.label}: its encryption configuration cannot be identified" if unknown else
                f"{b.label} has no server-side encryption configuration; expected one of {', '.join(SSE_ALGORITHMS)}; "
                "fix: add aws.s3.BucketServerSideEncryptionConfiguration (aws:kms)",
                b.urn,
            )
            continue
        for sse in matched:
            rules = sse.get("rules")
            algs = [at(r, "applyServerSideEncryptionByDefault.sseAlgorithm") for r in rules] if isinstance(rules, list) else []
            if not any(a in SSE_ALGORITHMS for a in algs):
                yield (f"{sse.label} sseAlgorithm is {fmt(algs[0] if algs else MISSING)}, expected one of "
                       f"{', '.join(SSE_ALGORITHMS)}; fix: set rules[0].applyServerSideEncryptionByDefault.sseAlgorithm", sse.urn)


# --- resource rules ----------------------------------------------------------------------------


def _policy_documents(res: Res) -> list[tuple[str, Any]]:
    if res.type == "aws:iam/role:Role":
        inline = res.get("inlinePolicies")
        docs = []
        if inline is UNKNOWN:
            docs.append(("inlinePolicies", UNKNOWN))
        for i, p in enumerate(inline if isinstance(inline, list) else []):
            docs.append((f"inlinePolicies[{i}].policy", at(p, "policy")))
        return docs
    return [("policy", res.get("policy"))]


def rule_iam_no_wildcards(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if res.type not in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy", "aws:iam/role:Role"):
        return
    for where, doc in _policy_documents(res):
        if doc is MISSING:
            continue
        if doc is UNKNOWN or (isinstance(doc, str) and has_unknown(doc)):
            # ARNs of resources created in the same update are unknown in a first preview.
            raise UnknownValueError(UNKNOWN_STRING_VALUE, [where])
        try:
            parsed = json.loads(doc) if isinstance(doc, str) else doc
        except ValueError:
            yield f"{res.label} {where} is not valid JSON, so its actions cannot be checked; fix: emit it with json.dumps"
            continue
        for f in wildcard_findings(parsed):
            if f.kind == "not_action":
                yield (f"{res.label} {where} Statement[{f.statement}] allows NotAction {fmt(list(f.actions))}: everything "
                       "else is allowed; fix: list the actions it needs")
            elif f.kind == "wildcard_action":
                yield (f"{res.label} {where} Statement[{f.statement}] allows wildcard actions {list(f.actions)}, expected "
                       "explicit actions; fix: list the exact actions (e.g. s3:GetObject, ecr:BatchGetImage)")
            else:
                yield (f"{res.label} {where} Statement[{f.statement}] allows {list(f.actions)} on Resource '*', expected "
                       "the resources they need (only actions without resource-level permissions, such as "
                       f"{', '.join(sorted(ALLOWED_ON_STAR))}, may use '*'); fix: name the ARNs")


def rule_ecr_hygiene(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if res.type != "aws:ecr/repository:Repository":
        return
    mut = res.get("imageTagMutability")
    if mut != "IMMUTABLE":
        yield (f"{res.label} imageTagMutability is {fmt(mut)}, expected 'IMMUTABLE': a pushed tag could point at an "
               "image nobody measured; fix: image_tag_mutability='IMMUTABLE'")
    scan = res.get("imageScanningConfiguration.scanOnPush")
    if scan is not True:
        yield (f"{res.label} imageScanningConfiguration.scanOnPush is {fmt(scan)}, expected true; fix: "
               "image_scanning_configuration={'scan_on_push': True}")


def rule_instance_type_allowed(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    from policy.config import DEFAULT_ALLOWED_INSTANCE_TYPES

    if res.type != "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
        return
    allowed = list(cfg.get("allowed-instance-types") or DEFAULT_ALLOWED_INSTANCE_TYPES)
    variants = res.get("productionVariants")
    if variants is UNKNOWN:
        yield f"{PREVIEW}: {res.label} productionVariants are unknown; expected instance types among {allowed}"
        return
    for i, v in enumerate(variants if isinstance(variants, list) else []):
        itype = at(v, "instanceType")
        if itype is UNKNOWN:
            yield f"{PREVIEW}: {res.label} productionVariants[{i}].instanceType is unknown; expected one of {allowed}"
        elif itype is not MISSING and itype not in allowed:
            yield (f"{res.label} productionVariants[{i}].instanceType is {fmt(itype)}, not in allowed-instance-types "
                   f"{allowed}; fix: use an allowed type (and measure it), or add it to the policy config")


def _is_sagemaker_target(res: Res) -> bool:
    return (res.type == "aws:appautoscaling/target:Target" and res.get("serviceNamespace") in (scaling.SERVICE_NAMESPACE, UNKNOWN)
            and res.get("scalableDimension") in (scaling.SCALABLE_DIMENSION, UNKNOWN))


def rule_target_tags(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if not _is_sagemaker_target(res):
        return
    try:
        tags = provenance_tags_of(res)
    except NoProvenance as err:
        yield err.message
        return
    if tags[pv.TAG_VERDICT] == "stop":
        yield (f"{res.label} is tagged {pv.TAG_VERDICT}='stop': its plan has a stop finding and must not get scaling; "
               "fix: address the stop findings (bench plan shows them) and re-plan")


def rule_unmeasured_notice(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    copies = res.type == "aws:appautoscaling/target:Target" and \
        res.get("scalableDimension") == scaling.COMPONENT_SCALABLE_DIMENSION
    if not (_is_sagemaker_target(res) or copies):
        return
    tags = res.get("tags")
    origin = at(tags, pv.TAG_ORIGIN) if isinstance(tags, Mapping) else MISSING
    if isinstance(origin, str) and origin != "measured":
        yield (f"{res.label} scales from {origin!r} figures, not measurements of this endpoint; before production "
               "traffic run bench qmax and bench ttotal against it and re-plan (bench plan --stack)")


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


def _component_model(stack: Stack, endpoint: Res) -> tuple[Res | None, str | None]:
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
        dims = a.get("dimensions")
        if isinstance(dims, Mapping) and at(dims, "InferenceComponentName") == component_name \
                and a.get("metricName") in (*metrics, UNKNOWN):
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
        config, variant, problem = _model_of(stack, c.endpoint, spec.variant)
        if problem:
            yield f"cannot check managed instance scaling of {c.endpoint.label}: {problem}", t.urn
        else:
            for msg in plan_differences("instances", _variant_view(config, variant), spec, src, kinds["instances"]):
                yield msg, config.urn
        model, problem = _component_model(stack, c.endpoint)
        if problem:
            yield f"cannot check the copies' queue depth: {problem}", t.urn
        else:
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
        try:
            ttags = provenance_tags_of(t)
        except NoProvenance as err:
            yield f"{err.message} (its endpoint {c.endpoint.label} has them)", t.urn
            continue
        diff = [f"{k}={ttags[k]!r} (endpoint: {prov.tags[k]!r})" for k in ttags if ttags[k] != prov.tags[k]]
        if diff:
            yield (f"{t.label} carries provenance different from {c.endpoint.label}: {'; '.join(diff)}; fix: tag both "
                   "from the same plan (speech.deploy.provenance.provenance_tags)", t.urn)
        ic_tags = native_tags(c.ic.get("tags"))
        if isinstance(ic_tags, Mapping) and any(at(ic_tags, k) != prov.tags[k] for k in REQUIRED_TAGS):
            yield (f"{c.ic.label} does not carry {c.endpoint.label}'s provenance tags; fix: tag both from the same plan",
                   c.ic.urn)
