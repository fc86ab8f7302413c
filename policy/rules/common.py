"""What the rule families share: the scaled variants of a stack, the scaling resources on
each, the endpoint configuration and model behind a variant, and the message vocabulary."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policy.recompute import FIX_PROVENANCE, NoProvenance, Provenance, ProvenanceCache, provenance_tags_of
from policy.resources import (
    T_ENDPOINT,
    UNKNOWN,
    Res,
    Stack,
    at,
    fmt,
    parse_resource_id,
    step_direction,
)
from speech.deploy import scaling

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


def scaled_provenance(s: Scaled, cache: ProvenanceCache) -> Provenance:
    if s.endpoint is None:
        raise NoProvenance(s.problem or f"{s.target.label}: no endpoint")
    return cache.get(s.endpoint)

def scale_out_policies(stack: Stack, s: Scaled) -> list[Res]:
    return [p for p in policies_of(stack, s) if p.get("policyType") == "TargetTrackingScaling"]


def policies_of(stack: Stack, s: Scaled) -> list[Res]:
    rid = s.resource_id if isinstance(s.resource_id, str) else ""
    return stack.policies_on(rid, s.target)


def step_policies(stack: Stack, s: Scaled, direction: str) -> list[Res]:
    return [p for p in policies_of(stack, s) if p.get("policyType") == "StepScaling" and step_direction(p) == direction]


def scale_in_alarms(stack: Stack, s: Scaled) -> list[Res]:
    if s.endpoint_name is None or s.variant is None:
        return []
    return [
        a for a in stack.alarms_on(s.endpoint_name, s.variant)
        if a.get("metricName") in (scaling.METRIC, UNKNOWN)
        and (a.get("comparisonOperator") in ("LessThanOrEqualToThreshold", "LessThanThreshold", UNKNOWN))
    ]


def surge_alarms(stack: Stack, s: Scaled) -> list[Res]:
    # GreaterThanThreshold is picked up too, so a surge alarm edited to fire one request late is
    # reported here rather than slipping past as "not a surge alarm".
    if s.endpoint_name is None or s.variant is None:
        return []
    return [
        a for a in stack.alarms_on(s.endpoint_name, s.variant)
        if a.get("metricName") in (scaling.METRIC, UNKNOWN)
        and (a.get("comparisonOperator") in ("GreaterThanOrEqualToThreshold", "GreaterThanThreshold", UNKNOWN))
    ]


def config_and_variant(stack: Stack, endpoint: Res, variant_name: str | None) -> tuple[Res | None, dict | None, str | None]:
    """(endpoint configuration, variant, problem) then the model via :func:`variant_model`."""
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


def variant_model(stack: Stack, config: Res, variant: Mapping[str, Any]) -> tuple[Res | None, str | None]:
    models, unknown = stack.model_of_variant(config, variant)
    if models:
        return models[0], None
    if unknown:
        return None, f"{PREVIEW}: {config.label} variant modelName is unknown and no dependency names the model"
    return None, (
        f"{config.label} variant modelName {fmt(at(variant, 'modelName'))} matches no SageMaker model in this stack; "
        "fix: create the model in the same stack"
    )


def target_tags_problem(target: Res, endpoint: Res, endpoint_tags: Mapping[str, str]) -> tuple[str | None, bool]:
    """(message, readable): why ``target``'s provenance tags are not ``endpoint``'s (None when they
    are), and whether the target has readable provenance tags at all (False: nothing else about
    them can be compared)."""
    try:
        ttags = provenance_tags_of(target)
    except NoProvenance as err:
        return f"{err.message} (its endpoint {endpoint.label} has them)", False
    diff = [f"{k}={ttags[k]!r} (endpoint: {endpoint_tags[k]!r})" for k in ttags if ttags[k] != endpoint_tags[k]]
    if not diff:
        return None, True
    return (f"{target.label} carries provenance different from {endpoint.label}: {'; '.join(diff)}; fix: tag both "
            "from the same plan (speech.deploy.provenance.provenance_tags)"), True
