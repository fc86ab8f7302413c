"""The spec dataclasses every hosting kind shares (target, target tracking, step policy, alarm,
queue) and the one comparison, :func:`diff`, with its one tolerance :data:`REL_TOL`."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from speech.deploy.scaling.crons import cron_minutes
from speech.schema.aws import (
    INVOCATIONS_METRIC,
    INVOCATIONS_PER_COPY_METRIC,
    NO_CAPACITY_METRIC,
    NO_CAPACITY_STATISTIC,
    SCALABLE_DIMENSION,
    SERVICE_NAMESPACE,
    STEP_SCALING,
    TARGET_TRACKING,
    resource_id,
)

# --- the spec ----------------------------------------------------------------------------------


def rule_meta(rule: str) -> dict:
    return {"rule": rule}


# Names and descriptions identify a resource (the readers find it by them): field(compare=False),
# so :func:`diff` skips them.


@dataclass(frozen=True)
class TargetSpec:
    """The scalable target."""

    resource_id: str = field(metadata=rule_meta("endpoint/<endpoint>/variant/<variant>"))
    service_namespace: str = field(metadata=rule_meta("a SageMaker variant"))
    scalable_dimension: str = field(metadata=rule_meta("a SageMaker variant's instance count"))
    min_capacity: int = field(metadata=rule_meta("plan fleet floor"))
    max_capacity: int = field(metadata=rule_meta("plan fleet size for peak traffic"))


@dataclass(frozen=True)
class TargetTrackingSpec:
    """Scale-out: target tracking on ConcurrentRequestsPerModel at the deployed C_scale_max."""

    name: str = field(compare=False)
    policy_type: str = field(metadata=rule_meta("scale-out tracks a target"))
    metric_type: str = field(metadata=rule_meta(
        "ConcurrentRequestsPerModel at 10 s, the metric Q_max was measured against and the period the plan's "
        "reaction bound assumes"))
    target_value: float = field(metadata=rule_meta("deployed C_scale_max = (1-h) x Q_max x CloudWatch ratio"))
    scale_out_cooldown_s: int = field(metadata=rule_meta("plan scale-out cooldown clamp(T_total/2, 10, 30) s"))
    scale_in_cooldown_s: int = field(metadata=rule_meta(
        "plan scale-in cooldown max(300, 3 x planning T_total) s (inert while scale-in is disabled)"))
    disable_scale_in: bool = field(metadata=rule_meta(
        "scale-in belongs to the alarm-driven step policy at C_scale_min, not to target tracking"))


@dataclass(frozen=True)
class StepSpec:
    """One step adjustment; bounds relative to the alarm threshold (None: unbounded)."""

    scaling_adjustment: int
    lower_bound: float | None = None
    upper_bound: float | None = None


@dataclass(frozen=True)
class StepPolicySpec:
    """A step scaling policy fired by one alarm."""

    name: str = field(compare=False)
    policy_type: str = field(metadata=rule_meta("an alarm fires a step"))
    adjustment_type: str = field(metadata=rule_meta("how a step changes capacity"))
    steps: tuple[StepSpec, ...] = field(metadata=rule_meta("the planned step"))
    min_adjustment_magnitude: int | None = field(metadata=rule_meta("the smallest step"))
    cooldown_s: int = field(metadata=rule_meta("the plan's cooldown for this direction"))
    aggregation: str = field(metadata=rule_meta("per-instance peak concurrency, as measured"))


@dataclass(frozen=True)
class AlarmSpec:
    """A CloudWatch alarm on the variant's ConcurrentRequestsPerModel that fires a step policy."""

    name: str = field(compare=False)
    description: str = field(compare=False)
    namespace: str = field(metadata=rule_meta("SageMaker's endpoint metrics"))
    metric_name: str = field(metadata=rule_meta("the metric Q_max was measured against"))
    dimensions: tuple[tuple[str, str], ...] = field(metadata=rule_meta("this endpoint's variant"))
    statistic: str = field(metadata=rule_meta("per-instance peak concurrency, as measured"))
    period_s: int = field(metadata=rule_meta("plan metric period (high-resolution)"))
    evaluation_periods: int = field(metadata=rule_meta("the plan's window"))
    datapoints_to_alarm: int = field(metadata=rule_meta("every period of the window must breach"))
    threshold: float = field(metadata=rule_meta("the plan's threshold"))
    comparison: str = field(metadata=rule_meta("the side of the threshold that fires"))
    treat_missing_data: str = field(metadata=rule_meta("what a period without datapoints means"))
    wake_guard: float | None = field(default=None, metadata=rule_meta(
        "None: the alarm watches its metric alone. A number: metric math (:func:`guarded_queries`): a period in "
        "which one copy served the invocations, or a request found no copy (NoCapacityInvocationFailures > 0), "
        "reads as this non-breaching value, so the last copy goes only when nothing was invoked and no copy is "
        "removed while a wake is pending"))


@dataclass(frozen=True)
class AlarmQuery:
    """One metric query of a metric-math alarm: a metric with its statistic, or an expression."""

    id: str
    expression: str | None = None
    namespace: str | None = None
    metric_name: str | None = None
    dimensions: tuple[tuple[str, str], ...] = ()
    stat: str | None = None
    return_data: bool = False


GUARD_EXPRESSION = ("IF(FILL(inv, 0) > 0, IF(FILL(ipc, 0) > 0, IF(inv / ipc > 1.5, low, {value}), {value}), "
                    "IF(FILL(nocap, 0) > 0, {value}, 0))")
"""The zero-floor copy scale-in value per period (CloudWatch metric math, IF and FILL;
:func:`speech.deploy.alarm_eval.guarded_periods` evaluates it):

* requests were invoked and two or more copies served them (Invocations / InvocationsPerCopy, the
  copies' count, above 1.5): the per-copy concurrency ``low``, compared with C_scale_min (N -> N-1);
* requests were invoked and one copy served them (or none did: a refused request counted as an
  invocation): the non-breaching guard value: the last copy stays while anything is invoked;
* nothing invoked but a request found no copy (NoCapacityInvocationFailures): the guard value, so a
  wake is not undone;
* nothing invoked, nothing refused: 0, breaching: the last copy goes after a whole window of it.

The alarm treats missing data as breaching, so a period the expression leaves empty (no metric has
a point in the whole range, whether or not FILL fills an all-empty series) also counts as idle."""

GUARDED_METRICS = {"low": None, "inv": (INVOCATIONS_METRIC, "Sum"), "ipc": (INVOCATIONS_PER_COPY_METRIC, "Sum"),
                   "nocap": (NO_CAPACITY_METRIC, NO_CAPACITY_STATISTIC)}
"""The metric queries of :data:`GUARD_EXPRESSION` by id: (metric, statistic); ``low`` is the alarm's own."""


def guarded_queries(alarm: AlarmSpec) -> tuple[AlarmQuery, ...]:
    """The metric queries of an alarm with a :attr:`AlarmSpec.wake_guard`: ``low`` (its metric),
    ``inv``, ``ipc`` and ``nocap`` (:data:`GUARDED_METRICS`, same namespace, dimensions and period) and
    ``guarded`` (the expression the alarm compares, :data:`GUARD_EXPRESSION`)."""
    if alarm.wake_guard is None:
        raise ValueError(f"{alarm.name} watches one metric; it has no guarded queries")
    metrics = [AlarmQuery(id="low", namespace=alarm.namespace, metric_name=alarm.metric_name,
                          dimensions=alarm.dimensions, stat=alarm.statistic)]
    metrics += [AlarmQuery(id=qid, namespace=alarm.namespace, metric_name=m[0], dimensions=alarm.dimensions, stat=m[1])
                for qid, m in GUARDED_METRICS.items() if m is not None]
    return (*metrics,
            AlarmQuery(id="guarded", expression=GUARD_EXPRESSION.format(value=f"{alarm.wake_guard:g}"), return_data=True))


def _lower_keys(value: Any) -> Any:
    # Pulumi inputs are camelCase (metricName), AWS Describe* output PascalCase (MetricName).
    # Readers hand over their own mapping and sequence types (the pack's are not dicts and lists).
    # A dimensions mapping's keys are dimension names, kept as they are.
    if isinstance(value, Mapping):
        return {(k[:1].lower() + k[1:] if isinstance(k, str) else k):
                (dict(v) if k in ("dimensions", "Dimensions") and isinstance(v, Mapping) else _lower_keys(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lower_keys(v) for v in value]
    return value


def read_guarded(queries: Any) -> dict[str, Any]:
    """A metric-math alarm's queries (Pulumi ``metricQueries`` or AWS ``Metrics``) read back into the
    flat fields of :class:`AlarmSpec`: namespace, metric_name, dimensions, statistic, period_s and
    wake_guard. A set of queries that is not :func:`guarded_queries`'s shape reads as wake_guard =
    its expressions (a string), which no planned value equals."""
    qs = [q for q in _lower_keys(queries) if isinstance(q, dict)] if isinstance(queries, (list, tuple)) else []
    metrics: dict[str, dict[str, Any]] = {}
    expressions: dict[str, str] = {}
    for q in qs:
        if q.get("expression"):
            expressions[str(q.get("id"))] = str(q["expression"])
            continue
        raw_stat, raw_metric = q.get("metricStat"), q.get("metric")
        stat: dict[str, Any] = raw_stat if isinstance(raw_stat, dict) else {}
        if not isinstance(raw_metric, dict):
            raw_metric = stat.get("metric")
        metric: dict[str, Any] = raw_metric if isinstance(raw_metric, dict) else {}
        dims = metric.get("dimensions")
        if isinstance(dims, Mapping):
            dims = tuple(sorted((str(k), v) for k, v in dims.items()))
        elif isinstance(dims, list):
            dims = tuple(sorted((str(d.get("name")), d.get("value")) for d in dims if isinstance(d, dict)))
        metrics[str(q.get("id"))] = {
            "namespace": metric.get("namespace"), "metric_name": metric.get("metricName"), "dimensions": dims,
            "statistic": metric.get("stat", stat.get("stat")), "period_s": metric.get("period", stat.get("period"))}
    low = metrics.get("low", {})
    flat = {k: low.get(k) for k in ("namespace", "metric_name", "dimensions", "statistic", "period_s")}
    guard: Any = " ; ".join(f"{k}={v}" for k, v in sorted(expressions.items())) or None
    same = all(
        m is not None and q.get("metric_name") == m[0] and q.get("statistic") == m[1]
        and all(q.get(k) == low.get(k) for k in ("namespace", "dimensions", "period_s"))
        for q, m in ((metrics.get(qid, {}), m) for qid, m in GUARDED_METRICS.items() if qid != "low"))
    if set(expressions) == {"guarded"} and set(metrics) == set(GUARDED_METRICS) and same:
        match = _GUARD_RE.fullmatch(expressions["guarded"])
        values = set(match.groups()) if match else set()
        if len(values) == 1:
            try:
                guard = float(values.pop())
            except ValueError:
                pass
    flat["wake_guard"] = guard
    return flat


_GUARD_RE = re.compile(re.escape(GUARD_EXPRESSION).replace(re.escape("{value}"), r"([-+0-9.eE]+)"))
"""GUARD_EXPRESSION with each ``{value}`` a captured number."""


@dataclass(frozen=True)
class QueueSpec:
    """The container's admission limit."""

    max_depth: int = field(metadata=rule_meta("the container must reject above Q_max, the concurrency the SLO was "
                                          "measured at"))


@dataclass(frozen=True)
class ScheduledActionSpec:
    """A daily or weekly scheduled action on the scalable target: from ``schedule`` on, MinCapacity is
    ``min_capacity`` (Application Auto Scaling PutScheduledAction, whose ScalableTargetAction may set
    "both values or just one"). The floors set no MaxCapacity: the cap is the target's, from the plan,
    so a re-plan that moves it reaches AWS at the next ``pulumi up``, not at the next scheduled action."""

    name: str = field(compare=False)
    schedule: str = field(metadata=rule_meta("cron(M H * * ? *): every day at the floor's local time; cron(M H ? * MON *): "
                                             "every Monday (a weekly schedule's entry)"))
    timezone: str = field(metadata=rule_meta("the schedule's IANA time zone"))
    min_capacity: int = field(metadata=rule_meta("the scheduled floor, never below the plan's floor"))
    max_capacity: int | None = field(default=None, metadata=rule_meta(
        "not set: the target's MaxCapacity (the plan's peak fleet) stays in force"))


def floor_in_force(scheduled: Sequence[ScheduledActionSpec], floor: int, when: datetime) -> tuple[int, ScheduledActionSpec | None]:
    """The scalable target's MinCapacity at ``when`` (an aware datetime) under daily or weekly
    scheduled floors: each action sets the target's MinCapacity when it runs (Application Auto
    Scaling, "How scheduled scaling works"), so the one in force is the latest at or before ``when``'s
    time of day (of the week, for weekly crons) in the schedule's own time zone, and before the
    first, the period's last; never below ``floor`` (the plan's). No schedule: ``floor``. Returns
    (MinCapacity, the action in force).

    The one rule the program (the MinCapacity it registers the target with), the pack, ``bench drift``
    and ``bench validate`` share."""
    if when.tzinfo is None:
        raise ValueError("floor_in_force needs an aware datetime (a naive one has no time zone to convert from)")
    if not scheduled:
        return floor, None
    from zoneinfo import ZoneInfo

    minutes, period = cron_minutes([a.schedule for a in scheduled])
    weekly = period > 1440
    entries = sorted(zip(minutes, scheduled, strict=True), key=lambda e: e[0])
    local = when.astimezone(ZoneInfo(scheduled[0].timezone))
    minute = (local.weekday() * 1440 if weekly else 0) + local.hour * 60 + local.minute
    past = [a for at, a in entries if at <= minute]
    action = past[-1] if past else entries[-1][1]
    return max(floor, action.min_capacity), action


@dataclass(frozen=True)
class ScalingSpec:
    """Everything the program deploys for one scaled variant, every number from the plan."""

    endpoint_name: str
    variant: str
    target: TargetSpec
    scale_out: TargetTrackingSpec
    scale_in: StepPolicySpec
    scale_in_alarm: AlarmSpec
    surge: StepPolicySpec
    surge_alarm: AlarmSpec
    queue: QueueSpec
    scheduled: tuple[ScheduledActionSpec, ...] = ()
    """Scheduled floors (empty: none), by time of day (of the week, for a weekly schedule)."""
    why: dict = field(compare=False, repr=False, default_factory=dict)
    """(part, field) -> the rule with this plan's numbers, for messages (:func:`rule_of`)."""

    @property
    def resource_id(self) -> str:
        return self.target.resource_id

    def rule_of(self, part: str, name: str) -> str:
        """Why ``part.name`` has its value: this plan's rule, else the field's generic rule."""
        return field_rule(self, part, name)


# --- the parts every builder makes the same way ---------------------------------------------------


def variant_target(endpoint_name: str, variant: str, min_capacity: int, max_capacity: int) -> TargetSpec:
    """The scalable target on a variant's instance count (real-time and batch routes)."""
    return TargetSpec(resource_id=resource_id(endpoint_name, variant), service_namespace=SERVICE_NAMESPACE,
                      scalable_dimension=SCALABLE_DIMENSION, min_capacity=min_capacity, max_capacity=max_capacity)


def scale_out_tracking(name: str, metric_type: str, target_value: float, scale_out_cooldown_s: int,
                       scale_in_cooldown_s: int) -> TargetTrackingSpec:
    """Target tracking that only scales out (its scale-in belongs to the step policy behind an alarm)."""
    return TargetTrackingSpec(name=name, policy_type=TARGET_TRACKING, metric_type=metric_type, target_value=target_value,
                              scale_out_cooldown_s=scale_out_cooldown_s, scale_in_cooldown_s=scale_in_cooldown_s,
                              disable_scale_in=True)


def one_step_policy(name: str, scaling_adjustment: int, *, cooldown_s: int, aggregation: str,
                    adjustment_type: str = "ChangeInCapacity", min_adjustment_magnitude: int | None = None) -> StepPolicySpec:
    """A step policy with one step behind one alarm: a removal (negative adjustment) applies at or
    below the alarm threshold (upper bound 0), an addition at or above it (lower bound 0)."""
    step = (StepSpec(scaling_adjustment=scaling_adjustment, upper_bound=0.0) if scaling_adjustment < 0
            else StepSpec(scaling_adjustment=scaling_adjustment, lower_bound=0.0))
    return StepPolicySpec(name=name, policy_type=STEP_SCALING, adjustment_type=adjustment_type, steps=(step,),
                          min_adjustment_magnitude=min_adjustment_magnitude, cooldown_s=cooldown_s, aggregation=aggregation)


def field_rule(spec: Any, part: str, name: str) -> str:
    """Why ``spec.<part>.<name>`` has its value: the plan's rule in ``spec.why``, else the field's
    generic rule (its ``rule`` metadata); "" for a part the spec does not have (None)."""
    top = name.split(".")[0]  # steps.0.scaling_adjustment: the rule of the steps
    for key in ((part, name), (part, top)):
        if key in spec.why:
            return spec.why[key]
    value = getattr(spec, part)
    f = {f.name: f for f in dataclasses.fields(value)}.get(top) if value is not None else None
    return f.metadata.get("rule", "") if f is not None else ""


PART_KIND = {"target": "target", "scale_out": "scale_out", "scale_in": "step", "surge": "step",
             "scale_in_alarm": "alarm", "surge_alarm": "alarm", "queue": "queue",
             "backlog": "backlog", "wake": "step", "wake_alarm": "alarm", "client": "client",
             "scheduled": "scheduled"}
"""Each part of :class:`ScalingSpec` by the kind of resource it describes (readers map kinds to
their own property names)."""


# --- the one comparison ------------------------------------------------------------------------

REL_TOL = 1e-6
"""One tolerance for every float in the scaling state (relative, with the same absolute floor).

Every path carries the plan's IEEE doubles unchanged: Pulumi property values are JSON numbers,
Application Auto Scaling and CloudWatch store and return doubles. So an honest deployment
compares equal to within a few ulps, and any slack only has to absorb a value that went through
a short decimal rendering (7 significant digits: a console edit, a float32 hop). 1e-6 does that;
the 1e-4 ``bench`` used before would let a 10 000-request threshold move by one request unseen,
and no hand edit a person makes (25 -> 25.5 is 2e-2) comes near 1e-6."""


def number(value: Any) -> float | None:
    """A number from an int, a float or a numeric string (Pulumi sends some numbers as strings);
    None for anything else, booleans included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def close(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are numbers equal within :data:`REL_TOL`."""
    x, y = number(a), number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=REL_TOL, abs_tol=REL_TOL)


def same(observed: Any, expected: Any) -> bool:
    """One value of the scaling state: numbers within :data:`REL_TOL` (numeric strings count),
    booleans also as 'true'/'false' strings, None only equals None, the rest exactly."""
    if expected is None or observed is None:
        return observed is expected
    if isinstance(expected, bool):
        return observed is expected or (isinstance(observed, str) and observed.lower() == str(expected).lower())
    if isinstance(expected, (int, float)):
        return close(observed, expected)
    return observed == expected


@dataclass(frozen=True)
class Difference:
    """One value of the observed scaling state that is not the desired one."""

    part: str
    """Which part of :class:`ScalingSpec`: target, scale_out, scale_in, scale_in_alarm, surge, surge_alarm, queue."""
    field: str
    """The spec field (``steps`` for a different number of steps, ``steps.0.scaling_adjustment`` inside one)."""
    observed: Any
    expected: Any


def diff(part: str, expected: Any, observed: Any) -> list[Difference]:
    """Every compared field of ``observed`` that differs from ``expected`` (same spec class).

    Readers build ``observed`` from what they see, with whatever values they found there (an
    unknown marker, a string, None when absent); fields marked identity (names, descriptions)
    are not compared. Steps are compared step by step when their number agrees, else as one
    difference in their number.
    """
    out: list[Difference] = []
    for f in dataclasses.fields(expected):
        if not f.compare:
            continue
        want, got = getattr(expected, f.name), getattr(observed, f.name)
        if isinstance(want, tuple) and want and dataclasses.is_dataclass(want[0]):
            if not isinstance(got, tuple) or len(got) != len(want):
                out.append(Difference(part, f.name, got, want))
                continue
            for i, (w, g) in enumerate(zip(want, got, strict=True)):
                out += [dataclasses.replace(d, field=f"{f.name}.{i}.{d.field}") for d in diff(part, w, g)]
        elif not same(got, want):
            out.append(Difference(part, f.name, got, want))
    return out


