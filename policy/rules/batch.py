"""Batch (asynchronous endpoint) scaling: backlog tracking and the wake step equal the batch plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.recompute import NoProvenance, ProvenanceCache
from policy.resources import (
    MISSING,
    T_ALARM,
    Res,
    Stack,
    at,
    fmt,
)
from policy.rules.common import FIX_HAND_EDIT, Scaled, StackViolations, policies_of, scaled_provenance, scaled_variants, step_policies
from policy.rules.compare import plan_differences
from speech.deploy import scaling

# --- batch-scaling-matches-plan ----------------------------------------------------------------


def is_async_endpoint(stack: Stack, endpoint: Res | None) -> bool:
    """The endpoint's configuration in this stack has an asyncInferenceConfig (a batch route)."""
    if endpoint is None:
        return False
    configs, _ = stack.endpoint_config_of(endpoint)
    return any(c.get("asyncInferenceConfig") not in (MISSING, None) for c in configs)


def is_batch_route(stack: Stack, s: Scaled, cache: ProvenanceCache) -> bool:
    """An asynchronous endpoint, or one whose provenance is a batch plan: batch-scaling-matches-plan judges it."""
    if is_async_endpoint(stack, s.endpoint):
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
        is_async = is_async_endpoint(stack, s.endpoint)
        try:
            prov = scaled_provenance(s, cache) if s.endpoint is not None else None
        except NoProvenance as err:
            if is_async:
                yield (f"{t.label}: cannot compare the asynchronous endpoint's scaling with a batch plan: {err.message}",
                       t.urn)
            continue
        batch = prov.batch if prov is not None else None
        if s.endpoint is None or (not is_async and batch is None):
            continue  # a real-time route (or no endpoint, so neither async nor batch): the real-time rules judge it
        src = f"provenance document {prov.document_object.label}" if prov is not None else "its provenance"
        if batch is None:  # so is_async (the line above)
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
        policies = policies_of(stack, s)
        tracking = [p for p in policies if p.get("policyType") == "TargetTrackingScaling"]
        backlog = [p for p in tracking if _metric_of_policy(p) == scaling.BACKLOG_METRIC]
        wakes = step_policies(stack, s, "out")
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
        for p in step_policies(stack, s, "in"):
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
