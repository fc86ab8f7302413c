"""Compare what is deployed (scalable target, policies, alarms) with what a plan says should be.

Shared by ``drift`` (plan rebuilt from the stack config) and ``validate`` (plan from a file), so
the two never judge the same deployment differently. Pure: works on the data read by
:func:`bench.aws.read_deployed`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from speech.artifacts import PlanArtifact
from speech.scaling import SCALE_OUT_METRIC_TYPE, surge_adjustment

from . import aws
from .aws import DeployedScaling

SUFFIXES = ("-scale-out", "-scale-in", "-surge")


@dataclass(frozen=True)
class Issue:
    kind: str
    """frozen | orphan_policy | missing_policy | mismatch | missing_target | unplanned_scaling | missing_alarm"""
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def _close(a: Optional[float], b: float) -> bool:
    return a is not None and abs(float(a) - b) <= max(1e-6, 1e-4 * abs(b))


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


def _policy_role(name: str) -> Optional[str]:
    for s in SUFFIXES:
        if name.endswith(s):
            return s
    return None


def compare(plan: Optional[PlanArtifact], d: DeployedScaling, why_no_plan: str = "") -> list[Issue]:
    """Every difference between the plan and the deployment. ``plan`` None (or a stop verdict)
    means no scaling should exist at all."""
    issues = frozen_issues(d)
    if plan is None or plan.verdict == "stop":
        reason = why_no_plan or ("the plan's verdict is stop" if plan is not None else "no measured plan")
        for p in d.policies:
            issues.append(Issue("unplanned_scaling", f"policy {p['PolicyName']} is deployed but {reason}: no scaling "
                                                      "should exist; remove it (pulumi up) or measure first"))
        return issues

    if d.target is None:
        issues.append(Issue("missing_target", f"no scalable target for {aws.resource_id(d.endpoint)}; expected min "
                                              f"{plan.fleet.min_instances}, max {plan.fleet.max_instances}"))
    else:
        for key, want in (("MinCapacity", plan.fleet.min_instances), ("MaxCapacity", plan.fleet.max_instances)):
            if int(d.target.get(key, -1)) != want:
                issues.append(Issue("mismatch", f"scalable target {key} is {d.target.get(key)}, plan says {want}"))

    by_role: dict[str, list[dict]] = {s: [] for s in SUFFIXES}
    for p in d.policies:
        role = _policy_role(p["PolicyName"])
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

    t = plan.thresholds
    if by_role["-scale-out"]:
        p = by_role["-scale-out"][0]
        name = p["PolicyName"]
        cfg = p.get("TargetTrackingScalingPolicyConfiguration")
        if p.get("PolicyType") != "TargetTrackingScaling" or cfg is None:
            issues.append(Issue("mismatch", f"{name} is {p.get('PolicyType')}, plan says TargetTrackingScaling"))
        else:
            if not _close(cfg.get("TargetValue"), t.scaling_target_value):
                ratio = t.scaling_target_value / t.c_scale_max if t.c_scale_max else 1.0
                issues.append(Issue("mismatch", f"{name} TargetValue is {cfg.get('TargetValue')} (CloudWatch units), plan "
                                                f"says {t.scaling_target_value:g} = C_scale_max {t.c_scale_max:g} client "
                                                f"requests x CloudWatch/client ratio {ratio:g}"))
            if cfg.get("ScaleOutCooldown") != plan.cooldowns.scale_out_s:
                issues.append(Issue("mismatch", f"{name} ScaleOutCooldown is {cfg.get('ScaleOutCooldown')}, plan says "
                                                f"{plan.cooldowns.scale_out_s}"))
            if cfg.get("DisableScaleIn") is not True:
                issues.append(Issue("mismatch", f"{name} DisableScaleIn is {cfg.get('DisableScaleIn')}, plan says true "
                                                "(scale-in belongs to the *-scale-in step policy)"))
            metric = (cfg.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
            if metric != SCALE_OUT_METRIC_TYPE:
                issues.append(Issue("mismatch", f"{name} tracks {metric or cfg.get('CustomizedMetricSpecification')}, "
                                                f"plan says {SCALE_OUT_METRIC_TYPE} (10 s, as the reaction bound assumes)"))
    surge = surge_adjustment(plan)
    a = plan.alarms
    for role, cooldown, threshold, op, periods in (
        ("-scale-in", plan.cooldowns.scale_in_s, t.scale_in_threshold, "LessThanOrEqualToThreshold", a.scale_in_evaluation_periods),
        ("-surge", plan.cooldowns.scale_out_s, a.saturation_concurrency, "GreaterThanOrEqualToThreshold", a.datapoints_to_alarm),
    ):
        if not by_role[role]:
            continue
        p = by_role[role][0]
        name = p["PolicyName"]
        cfg = p.get("StepScalingPolicyConfiguration")
        if p.get("PolicyType") != "StepScaling" or cfg is None:
            issues.append(Issue("mismatch", f"{name} is {p.get('PolicyType')}, plan says StepScaling"))
            continue
        if cfg.get("Cooldown") != cooldown:
            issues.append(Issue("mismatch", f"{name} Cooldown is {cfg.get('Cooldown')}, plan says {cooldown}"))
        adjustments = [s.get("ScalingAdjustment", 0) for s in cfg.get("StepAdjustments", [])]
        if role == "-scale-in" and adjustments != [-1]:
            issues.append(Issue("mismatch", f"{name} steps {adjustments}, plan says one step of -1 instance"))
        if role == "-surge":
            # Sized by the same function the program uses (speech.scaling.surge_adjustment).
            got = (cfg.get("AdjustmentType"), adjustments, cfg.get("MinAdjustmentMagnitude"))
            want = ("PercentChangeInCapacity", [surge.percent], surge.min_instances_added)
            if got != want:
                issues.append(Issue("mismatch", f"{name} adds {got[0]} {got[1]} (at least {got[2]}), plan says "
                                                f"{want[0]} [{surge.percent}] (at least {surge.min_instances_added}): "
                                                f"surge_ratio x Q_max / C_scale_max"))
        alarms = d.alarms.get(name, [])
        if not alarms:
            issues.append(Issue("missing_alarm", f"no CloudWatch alarm invokes {name}"))
        for al in alarms:
            where = f"alarm {al['AlarmName']} (for {name})"
            if not _close(al.get("Threshold"), threshold):
                issues.append(Issue("mismatch", f"{where} threshold is {al.get('Threshold')}, plan says {threshold:g}"))
            for key, want in (("MetricName", aws.METRIC), ("Statistic", "Maximum"), ("ComparisonOperator", op),
                              ("Period", a.metric_period_s), ("EvaluationPeriods", periods)):
                if al.get(key) != want:
                    issues.append(Issue("mismatch", f"{where} {key} is {al.get(key)}, plan says {want}"))
            dta = al.get("DatapointsToAlarm")
            if dta is not None and dta != periods:
                issues.append(Issue("mismatch", f"{where} DatapointsToAlarm is {dta}, plan says {periods} (every period "
                                                "must breach)"))
    return issues
