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

One module per family: :mod:`.provenance`, :mod:`.realtime`, :mod:`.batch`, :mod:`.copies`,
:mod:`.cost`, :mod:`.hygiene`, :mod:`.backend`, :mod:`.kubernetes`; :mod:`.common` and :mod:`.compare` hold what they share. Every
name stays importable from ``policy.rules``.
"""

from __future__ import annotations

from policy.rules.backend import CPU_ONLY_BACKENDS, rule_backend_matches_instance
from policy.rules.batch import rule_batch_scaling
from policy.rules.common import FIX_HAND_EDIT, PREVIEW, Deferred, Scaled, StackViolations, scaled_variants
from policy.rules.compare import KIND, PROVIDER_DEFAULTS, PULUMI_PATHS, REPORTED_ELSEWHERE, STEP_PATHS, observed, plan_differences
from policy.rules.copies import (
    FIX_COMPONENT,
    Component,
    component_targets,
    components,
    components_on,
    rule_component_compute,
    rule_component_provenance,
    rule_copy_scaling_matches_plan,
    rule_no_competing_variant_scaling,
)
from policy.rules.cost import rule_daily_cost
from policy.rules.forecast import rule_forecast_fresh
from policy.rules.hygiene import (
    AWS_MANAGED_SNS_KEY,
    PAB_FLAGS,
    PUBLIC_ACLS,
    SSE_ALGORITHMS,
    rule_bucket_encrypted,
    rule_bucket_not_public,
    rule_ecr_hygiene,
    rule_iam_no_wildcards,
    rule_instance_type_allowed,
    rule_topic_key_usable,
)
from policy.rules.kubernetes import rule_k8s_autoscaler_plan, rule_k8s_drain, rule_k8s_readiness
from policy.rules.provenance import rule_fingerprint, rule_measured_provenance, rule_receipts, rule_target_tags, rule_unmeasured_notice
from policy.rules.realtime import T_SCHEDULED, rule_matches_plan, rule_one_path, rule_plan_feasible, scheduled_differences

__all__ = [
    'rule_k8s_autoscaler_plan', 'rule_k8s_drain', 'rule_k8s_readiness',
    'AWS_MANAGED_SNS_KEY', 'CPU_ONLY_BACKENDS', 'T_SCHEDULED', 'rule_backend_matches_instance', 'rule_topic_key_usable',
    'scheduled_differences',
    'Component', 'Deferred', 'FIX_COMPONENT', 'FIX_HAND_EDIT', 'KIND', 'PAB_FLAGS', 'PREVIEW',
    'PROVIDER_DEFAULTS', 'PUBLIC_ACLS', 'PULUMI_PATHS', 'REPORTED_ELSEWHERE', 'SSE_ALGORITHMS', 'STEP_PATHS',
    'Scaled', 'StackViolations', 'component_targets', 'components', 'components_on', 'observed',
    'plan_differences', 'rule_batch_scaling', 'rule_bucket_encrypted', 'rule_bucket_not_public',
    'rule_component_compute', 'rule_component_provenance', 'rule_copy_scaling_matches_plan', 'rule_daily_cost',
    'rule_ecr_hygiene', 'rule_fingerprint', 'rule_iam_no_wildcards', 'rule_instance_type_allowed',
    'rule_forecast_fresh', 'rule_matches_plan', 'rule_measured_provenance', 'rule_no_competing_variant_scaling', 'rule_one_path',
    'rule_plan_feasible', 'rule_receipts', 'rule_target_tags', 'rule_unmeasured_notice', 'scaled_variants',
]
