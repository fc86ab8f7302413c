"""The Kubernetes HorizontalPodAutoscaler's arithmetic (autoscaling/v2), as pure functions.

Written from the controller's documented behaviour (kubernetes.io, "Horizontal Pod Autoscaling",
algorithm details and configurable scaling behavior) and its source
(pkg/controller/podautoscaler/replica_calculator.go, horizontal.go); docs/design.md cites both.
The simulator's ``hpa-v2`` and ``keda`` policies (:mod:`speech.sim.kube`) call these once per sync.

* :func:`desired_replicas`: one Pods metric with an AverageValue target (calcPlainMetricReplicas).
* :func:`external_replicas`: one External metric with an AverageValue target
  (GetExternalPerPodMetricReplicas), what a KEDA ScaledObject's HPA reads.
* :func:`stabilized`: the stabilization windows (stabilizeRecommendationWithBehaviors).
* :func:`scale_up_limit`, :func:`scale_down_limit`, :func:`rate_limited`: behavior policies with
  selectPolicy (convertDesiredReplicasWithBehaviorRate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from speech.errors import SimulationInputError

SYNC_PERIOD_S = 15
"""kube-controller-manager --horizontal-pod-autoscaler-sync-period default: one evaluation per 15 s."""
DEFAULT_TOLERANCE = 0.1
"""--horizontal-pod-autoscaler-tolerance default: no change while |1 - usage / target| <= 0.1."""

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]


@dataclass(frozen=True)
class Replicas:
    """What one metric asks for: ``replicas``, and why (``reason``: the branch of the calculation
    that decided, for the simulator's action log and the tests)."""

    replicas: int
    reason: str
    usage_ratio: float
    """Mean metric of the pods that reported / target (before missing and pending pods were filled in)."""

    def __index__(self) -> int:
        return self.replicas

    def __int__(self) -> int:
        return self.replicas


def within(ratio: float, tolerance: float, up_tolerance: float | None = None, down_tolerance: float | None = None) -> bool:
    """No change: 1 - down <= ratio <= 1 + up, each direction's tolerance ``tolerance`` unless given
    (HPAScalingRules.tolerance, KEP-4951: behavior.scaleUp.tolerance and scaleDown.tolerance)."""
    up = tolerance if up_tolerance is None else up_tolerance
    down = tolerance if down_tolerance is None else down_tolerance
    return 1.0 - down <= ratio <= 1.0 + up


def desired_replicas(metrics: Sequence[float | None], target: float, *, pending: int = 0,
                     tolerance: float = DEFAULT_TOLERANCE, current: int | None = None,
                     up_tolerance: float | None = None, down_tolerance: float | None = None) -> Replicas:
    """The replica count the HPA controller computes for one Pods metric with an AverageValue
    ``target`` (same units as the metrics, > 0).

    ``metrics``: one entry per started (Running) pod, its metric value, or None when the pod has
    reported none yet (a model still loading). ``pending``: pods not yet Running (scheduling, image
    pull), which report nothing. ``current``: the scale's spec.replicas, what a no-op returns
    (default: every pod counted here).

    The rule (replica_calculator.go, calcPlainMetricReplicas):

    1. ``ratio`` = mean of the reported metrics / target. With no pod pending and none missing:
       within the tolerance (|1 - ratio| <= tolerance) keep ``current``, else ceil(ratio x reporting pods).
    2. Otherwise the missing pods count as 0 when ratio >= 1 (a scale-up) and as the target when
       ratio < 1 (a scale-down); pending pods count as 0 on a scale-up (ratio > 1) and are left
       out otherwise. The ratio is recomputed over the pods now counted.
    3. Keep ``current`` when the new ratio is within the tolerance or points the other way than
       the first, or when ceil(new ratio x pods counted) would move against its direction;
       else that count.

    ``up_tolerance`` / ``down_tolerance``: a direction's own tolerance (behavior.scaleUp/scaleDown
    .tolerance, Kubernetes 1.33+), in place of ``tolerance`` on that side of 1.

    Raises SimulationInputError for no reporting pod (the controller reports "did not receive
    metrics for any ready pods" and leaves the scale alone) or a target <= 0."""
    if not target > 0:
        raise SimulationInputError(f"HPA target {target!r} must be > 0 (an AverageValue per pod)")
    if pending < 0:
        raise SimulationInputError(f"pending pods {pending} must be >= 0")
    reported = [float(m) for m in metrics if m is not None]
    missing = len(metrics) - len(reported)
    now = len(metrics) + pending if current is None else int(current)
    if not reported:
        raise SimulationInputError("no pod has reported the metric: the controller leaves the scale alone")
    ratio = sum(reported) / len(reported) / target
    rebalance_pending = pending > 0 and ratio > 1.0
    if not rebalance_pending and missing == 0:
        if within(ratio, tolerance, up_tolerance, down_tolerance):
            return Replicas(now, "within tolerance", ratio)
        return Replicas(math.ceil(ratio * len(reported)), "ratio x ready pods", ratio)
    filled = list(reported)
    if missing:
        filled += [target if ratio < 1.0 else 0.0] * missing
    if rebalance_pending:
        filled += [0.0] * pending
    new_ratio = sum(filled) / len(filled) / target
    if within(new_ratio, tolerance, up_tolerance, down_tolerance):
        return Replicas(now, "within tolerance once missing and pending pods are counted", ratio)
    if (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return Replicas(now, "missing and pending pods reverse the direction", ratio)
    n = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and n > now) or (new_ratio > 1.0 and n < now):
        return Replicas(now, "the count would move against the direction", ratio)
    return Replicas(n, "ratio x pods counted (missing and pending filled in)", ratio)


def external_replicas(total: float, target_per_pod: float, *, status_replicas: int,
                      tolerance: float = DEFAULT_TOLERANCE, up_tolerance: float | None = None,
                      down_tolerance: float | None = None) -> Replicas:
    """One External metric with an AverageValue target (what KEDA's ScaledObject gives its HPA):
    ratio = total / (target x status.replicas), every pod counted whether it serves or not;
    within the tolerance keep status.replicas, else ceil(total / target)
    (replica_calculator.go, GetExternalPerPodMetricReplicas)."""
    if not target_per_pod > 0:
        raise SimulationInputError(f"target {target_per_pod!r} must be > 0 (an AverageValue per pod)")
    if status_replicas < 1:
        raise SimulationInputError(f"status replicas {status_replicas} must be >= 1")
    ratio = total / (target_per_pod * status_replicas)
    if within(ratio, tolerance, up_tolerance, down_tolerance):
        return Replicas(status_replicas, "within tolerance", ratio)
    return Replicas(math.ceil(total / target_per_pod), "total / target", ratio)


# --- behavior ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingPolicy:
    """One of a direction's HPAScalingPolicy entries: at most ``value`` pods (Pods) or percent of
    the count at the period's start (Percent) changed per ``period_s`` seconds."""

    type: PolicyType
    value: int
    period_s: int


@dataclass(frozen=True)
class ScalingRules:
    """spec.behavior.scaleUp or scaleDown: the stabilization window, the policies and which wins."""

    stabilization_window_s: int
    policies: tuple[ScalingPolicy, ...]
    select_policy: SelectPolicy = "Max"
    tolerance: float | None = None
    """This direction's tolerance (Kubernetes 1.33+); None: the controller's (0.1 by default)."""


DEFAULT_SCALE_UP = ScalingRules(0, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)), "Max")
"""The API's default scaleUp: no window, +100 % or +4 pods per 15 s, whichever is more."""
DEFAULT_SCALE_DOWN = ScalingRules(300, (ScalingPolicy("Percent", 100, 15),), "Max")
"""The API's default scaleDown: the highest recommendation over 300 s, then any amount per 15 s."""

Event = tuple[float, int]
"""(seconds, replicas changed: + added, - removed) of one rescale the controller made."""


def stabilized(recommendations: Sequence[tuple[float, int]], now_s: float, desired: int, current: int,
               up: ScalingRules, down: ScalingRules) -> int:
    """The recommendation after the stabilization windows: ``desired`` (this sync's) bounded below
    by the lowest recommendation within the scale-up window and above by the highest within the
    scale-down window, ``current`` when it already lies between. ``recommendations``: earlier
    syncs' (seconds, unstabilized recommendation); a window of w seconds takes the ones after now - w."""
    low = high = desired
    for at, rec in recommendations:
        if at > now_s - up.stabilization_window_s:
            low = min(low, rec)
        if at > now_s - down.stabilization_window_s:
            high = max(high, rec)
    return min(max(current, low), high)


def _changed_within(events: Sequence[Event], now_s: float, period_s: int, sign: int) -> int:
    """Replicas added (sign 1) or removed (sign -1) by the events after now - period_s."""
    return sum(abs(c) for at, c in events if at > now_s - period_s and (c > 0) == (sign > 0) and c != 0)


def scale_up_limit(current: int, events: Sequence[Event], now_s: float, rules: ScalingRules) -> int:
    """The most replicas the scale-up policies allow now: each policy from the count at its
    period's start (current - added + removed within the period), + value pods or x (1 + value %)
    rounded up; the largest (Max) or smallest (Min) of them; Disabled: ``current``."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    out = []
    for p in rules.policies:
        start = current - _changed_within(events, now_s, p.period_s, 1) + _changed_within(events, now_s, p.period_s, -1)
        out.append(start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100.0)))
    return max(out) if rules.select_policy == "Max" else min(out)


def scale_down_limit(current: int, events: Sequence[Event], now_s: float, rules: ScalingRules) -> int:
    """The fewest replicas the scale-down policies allow now: from the count at each period's start,
    - value pods or x (1 - value %) rounded down; the lowest (Max: the largest change) or highest
    (Min) of them; Disabled: ``current``."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    out = []
    for p in rules.policies:
        start = current - _changed_within(events, now_s, p.period_s, 1) + _changed_within(events, now_s, p.period_s, -1)
        out.append(start - p.value if p.type == "Pods" else math.floor(start * (1 - p.value / 100.0)))
    return min(out) if rules.select_policy == "Max" else max(out)


def rate_limited(desired: int, current: int, events: Sequence[Event], now_s: float, *, min_replicas: int,
                 max_replicas: int, up: ScalingRules, down: ScalingRules) -> int:
    """``desired`` within the behavior's rate limits and [min, max]: a scale-up at most to
    min(max_replicas, max(current, scale_up_limit)), a scale-down at least to max(min_replicas,
    min(current, scale_down_limit))."""
    if desired > current:
        return min(desired, max_replicas, max(current, scale_up_limit(current, events, now_s, up)))
    if desired < current:
        return max(desired, min_replicas, min(current, scale_down_limit(current, events, now_s, down)))
    return desired
