"""Compare what is deployed (scalable target, policies, alarms) with what a plan says should be:
AWS ``Describe*`` output normalized into :mod:`speech.deploy.scaling`'s spec and compared with its one
:func:`~speech.deploy.scaling.diff` (docs/design.md §5.7).

Shared by ``drift`` (plan rebuilt from the stack config) and ``validate`` (plan from a file), so
the two never judge the same deployment differently. Pure: works on the data read by
:func:`bench.aws.client.read_deployed`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bench.aws import client as aws
from bench.aws.client import DeployedScaling
from speech.deploy import scaling
from speech.plan.batch import BatchPlan
from speech.schema.plan_artifacts import PlanArtifact

SUFFIXES = scaling.POLICY_SUFFIXES


@dataclass(frozen=True)
class Issue:
    kind: str
    """frozen | orphan_policy | missing_policy | mismatch | missing_target | unplanned_scaling | missing_alarm |
    orphan_scheduled | missing_scheduled"""
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def frozen_issues(d: DeployedScaling) -> list[Issue]:
    if d.target is None:
        return []
    susp = aws.suspended(d.target)
    on = [k for k, v in susp.items() if v]
    if not on:
        return []
    return [Issue("frozen", f"scaling is frozen: {', '.join(on)} = true (min {d.target['MinCapacity']}, max "
                            f"{d.target['MaxCapacity']}); if a qmax/ttotal run was killed, run "
                            f"python -m bench thaw --endpoint {d.endpoint}")]


# Where each field of the scaling spec lives in AWS Describe* output (dotted keys).
AWS_KEYS: dict[tuple[str, str], str] = {
    ("target", "resource_id"): "ResourceId",
    ("target", "service_namespace"): "ServiceNamespace",
    ("target", "scalable_dimension"): "ScalableDimension",
    ("target", "min_capacity"): "MinCapacity",
    ("target", "max_capacity"): "MaxCapacity",
    ("scale_out", "policy_type"): "PolicyType",
    ("scale_out", "metric_type"): "TargetTrackingScalingPolicyConfiguration.PredefinedMetricSpecification.PredefinedMetricType",
    ("scale_out", "target_value"): "TargetTrackingScalingPolicyConfiguration.TargetValue",
    ("scale_out", "scale_out_cooldown_s"): "TargetTrackingScalingPolicyConfiguration.ScaleOutCooldown",
    ("scale_out", "scale_in_cooldown_s"): "TargetTrackingScalingPolicyConfiguration.ScaleInCooldown",
    ("scale_out", "disable_scale_in"): "TargetTrackingScalingPolicyConfiguration.DisableScaleIn",
    ("step", "policy_type"): "PolicyType",
    ("step", "adjustment_type"): "StepScalingPolicyConfiguration.AdjustmentType",
    ("step", "steps"): "StepScalingPolicyConfiguration.StepAdjustments",
    ("step", "min_adjustment_magnitude"): "StepScalingPolicyConfiguration.MinAdjustmentMagnitude",
    ("step", "cooldown_s"): "StepScalingPolicyConfiguration.Cooldown",
    ("step", "aggregation"): "StepScalingPolicyConfiguration.MetricAggregationType",
    ("alarm", "namespace"): "Namespace",
    ("alarm", "metric_name"): "MetricName",
    ("alarm", "dimensions"): "Dimensions",
    ("alarm", "statistic"): "Statistic",
    ("alarm", "period_s"): "Period",
    ("alarm", "evaluation_periods"): "EvaluationPeriods",
    ("alarm", "datapoints_to_alarm"): "DatapointsToAlarm",
    ("alarm", "threshold"): "Threshold",
    ("alarm", "comparison"): "ComparisonOperator",
    ("alarm", "treat_missing_data"): "TreatMissingData",
    ("alarm", "wake_guard"): "Metrics",
    ("scheduled", "schedule"): "Schedule",
    ("scheduled", "timezone"): "Timezone",
    ("scheduled", "min_capacity"): "ScalableTargetAction.MinCapacity",
    ("scheduled", "max_capacity"): "ScalableTargetAction.MaxCapacity",
    ("backlog", "policy_type"): "PolicyType",
    ("backlog", "metric_name"): "TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification.MetricName",
    ("backlog", "namespace"): "TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification.Namespace",
    ("backlog", "dimensions"): "TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification.Dimensions",
    ("backlog", "statistic"): "TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification.Statistic",
    ("backlog", "target_value"): "TargetTrackingScalingPolicyConfiguration.TargetValue",
    ("backlog", "scale_out_cooldown_s"): "TargetTrackingScalingPolicyConfiguration.ScaleOutCooldown",
    ("backlog", "scale_in_cooldown_s"): "TargetTrackingScalingPolicyConfiguration.ScaleInCooldown",
}
KIND = scaling.PART_KIND
AWS_DEFAULTS = {("scale_out", "disable_scale_in"): False, ("step", "aggregation"): "Average",
                ("scheduled", "timezone"): "UTC",
                ("alarm", "treat_missing_data"): "missing"}
"""What AWS applies when Describe* omits the key (DatapointsToAlarm defaults to EvaluationPeriods)."""
STEP_GROUP = ("adjustment_type", "steps", "min_adjustment_magnitude")
"""Step-size fields: one message says what the policy adds against what the plan says."""


def _get(d: dict, path: str) -> Any:
    cur: Any = d
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


def observed(part: str, described: dict, expected: Any) -> Any:
    """The spec part ``expected`` as AWS describes it (``described``: a scalable target, a policy
    or an alarm from Describe*), normalized into the spec shape."""
    kind, values = KIND[part], {}
    # A metric-math alarm (DescribeAlarms' Metrics) names its metric inside its queries.
    math = scaling.read_guarded(described["Metrics"]) if kind == "alarm" and described.get("Metrics") else None
    for f in dataclasses.fields(expected):
        if not f.compare:
            values[f.name] = getattr(expected, f.name)
            continue
        if math is not None and f.name in math:
            values[f.name] = math[f.name]
            continue
        if f.name == "wake_guard":
            values[f.name] = None
            continue
        v = _get(described, AWS_KEYS[(kind, f.name)])
        if v is None:
            v = AWS_DEFAULTS.get((kind, f.name))
        if f.name == "steps" and isinstance(v, list):
            v = tuple(scaling.StepSpec(scaling_adjustment=s.get("ScalingAdjustment"), lower_bound=s.get("MetricIntervalLowerBound"),
                                       upper_bound=s.get("MetricIntervalUpperBound")) for s in v)
        elif f.name == "dimensions" and isinstance(v, list):
            v = tuple(sorted((x.get("Name"), x.get("Value")) for x in v))
        elif f.name == "metric_type" and v is None:
            v = _get(described, "TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification")
        values[f.name] = v
    if kind == "alarm" and values["datapoints_to_alarm"] is None:
        values["datapoints_to_alarm"] = values["evaluation_periods"]
    return type(expected)(**values)


def _show(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _adds(adjustment_type: Any, steps: Any, at_least: Any) -> str:
    sizes = [s.scaling_adjustment for s in steps] if isinstance(steps, tuple) else steps
    return f"{adjustment_type} {sizes}" + (f" (at least {at_least})" if at_least is not None else "")


def differences(part: str, where: str, described: dict, spec: scaling.ScalingSpec, want: Any = None) -> list[Issue]:
    """:func:`speech.deploy.scaling.diff` of one described resource against ``spec.<part>`` (or
    ``want``, one item of a part that is a tuple), as issues."""
    want = getattr(spec, part) if want is None else want
    got = observed(part, described, want)
    diffs = scaling.diff(part, want, got)
    issues = []
    if any(d.field.split(".")[0] in STEP_GROUP for d in diffs):
        issues.append(Issue("mismatch", f"{where} adds {_adds(got.adjustment_type, got.steps, got.min_adjustment_magnitude)}, "
                                        f"plan says {_adds(want.adjustment_type, want.steps, want.min_adjustment_magnitude)}: "
                                        f"{spec.rule_of(part, 'steps')}"))
    for d in diffs:
        if d.field.split(".")[0] in STEP_GROUP:
            continue
        key = AWS_KEYS[(KIND[part], d.field)].rsplit(".", 1)[-1]
        issues.append(Issue("mismatch", f"{where} {key} is {d.observed}, plan says {_show(d.expected)} "
                                        f"({spec.rule_of(part, d.field)})"))
    return issues


def in_force(spec, now: datetime | None, deployed: DeployedScaling):
    """``spec`` with its target's MinCapacity the floor in force at ``now`` (default: the current time):
    under daily scheduled floors each action sets MinCapacity when it runs, so a raised window is not
    drift (:func:`speech.deploy.scaling.floor_in_force`, the rule the program's schedule follows).
    Only planned actions that are deployed run; a missing one is reported as missing_scheduled."""
    names = {a.get("ScheduledActionName") for a in deployed.scheduled}
    scheduled = tuple(a for a in getattr(spec, "scheduled", ()) if a.name in names)
    if not scheduled:
        return spec
    when = now or datetime.now(UTC)
    floor, action = scaling.floor_in_force(scheduled, spec.target.min_capacity, when)
    if action is None:
        return spec
    local = when.astimezone(ZoneInfo(action.timezone)).strftime("%H:%M")
    why = (f"the scheduled floor in force at {local} {action.timezone}: {action.name} ({action.schedule}) sets "
           f"MinCapacity {action.min_capacity}, never below the plan's floor {spec.target.min_capacity}; a target "
           "registered inside a raised window keeps the plan's floor until its next scheduled action runs")
    return dataclasses.replace(spec, target=dataclasses.replace(spec.target, min_capacity=floor),
                               why={**spec.why, ("target", "min_capacity"): why})


def _target_issues(spec, d: DeployedScaling) -> list[Issue]:
    """The scalable target: missing, or its numbers against the spec."""
    if d.target is None:
        return [Issue("missing_target", f"no scalable target for {spec.resource_id}; expected min "
                                         f"{spec.target.min_capacity}, max {spec.target.max_capacity}")]
    return differences("target", "scalable target", d.target, spec)


def _policy_issues(spec, d: DeployedScaling, by_role: dict[str, list[dict]],
                   roles: tuple[tuple[str, str, str | None], ...], tracking_part: str,
                   missing_alarm_hint: str = "") -> list[Issue]:
    """Each deployed policy (the first of its role) against its part of the spec, and the alarms
    that invoke a step policy. ``roles``: (name suffix, spec part, alarm part or None)."""
    issues: list[Issue] = []
    for role, part, alarm_part in roles:
        if not by_role[role]:
            continue
        p = by_role[role][0]
        name, want = p["PolicyName"], getattr(spec, part)
        config = "TargetTrackingScalingPolicyConfiguration" if part == tracking_part else "StepScalingPolicyConfiguration"
        if p.get("PolicyType") != want.policy_type or p.get(config) is None:
            issues.append(Issue("mismatch", f"{name} is {p.get('PolicyType')}, plan says {want.policy_type}"))
            continue
        issues += differences(part, name, p, spec)
        if alarm_part is None:
            continue
        alarms = d.alarms.get(name, [])
        if not alarms:
            issues.append(Issue("missing_alarm", f"no CloudWatch alarm invokes {name}{missing_alarm_hint}"))
        for al in alarms:
            issues += differences(alarm_part, f"alarm {al['AlarmName']} (for {name})", al, spec)
    return issues


def compare(plan: PlanArtifact | None, d: DeployedScaling, why_no_plan: str = "",
            now: datetime | None = None) -> list[Issue]:
    """Every difference between the plan and the deployment. ``plan`` None (or a stop verdict)
    means no scaling should exist at all. ``now``: when the deployment was read (default the
    current time), which decides the scheduled floor in force."""
    issues = frozen_issues(d)
    if plan is None or plan.verdict == "stop":
        reason = why_no_plan or ("the plan's verdict is stop" if plan is not None else "no measured plan")
        for p in d.policies:
            issues.append(Issue("unplanned_scaling", f"policy {p['PolicyName']} is deployed but {reason}: no scaling "
                                                      "should exist; remove it (pulumi up) or measure first"))
        for a in d.scheduled:
            issues.append(Issue("unplanned_scaling", f"scheduled action {a.get('ScheduledActionName')} is deployed but "
                                                      f"{reason}: no floor should be scheduled; remove it (pulumi up)"))
        return issues

    spec = scaling.scaling_spec(plan, d.endpoint)
    issues += _target_issues(in_force(spec, now, d), d)

    by_role: dict[str, list[dict]] = {s: [] for s in SUFFIXES}
    for p in d.policies:
        role = scaling.policy_role(p["PolicyName"])
        if role is None:
            issues.append(Issue("orphan_policy", f"policy {p['PolicyName']} ({p.get('PolicyType')}) is not one of the "
                                                 f"planned {', '.join('*' + s for s in SUFFIXES)}: an orphan; delete it"))
        else:
            by_role[role].append(p)
    for role, found in by_role.items():
        if not found:
            issues.append(Issue("missing_policy", f"no *{role} policy is deployed"))
        for extra in found[1:]:
            issues.append(Issue("orphan_policy", f"policy {extra['PolicyName']} duplicates *{role}: an orphan; delete it"))

    issues += _policy_issues(spec, d, by_role, ((scaling.SUFFIX_SCALE_OUT, "scale_out", None),
                                                (scaling.SUFFIX_SCALE_IN, "scale_in", "scale_in_alarm"),
                                                (scaling.SUFFIX_SURGE, "surge", "surge_alarm")), tracking_part="scale_out")
    issues += scheduled_issues(spec, d)
    return issues


def scheduled_issues(spec: scaling.ScalingSpec, d: DeployedScaling) -> list[Issue]:
    """Each planned daily floor deployed under its name with the plan's values, and no other
    scheduled action on the target (it would move the floor the plan sized)."""
    planned = {a.name: a for a in spec.scheduled}
    issues: list[Issue] = []
    seen = set()
    for a in d.scheduled:
        name: Any = a.get("ScheduledActionName")
        want = planned.get(name)
        if want is None:
            issues.append(Issue("orphan_scheduled", f"scheduled action {name} ({a.get('Schedule')}) is not one of the "
                                                    f"plan's floors ({', '.join(sorted(planned)) or 'none planned'}): it "
                                                    "moves the fleet's floor; delete it or re-plan with --schedule-from"))
            continue
        seen.add(name)
        issues += differences("scheduled", f"scheduled action {name}", a, spec, want)
    for name in sorted(set(planned) - seen):
        w = planned[name]
        issues.append(Issue("missing_scheduled", f"no scheduled action {name} ({w.schedule} {w.timezone}: at least "
                                                 f"{w.min_capacity}): the ramp it was derived for finds too few instances; "
                                                 "run pulumi up"))
    return issues


def compare_batch(plan: BatchPlan | None, d: DeployedScaling, why_no_plan: str = "") -> list[Issue]:
    """:func:`compare` for a batch route (an asynchronous endpoint): the target 0..max, the
    ``*-backlog`` target tracking, the ``*-wake`` step and its HasBacklogWithoutCapacity alarm;
    any other policy (a real-time one above all) is unplanned on a batch endpoint."""
    if plan is None or plan.verdict == "stop":
        return compare(None, d, why_no_plan or ("the batch plan's verdict is stop" if plan is not None else ""))
    issues = frozen_issues(d)
    spec = scaling.batch_scaling_spec(plan, d.endpoint)
    issues += _target_issues(spec, d)
    by_role: dict[str, list[dict]] = {s: [] for s in scaling.BATCH_POLICY_SUFFIXES}
    for p in d.policies:
        role = next((s for s in scaling.BATCH_POLICY_SUFFIXES if p["PolicyName"].endswith(s)), None)
        if role is None:
            issues.append(Issue("orphan_policy", f"policy {p['PolicyName']} ({p.get('PolicyType')}) is not one of the "
                                                 f"batch route's {', '.join('*' + s for s in scaling.BATCH_POLICY_SUFFIXES)}: "
                                                 "a batch endpoint scales on its backlog only; delete it"))
        else:
            by_role[role].append(p)
    for role, found in by_role.items():
        if not found:
            issues.append(Issue("missing_policy", f"no *{role} policy is deployed"
                                + (": nothing wakes the endpoint from zero instances" if role == scaling.SUFFIX_WAKE else "")))
        for extra in found[1:]:
            issues.append(Issue("orphan_policy", f"policy {extra['PolicyName']} duplicates *{role}: an orphan; delete it"))
    issues += _policy_issues(spec, d, by_role, ((scaling.SUFFIX_BACKLOG, "backlog", None),
                                                (scaling.SUFFIX_WAKE, "wake", "wake_alarm")), tracking_part="backlog",
                             missing_alarm_hint=": nothing wakes the endpoint from zero")
    return issues
