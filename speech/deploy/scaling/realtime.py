"""The instance scaling spec of a real-time endpoint variant, from its plan (:func:`scaling_spec`):
target tracking on concurrency, the scale-in step and alarm, the surge step and alarm, queue depth."""

from __future__ import annotations

import math
from dataclasses import dataclass

from speech.deploy.scaling.crons import floor_cron
from speech.deploy.scaling.spec import (
    AlarmSpec,
    QueueSpec,
    ScalingSpec,
    ScheduledActionSpec,
    one_step_policy,
    scale_out_tracking,
    variant_target,
)
from speech.schema.aws import (
    ALARM_STATISTIC,
    AVERAGE_STATISTIC,
    METRIC,
    METRIC_NAMESPACE,
    PERCENT_CHANGE,
    SCALE_IN_INSTANCES,
    SCALE_OUT_METRIC_TYPE,
    SUFFIX_FLOOR,
    SUFFIX_SCALE_IN,
    SUFFIX_SCALE_OUT,
    SUFFIX_SURGE,
    VARIANT,
    metric_dimensions,
)
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS


@dataclass(frozen=True)
class SurgeStep:
    percent: int
    """PercentChangeInCapacity when an instance reaches Q_max."""
    min_instances_added: int
    """MinAdjustmentMagnitude: never fewer than this many at once."""


def surge_adjustment(plan: PlanArtifact) -> SurgeStep:
    """Instances at Q_max reject the rest (queue_max_depth), so true demand is unknown: assume the
    planned surge is still coming on top and grow by surge_ratio x Q_max / C_scale_max, the factor
    that brings saturated instances back to C_scale_max; at least what the smallest safe fleet
    would add, so a small fleet adds several instances, not one."""
    factor = plan.inputs.surge_ratio * plan.q_max / plan.thresholds.c_scale_max
    grow = factor - 1.0
    return SurgeStep(
        percent=max(1, math.ceil(100 * grow - EPS)),
        min_instances_added=max(2, math.ceil(plan.fleet.min_safe_instances * grow - EPS)),
    )


def surge_cooldown_s(plan: PlanArtifact) -> int:
    """Seconds the surge policy waits after it fired: at least the measured T_total (whole seconds).

    The instances a surge adds serve only after the measured scale-out time. Until then the
    saturated instances keep the surge alarm in ALARM, and Application Auto Scaling applies a step
    policy again for every breach once its cooldown has ended, each time as a percentage of the
    desired count already raised. A cooldown shorter than the start-up (the scale-out cooldown,
    10-30 s) would so compound the surge to max_instances before the first new instance serves.
    Within the cooldown a repeated breach adds only what a larger step would add beyond the
    capacity already added, so one surge per start-up is what this buys; target tracking keeps
    adding in between at its own, proportional pace."""
    return max(plan.cooldowns.scale_out_s, math.ceil(plan.t_total.measured_s - EPS))


def scale_in_step(plan: PlanArtifact) -> tuple[str, int, int | None]:
    """(adjustment type, scaling adjustment, MinAdjustmentMagnitude) of the scale-in step: the
    plan's share of the fleet (PercentChangeInCapacity, negative), at least
    :data:`SCALE_IN_INSTANCES`; a plan written before shares existed removes one instance
    (ChangeInCapacity)."""
    if plan.scale_in is None:
        return "ChangeInCapacity", -SCALE_IN_INSTANCES, None
    return PERCENT_CHANGE, plan.scale_in.step_percent, max(SCALE_IN_INSTANCES, plan.scale_in.min_removed)


def _removes(plan: PlanArtifact) -> str:
    kind, adjustment, least = scale_in_step(plan)
    if kind == PERCENT_CHANGE:
        return f"remove {-adjustment}% of the fleet (at least {least})"
    return "remove one instance" if -adjustment == 1 else f"remove {-adjustment} instances"


def floor_actions(plan: PlanArtifact, endpoint_name: str) -> tuple[ScheduledActionSpec, ...]:
    """The plan's floors as scheduled actions ``<endpoint>-floor-HHMM`` (``<endpoint>-floor-MON-HHMM``
    for a weekly schedule's): every day (or every such weekday) at the floor's local time (cron in
    the schedule's time zone) the target's MinCapacity becomes the floor; its MaxCapacity stays the
    plan's (not set by the actions). The plan already clamped each floor into [fleet floor, max]."""
    if plan.schedule is None:
        return ()
    return tuple(
        ScheduledActionSpec(
            name=f"{endpoint_name}{SUFFIX_FLOOR}{f.when.replace(' ', '-').replace(':', '')}",
            schedule=floor_cron(f.minute_of_day, f.weekday),
            timezone=plan.schedule.timezone,
            min_capacity=f.min_instances,
        )
        for f in plan.schedule.floors
    )


def scale_in_alarm(plan: PlanArtifact, endpoint_name: str, variant: str) -> AlarmSpec:
    """Every instance at or below C_scale_min for the whole scale-in window (minutes): remove the
    plan's share. Missing data breaches: an idle variant publishes nothing, and an idle fleet
    should shrink to its floor."""
    a, t = plan.alarms, plan.thresholds
    return AlarmSpec(
        name=f"{endpoint_name}{SUFFIX_SCALE_IN}",
        description=f"every instance at or below C_scale_min ({t.scale_in_threshold:g}) for "
        f"{a.scale_in_evaluation_periods} x {a.metric_period_s} s: {_removes(plan)}",
        namespace=METRIC_NAMESPACE,
        metric_name=METRIC,
        dimensions=tuple(sorted(metric_dimensions(endpoint_name, variant).items())),
        statistic=ALARM_STATISTIC,
        period_s=a.metric_period_s,
        evaluation_periods=a.scale_in_evaluation_periods,
        datapoints_to_alarm=a.scale_in_evaluation_periods,
        threshold=t.scale_in_threshold,
        comparison="LessThanOrEqualToThreshold",
        treat_missing_data="breaching",
    )


def surge_statistic(plan: PlanArtifact) -> str:
    """The surge alarm's statistic (and its step's aggregation): the Maximum, an instance at Q_max;
    the Average where the plan sets ``surge_average_share``."""
    return ALARM_STATISTIC if plan.inputs.surge_average_share is None else AVERAGE_STATISTIC


def surge_threshold(plan: PlanArtifact) -> float:
    """The surge alarm's threshold, CloudWatch units: Q_max (saturation) on the Maximum, or
    ``surge_average_share`` x Q_max on the Average."""
    share = plan.inputs.surge_average_share
    q = plan.alarms.saturation_concurrency
    return q if share is None else round(share * q, 4)


def tracking_target(plan: PlanArtifact) -> float:
    """Target tracking's value, CloudWatch units: the plan's C_scale_max; Q_max under an Average
    surge alarm, where the gate holds concurrency at or below it, so target tracking never acts and
    the Average step alone answers (speech.schema.plan_inputs.PlanInputs.surge_average_share)."""
    if plan.inputs.surge_average_share is None:
        return plan.thresholds.scaling_target_value
    return plan.alarms.saturation_concurrency


def surge_alarm(plan: PlanArtifact, endpoint_name: str, variant: str, step: SurgeStep) -> AlarmSpec:
    """An instance reached Q_max (it already rejects): the emergency, fired after the plan's
    datapoints to alarm; or, with ``surge_average_share``, the instances' Average reached that share
    of Q_max. Missing data does not breach: nothing published is no surge."""
    a = plan.alarms
    share = plan.inputs.surge_average_share
    what = (f"an instance reached Q_max ({a.saturation_concurrency:g})" if share is None else
            f"the instances' average reached {share:g} x Q_max ({surge_threshold(plan):g})")
    return AlarmSpec(
        name=f"{endpoint_name}{SUFFIX_SURGE}",
        description=f"{what}: add {step.percent}% (at least {step.min_instances_added}) at once",
        namespace=METRIC_NAMESPACE,
        metric_name=METRIC,
        dimensions=tuple(sorted(metric_dimensions(endpoint_name, variant).items())),
        statistic=surge_statistic(plan),
        period_s=a.metric_period_s,
        evaluation_periods=a.datapoints_to_alarm,
        datapoints_to_alarm=a.datapoints_to_alarm,
        threshold=surge_threshold(plan),
        comparison="GreaterThanOrEqualToThreshold",
        treat_missing_data="notBreaching",
    )


def _average_surge_reasons(plan: PlanArtifact) -> dict[tuple[str, str], str]:
    """Why each setting differs when the surge alarm reads the Average (``inputs.surge_average_share``):
    the reasons that replace :func:`scaling_spec`'s, none when the plan keeps the Maximum."""
    share = plan.inputs.surge_average_share
    if share is None:
        return {}
    avg = (f"surge_average_share {share:g}: at floors sized at the SLO rate some instance "
           "refuses in almost every period, which holds the Maximum at Q_max; the Average rises only when the "
           "traffic outgrows the fleet")
    return {
        ("scale_out", "target_value"): (f"Q_max {plan.q_max} x CloudWatch ratio: the gate holds concurrency at or "
                                        f"below it, so target tracking never acts ({avg})"),
        ("surge_alarm", "threshold"): f"{share:g} x deployed Q_max ({avg})",
        ("surge_alarm", "statistic"): f"Average over the instances and the period ({avg})",
        ("surge", "aggregation"): "the alarm's statistic (Average)",
    }


def scaling_spec(plan: PlanArtifact, endpoint_name: str, variant: str = VARIANT) -> ScalingSpec:
    """The desired scaling state of ``endpoint_name``/``variant`` under ``plan``.

    Scale-out: target tracking at ``thresholds.scaling_target_value``, scale-in disabled there.
    Scale-in: a -1 step behind :func:`scale_in_alarm`, with the long cooldown. Surge: a
    percentage step sized by :func:`surge_adjustment` behind :func:`surge_alarm`, with
    :func:`surge_cooldown_s`. Queue depth: the plan's ``queue_max_depth``.
    """
    t, c, a = plan.thresholds, plan.cooldowns, plan.alarms
    step = surge_adjustment(plan)
    in_kind, in_adjustment, in_least = scale_in_step(plan)
    period = a.metric_period_s
    sizing = (f"speech.deploy.scaling.surge_adjustment: surge_ratio {plan.inputs.surge_ratio:g} x Q_max {plan.q_max} / "
              f"C_scale_max {t.c_scale_max:g}")
    periods_in = (f"plan scale-in window max(3, ceil(300 s / {period} s)) periods: concurrency must stay low for "
                  "minutes before an instance goes")
    periods_surge = (f"plan datapoints to alarm {a.datapoints_to_alarm}, part of the reaction bound in the planning "
                     "T_total")
    c_min = f"deployed C_scale_min = (1-2h) x Q_max {plan.q_max} x CloudWatch ratio"
    why = {
        ("scale_out", "target_value"): f"deployed C_scale_max = (1-h) x Q_max {plan.q_max} x CloudWatch ratio",
        ("scale_in", "steps"): (f"{_removes(plan)} below C_scale_min: removing k of N lifts the rest by N/(N-k), at "
                                f"most C_scale_max / C_scale_min" if plan.scale_in else
                                f"one step of -{SCALE_IN_INSTANCES} instance(s) below C_scale_min"),
        ("scale_in", "adjustment_type"): ("scale-in removes a share of the fleet, so it follows the tide at any size"
                                          if in_kind == PERCENT_CHANGE else "scale-in removes whole instances"),
        ("scale_in", "min_adjustment_magnitude"): "a step removes at least one instance; the floor (>= min safe fleet) "
                                                  "keeps one removal safe",
        ("scale_in", "cooldown_s"): "plan scale-in cooldown (seed max(300, 3 x planning T_total) s; at least the "
                                    "window and one planning T_total)",
        ("surge", "adjustment_type"): "the surge grows the fleet by a fraction of its size",
        ("surge", "steps"): f"+{step.percent}% from {sizing}",
        ("surge", "min_adjustment_magnitude"): f"at least what the smallest safe fleet "
                                               f"({plan.fleet.min_safe_instances}) would add, from {sizing}",
        ("surge", "cooldown_s"): f"max(scale-out cooldown, measured T_total {plan.t_total.measured_s:g} s): one surge "
                                 "per start-up, not one per cooldown while the new instances start",
        ("scale_in_alarm", "threshold"): c_min,
        ("scale_in_alarm", "comparison"): "an instance at exactly C_scale_min is already below the scale-out band",
        ("scale_in_alarm", "evaluation_periods"): periods_in,
        ("scale_in_alarm", "datapoints_to_alarm"): f"every one of the {a.scale_in_evaluation_periods} periods must "
                                                   f"breach ({periods_in})",
        ("scale_in_alarm", "treat_missing_data"): "an idle variant publishes nothing; an idle fleet shrinks to its floor",
        ("surge_alarm", "threshold"): f"deployed Q_max = {plan.q_max} x CloudWatch ratio (saturation)",
        ("surge_alarm", "comparison"): "an instance at Q_max already rejects (queue_max_depth), so reaching it is "
                                       "the emergency",
        ("surge_alarm", "evaluation_periods"): periods_surge,
        ("surge_alarm", "datapoints_to_alarm"): f"every one of the {a.datapoints_to_alarm} periods must breach "
                                                f"({periods_surge})",
        ("surge_alarm", "treat_missing_data"): "no datapoints is no surge",
        ("queue", "max_depth"): f"the container must reject above Q_max {plan.q_max}, the concurrency the SLO was "
                                "measured at",
    }
    why.update(_average_surge_reasons(plan))
    why[("scheduled", "min_capacity")] = "the plan's scheduled floor: instances in service one planning T_total ahead of the ramp"
    why[("scheduled", "schedule")] = "every day at the floor's local time"
    for alarm in ("scale_in_alarm", "surge_alarm"):
        why[(alarm, "period_s")] = f"plan metric period (high-resolution {period} s)"
    return ScalingSpec(
        endpoint_name=endpoint_name,
        variant=variant,
        target=variant_target(endpoint_name, variant, plan.fleet.min_instances, plan.fleet.max_instances),
        scale_out=scale_out_tracking(f"{endpoint_name}{SUFFIX_SCALE_OUT}", SCALE_OUT_METRIC_TYPE, tracking_target(plan),
                                     c.scale_out_s, c.scale_in_s),
        scale_in=one_step_policy(f"{endpoint_name}{SUFFIX_SCALE_IN}", in_adjustment, cooldown_s=c.scale_in_s,
                                 aggregation=ALARM_STATISTIC, adjustment_type=in_kind, min_adjustment_magnitude=in_least),
        scale_in_alarm=scale_in_alarm(plan, endpoint_name, variant),
        surge=one_step_policy(f"{endpoint_name}{SUFFIX_SURGE}", step.percent, adjustment_type="PercentChangeInCapacity",
                              min_adjustment_magnitude=step.min_instances_added, cooldown_s=surge_cooldown_s(plan),
                              aggregation=surge_statistic(plan)),
        surge_alarm=surge_alarm(plan, endpoint_name, variant, step),
        queue=QueueSpec(max_depth=plan.queue_max_depth),
        scheduled=floor_actions(plan, endpoint_name),
        why=why,
    )


