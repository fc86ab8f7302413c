"""The pack's policies: pulumi_policy wrappers around the validators in :mod:`policy.rules`.

Blocking rules (provenance, plan match, feasibility, fingerprint, receipts, one path, cost, GPU
instance with a GPU backend, public buckets, wildcard IAM, instance types, target tags) are mandatory; hygiene (encryption, ECR,
reference-figures notice) is advisory. Any of them can be re-levelled or disabled through policy
config (``pulumi preview --policy-pack-config``, or ``python -m policy check --config``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import serialize_properties
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from policy import rules
from policy.config import DEFAULT_ALLOWED_INSTANCE_TYPES, DEFAULT_DAILY_BUDGET_USD, DEFAULT_HOURLY_PRICES_USD
from policy.recompute import ProvenanceCache
from policy.resources import Res, Stack

PACK_NAME = "speech-endpoints-guard"
MANDATORY, ADVISORY = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY


def _plain(props: Any) -> dict[str, Any]:
    # Unwrap pulumi_policy's raising proxies: unknowns stay visible as sentinel strings.
    return dict(serialize_properties(props)) if props is not None else {}


def _res_from_args(args: ResourceValidationArgs) -> Res:
    return Res(type=args.resource_type, name=args.name, urn=args.urn, props=_plain(args.props),
               parent=args.opts.parent if args.opts else None)


def stack_from_args(args: StackValidationArgs) -> Stack:
    out = []
    for r in args.resources:
        out.append(Res(
            type=r.resource_type, name=r.name, urn=r.urn, props=_plain(r.props),
            parent=r.parent.urn if r.parent is not None else None,
            dependencies=tuple(d.urn for d in r.dependencies),
            property_dependencies={k: tuple(d.urn for d in v) for k, v in r.property_dependencies.items()},
        ))
    return Stack(out)


def resource_policy(name: str, description: str, rule: Callable[[Res, Mapping[str, Any]], Iterator[str]],
                    level: EnforcementLevel, schema: PolicyConfigSchema | None = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for message in rule(_res_from_args(args), args.get_config() or {}):
            report(message, None)

    return ResourceValidationPolicy(name=name, description=description, validate=validate,
                                    enforcement_level=level, config_schema=schema)


_analysis: tuple[str, Stack, ProvenanceCache] | None = None
"""The stack and provenance of the AnalyzeStack call in progress (see :func:`analysis`)."""


def analysis(args: StackValidationArgs) -> tuple[Stack, ProvenanceCache]:
    """One Stack and one ProvenanceCache per AnalyzeStack call, shared by every stack policy.

    pulumi_policy calls each stack policy with its own copy of the same resources and no handle on
    the call itself, so the call is recognized by its content: the policies of one AnalyzeStack
    see identical resources and reuse the first one's cache, so each endpoint's plan is
    recomputed (build_plan) once per preview, not once per policy. The result is a pure function
    of the resources, so reusing it for an identical later call is also correct.
    """
    global _analysis
    stack = stack_from_args(args)
    key = json.dumps([(r.urn, r.type, r.props, r.parent, r.dependencies, r.property_dependencies) for r in stack.resources],
                     sort_keys=True, default=repr)
    if _analysis is None or _analysis[0] != key:
        _analysis = (key, stack, ProvenanceCache(stack))
    return _analysis[1], _analysis[2]


def stack_policy(name: str, description: str, rule: Callable[..., rules.StackViolations],
                 level: EnforcementLevel, schema: PolicyConfigSchema | None = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        stack, cache = analysis(args)
        deferred = []
        for message, urn in rule(stack, args.get_config() or {}, cache):
            if isinstance(message, rules.Deferred):
                deferred.append(str(message))
            else:
                report(message, urn)
        if deferred:
            # pulumi_policy reports this as an advisory "can't run policy ... during preview".
            err = UnknownValueError(UNKNOWN_STRING_VALUE, [])
            err.message = "; ".join(deferred)
            raise err

    return StackValidationPolicy(name=name, description=description, validate=validate,
                                 enforcement_level=level, config_schema=schema)


PROVENANCE_SCHEMA = PolicyConfigSchema(properties={
    "allow-reference-artifacts": {
        "type": "boolean", "default": True,
        "description": "Let plans built on reference figures (public numbers of a comparable deployment) deploy. "
                       "Default true: the dev stack runs on them, and deployment-matches-fingerprint already ties "
                       "them to the exact reference image; set false for production stacks.",
    },
    "allow-assumption-artifacts": {
        "type": "boolean", "default": False,
        "description": "Let plans built on assumed (guessed) figures deploy. Default false.",
    },
})
COST_SCHEMA = PolicyConfigSchema(properties={
    "daily-budget-usd": {"type": "number", "minimum": 0, "default": DEFAULT_DAILY_BUDGET_USD,
                         "description": "Ceiling for sum(max instances x hourly price x 24) over all endpoints."},
    "hourly-prices-usd": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0},
                          "default": DEFAULT_HOURLY_PRICES_USD,
                          "description": "USD per instance-hour by SageMaker instance type; merged over the defaults."},
})
PRICE_SCHEMA = PolicyConfigSchema(properties={
    "hourly-prices-usd": COST_SCHEMA.properties["hourly-prices-usd"],
})
INSTANCE_SCHEMA = PolicyConfigSchema(properties={
    "allowed-instance-types": {"type": "array", "items": {"type": "string"}, "default": DEFAULT_ALLOWED_INSTANCE_TYPES,
                               "description": "SageMaker instance types endpoint variants may use."},
})

COMPONENT_PROVENANCE_SCHEMA = PolicyConfigSchema(properties={
    **PROVENANCE_SCHEMA.properties,
    "allow-unmeasured-copy-artifacts": {
        "type": "boolean", "default": True,
        "description": "Let copies be sized and scaled from a copy artifact (footprint, T_copy) that is not a "
                       "measurement of this endpoint's copies (origin reference or assumption). Default true: the "
                       "components example runs on an assumed footprint; set false for production stacks.",
    },
})
COMPUTE_SCHEMA = PolicyConfigSchema(properties={
    "footprint-margin-min": {"type": "number", "minimum": 0, "default": 0.05,
                             "description": "Smallest margin a copy may reserve over its measured footprint."},
    "footprint-margin-max": {"type": "number", "minimum": 0, "default": 0.5,
                             "description": "Largest margin a copy may reserve over its measured footprint."},
})

POLICIES = [
    stack_policy("scaling-requires-measured-provenance",
                 "Every SageMaker scalable target belongs to an endpoint in the stack whose provenance document "
                 "(sha256 = tag) holds measurements of an allowed origin.",
                 rules.rule_measured_provenance, MANDATORY, PROVENANCE_SCHEMA),
    stack_policy("scaling-matches-plan",
                 "Target value, cooldowns, min/max capacity, the scale-in and surge alarms (threshold, comparison, "
                 "statistic, period, evaluation periods), the surge step size and container queue depth equal the "
                 "plan recomputed from the provenance document (speech.plan.realtime.build_plan, speech.deploy.scaling).",
                 rules.rule_matches_plan, MANDATORY),
    stack_policy("forecast-floors-fresh",
                 "Scheduled floors from a forecast (bench forecast) deploy only until the forecast's horizon ends "
                 "(valid_until in the plan's schedule); past it the preview is refused with the command that refreshes it.",
                 rules.rule_forecast_fresh, MANDATORY),
    stack_policy("scaling-plan-feasible",
                 "No scaling for a plan with a stop finding; the scale-in cooldown covers the planning T_total.",
                 rules.rule_plan_feasible, MANDATORY),
    stack_policy("deployment-matches-fingerprint",
                 "The deployed instance type and image digest are the ones the artifacts were measured on.",
                 rules.rule_fingerprint, MANDATORY),
    stack_policy("measured-artifacts-match-receipts",
                 "Every measured SageMaker artifact in a provenance document has the receipt bench wrote to the "
                 "provenance bucket for exactly that artifact (sha256), as the program read it at preview.",
                 rules.rule_receipts, MANDATORY),
    stack_policy("one-scaling-path-per-variant",
                 "Each scaled variant has exactly one scale-out and one scale-in path (plus at most one surge step); "
                 "no orphan or competing scaling policies.",
                 rules.rule_one_path, MANDATORY),
    stack_policy("batch-scaling-matches-plan",
                 "A batch (asynchronous) endpoint carries no real-time scaling (ConcurrentRequestsPerModel or "
                 "InvocationsPerInstance tracking, concurrency step alarms) and its backlog scaling equals the batch "
                 "plan recomputed from the provenance document (speech.plan.batch): min 0, max, backlog target, cooldowns, "
                 "the HasBacklogWithoutCapacity wake step and alarm, MaxConcurrentInvocationsPerInstance.",
                 rules.rule_batch_scaling, MANDATORY),
    stack_policy("daily-cost-ceiling",
                 "Maximum instances x hourly price x 24 over all endpoints stays within the daily budget.",
                 rules.rule_daily_cost, MANDATORY, COST_SCHEMA),
    stack_policy("gpu-instance-runs-gpu-backend",
                 "A model on an NVIDIA-GPU instance type does not run a CPU-only backend (BACKEND=onnx): the GPU "
                 "would sit idle at a GPU's price; the message quotes the ratio to the cheapest CPU instance that fits.",
                 rules.rule_backend_matches_instance, MANDATORY, PRICE_SCHEMA),
    stack_policy("s3-no-public-access",
                 "Every bucket has a public access block with all four flags on and no public ACL.",
                 rules.rule_bucket_not_public, MANDATORY),
    stack_policy("s3-encrypted",
                 "Every bucket has server-side encryption configured.",
                 rules.rule_bucket_encrypted, ADVISORY),
    stack_policy("copy-scaling-matches-plan",
                 "Inference-component copy scaling (copies min/max, target tracking on ConcurrentRequestsPerCopy, "
                 "cooldowns, the scale-in step and alarm, the scale-from-zero step and alarm exactly when the copy "
                 "floor is 0), managed instance scaling's range and the copies' queue depth equal the copy plan "
                 "recomputed from the provenance document (speech.plan.copies.build_copy_plan, speech.deploy.scaling).",
                 rules.rule_copy_scaling_matches_plan, MANDATORY),
    stack_policy("component-compute-matches-footprint",
                 "Each inference component reserves the measured footprint with the stated margin (accelerator "
                 "devices, host memory, CPU cores), and the margin is within the configured bounds.",
                 rules.rule_component_compute, MANDATORY, COMPUTE_SCHEMA),
    stack_policy("no-variant-scaling-with-components",
                 "An endpoint hosting inference components has no variant scalable target, no model on its variant, "
                 "and managed instance scaling enabled while its copies scale.",
                 rules.rule_no_competing_variant_scaling, MANDATORY),
    stack_policy("copy-scaling-requires-measured-provenance",
                 "Copy scaling belongs to an endpoint whose provenance document holds artifacts of allowed origins, "
                 "measured on this endpoint, with the same provenance tags on the target and the component.",
                 rules.rule_component_provenance, MANDATORY, COMPONENT_PROVENANCE_SCHEMA),
    stack_policy("kubernetes-autoscaler-requires-measured-plan",
                 "A HorizontalPodAutoscaler or KEDA ScaledObject belongs to a model whose provenance ConfigMap holds a "
                 "measured, feasible plan of an allowed origin (recomputed with speech.plan.realtime.build_plan), "
                 "targets at most the plan's in-flight requests per pod and keeps the plan's floor and cap.",
                 rules.rule_k8s_autoscaler_plan, MANDATORY, PROVENANCE_SCHEMA),
    stack_policy("kubernetes-grace-covers-drain",
                 "A measured model's Deployment gives each pod at least its preStop wait plus the measured drain "
                 "(queue depth / measured throughput) as terminationGracePeriodSeconds.",
                 rules.rule_k8s_drain, MANDATORY),
    resource_policy("kubernetes-readiness-probe",
                    "Every container of a Deployment has a readiness probe (the project's: GET /ping).",
                    rules.rule_k8s_readiness, MANDATORY),
    resource_policy("iam-no-wildcard-actions",
                    "IAM policies allow explicit actions only (no '*' or 'service:*', no Allow + NotAction).",
                    rules.rule_iam_no_wildcards, MANDATORY),
    resource_policy("alarm-topic-key-usable",
                    "An SNS topic is not encrypted with the AWS-managed key alias/aws/sns: CloudWatch alarm actions "
                    "cannot publish to it (its key policy cannot admit cloudwatch.amazonaws.com).",
                    rules.rule_topic_key_usable, MANDATORY),
    resource_policy("ecr-immutable-scanned",
                    "ECR repositories have immutable tags and scan on push.",
                    rules.rule_ecr_hygiene, ADVISORY),
    resource_policy("instance-type-allowed",
                    "Endpoint variants use an allowed SageMaker instance type.",
                    rules.rule_instance_type_allowed, MANDATORY, INSTANCE_SCHEMA),
    resource_policy("scalable-target-provenance-tags",
                    "A SageMaker scalable target carries the speech:* provenance tags and no stop verdict "
                    "(checked per resource, so `pulumi up` stops before creating it).",
                    rules.rule_target_tags, MANDATORY),
    resource_policy("scaling-from-unmeasured-figures",
                    "Notice: scaling planned from reference or assumed figures, not this endpoint's measurements.",
                    rules.rule_unmeasured_notice, ADVISORY),
]
