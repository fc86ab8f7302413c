"""The scaling spec: the complete desired scaling state of one endpoint variant, from a plan
(docs/design.md §5).

Pure (no pulumi, no boto3, no I/O). Four readers use it and nothing else:

- the program (:mod:`speech.infra.components.autoscaling`) renders it into resources;
- the policy pack (:mod:`policy.rules`) normalizes Pulumi resource properties into the same shape;
- ``bench drift`` / ``bench validate`` (:mod:`bench.scaling_check`) normalize AWS ``Describe*``
  output into the same shape;
- the simulator (:func:`speech.sim.scaling_numbers`) reads its numbers from it.

The pack and bench compare with :func:`diff` (one tolerance, :data:`REL_TOL`) and render its
:class:`Difference` values into their own messages. Adding a policy or changing a threshold is an
edit here only. The AWS names and constants (metric, namespaces, dimensions, variant, resource id,
policy-name suffixes) are defined here once.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    pass

# --- the spec ----------------------------------------------------------------------------------


def _meta(rule: str) -> dict:
    return {"rule": rule}


IDENTITY = dict(compare=False)
"""Names and descriptions identify a resource (the readers find it by them); :func:`diff` skips
them."""


@dataclass(frozen=True)
class TargetSpec:
    """The scalable target."""

    resource_id: str = field(metadata=_meta("endpoint/<endpoint>/variant/<variant>"))
    service_namespace: str = field(metadata=_meta("a SageMaker variant"))
    scalable_dimension: str = field(metadata=_meta("a SageMaker variant's instance count"))
    min_capacity: int = field(metadata=_meta("plan fleet floor"))
    max_capacity: int = field(metadata=_meta("plan fleet size for peak traffic"))


@dataclass(frozen=True)
class TargetTrackingSpec:
    """Scale-out: target tracking on ConcurrentRequestsPerModel at the deployed C_scale_max."""

    name: str = field(**IDENTITY)
    policy_type: str = field(metadata=_meta("scale-out tracks a target"))
    metric_type: str = field(metadata=_meta(
        "ConcurrentRequestsPerModel at 10 s, the metric Q_max was measured against and the period the plan's "
        "reaction bound assumes"))
    target_value: float = field(metadata=_meta("deployed C_scale_max = (1-h) x Q_max x CloudWatch ratio"))
    scale_out_cooldown_s: int = field(metadata=_meta("plan scale-out cooldown clamp(T_total/2, 10, 30) s"))
    scale_in_cooldown_s: int = field(metadata=_meta(
        "plan scale-in cooldown max(300, 3 x planning T_total) s (inert while scale-in is disabled)"))
    disable_scale_in: bool = field(metadata=_meta(
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

    name: str = field(**IDENTITY)
    policy_type: str = field(metadata=_meta("an alarm fires a step"))
    adjustment_type: str = field(metadata=_meta("how a step changes capacity"))
    steps: tuple[StepSpec, ...] = field(metadata=_meta("the planned step"))
    min_adjustment_magnitude: int | None = field(metadata=_meta("the smallest step"))
    cooldown_s: int = field(metadata=_meta("the plan's cooldown for this direction"))
    aggregation: str = field(metadata=_meta("per-instance peak concurrency, as measured"))


@dataclass(frozen=True)
class AlarmSpec:
    """A CloudWatch alarm on the variant's ConcurrentRequestsPerModel that fires a step policy."""

    name: str = field(**IDENTITY)
    description: str = field(**IDENTITY)
    namespace: str = field(metadata=_meta("SageMaker's endpoint metrics"))
    metric_name: str = field(metadata=_meta("the metric Q_max was measured against"))
    dimensions: tuple[tuple[str, str], ...] = field(metadata=_meta("this endpoint's variant"))
    statistic: str = field(metadata=_meta("per-instance peak concurrency, as measured"))
    period_s: int = field(metadata=_meta("plan metric period (high-resolution)"))
    evaluation_periods: int = field(metadata=_meta("the plan's window"))
    datapoints_to_alarm: int = field(metadata=_meta("every period of the window must breach"))
    threshold: float = field(metadata=_meta("the plan's threshold"))
    comparison: str = field(metadata=_meta("the side of the threshold that fires"))
    treat_missing_data: str = field(metadata=_meta("what a period without datapoints means"))


@dataclass(frozen=True)
class QueueSpec:
    """The container's admission limit."""

    max_depth: int = field(metadata=_meta("the container must reject above Q_max, the concurrency the SLO was "
                                          "measured at"))


@dataclass(frozen=True)
class ScheduledActionSpec:
    """A daily scheduled action on the scalable target: from ``schedule`` on, capacity within
    [min_capacity, max_capacity] (Application Auto Scaling PutScheduledAction)."""

    name: str = field(**IDENTITY)
    schedule: str = field(metadata=_meta("cron(M H * * ? *): every day at the floor's local time"))
    timezone: str = field(metadata=_meta("the schedule's IANA time zone"))
    min_capacity: int = field(metadata=_meta("the scheduled floor, never below the plan's floor"))
    max_capacity: int = field(metadata=_meta("plan fleet size for peak traffic (unchanged by the schedule)"))


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
    """Daily scheduled floors (empty: none), by time of day."""
    why: dict = field(compare=False, repr=False, default_factory=dict)
    """(part, field) -> the rule with this plan's numbers, for messages (:func:`rule_of`)."""

    @property
    def resource_id(self) -> str:
        return self.target.resource_id

    def rule_of(self, part: str, name: str) -> str:
        """Why ``part.name`` has its value: this plan's rule, else the field's generic rule."""
        return _rule_of(self, part, name)


def _rule_of(spec: Any, part: str, name: str) -> str:
    top = name.split(".")[0]  # steps.0.scaling_adjustment: the rule of the steps
    for key in ((part, name), (part, top)):
        if key in spec.why:
            return spec.why[key]
    f = {f.name: f for f in dataclasses.fields(getattr(spec, part))}.get(top)
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


