"""speech.sim.hpa against the Kubernetes controller's own cases.

The replica cases are those of pkg/controller/podautoscaler/replica_calculator_test.go (the
controller's unit tests), translated to one Pods metric with an AverageValue target. Their CPU cases
use a request of 1.0 CPU per pod, so a utilization target of X % is an average value of X % of the
request and a pod the controller sets aside as not ready is one of ``pending``. The behavior cases
are the documented defaults and the worked example of kubernetes.io's "Horizontal Pod Autoscaling"
page (scaling policies)."""

from __future__ import annotations

import pytest

from speech.errors import SimulationInputError
from speech.sim.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    ScalingPolicy,
    ScalingRules,
    desired_replicas,
    external_replicas,
    rate_limited,
    scale_down_limit,
    scale_up_limit,
    stabilized,
)


@pytest.mark.parametrize(("case", "metrics", "target", "pending", "want"), [
    # TestReplicaCalcScaleUpCM: mean 20000 against 15000 on 3 pods
    ("scale up", [20000, 10000, 30000], 15000, 0, 4),
    # TestReplicaCalcScaleDownCM
    ("scale down", [12000] * 5, 20000, 0, 3),
    # TestReplicaCalcToleranceCM: mean 20666 is within 10 % of 20000
    ("tolerance", [20000, 21000, 21000], 20000, 0, 3),
    # TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown: a Running pod counts with its metric
    ("running pods count", [50000, 15000, 30000], 15000, 0, 7),
    # TestReplicaCalcMissingMetrics: a scale-down; the 2 pods without a metric count at the target
    ("missing on scale-down", [400, 95, None, None], 1000, 0, 3),
    # TestReplicaCalcMissingMetricsNoChangeGt: a scale-up whose missing pod at 0 brings it within tolerance
    ("missing on scale-up", [1900, None], 1000, 0, 2),
    # TestReplicaCalcMissingMetricsNoChangeLt: missing at the target leaves ceil(0.8 x 2) = 2
    ("missing keeps the count", [600, None], 1000, 0, 2),
    # TestReplicaCalcScaleUpUnreadyLessScale: the pod not ready counts as 0 on a scale-up
    ("pending on scale-up", [500, 700], 300, 1, 4),
    # TestReplicaCalcScaleUpUnreadyNoScale: with the 2 pods at 0 the ratio falls below 1: no change
    ("pending reverses", [400], 300, 2, 3),
    # TestReplicaCalcMissingMetricsUnreadyScaleUp: one pending, one missing, both 0
    ("pending and missing", [2000, None], 500, 1, 4),
    # TestReplicaCalcScaleDownExcludeUnscheduledPods: pending pods left out of a scale-down
    ("pending left out of scale-down", [100], 500, 4, 1),
])
def test_the_controllers_cases(case, metrics, target, pending, want):
    got = desired_replicas(metrics, target, pending=pending)
    assert got.replicas == want, (case, got)


def test_the_tolerance_is_a_parameter():
    """A 5 % excess is no change at the default 10 %, a scale-up at 1 % (KEP-4951's configurable tolerance)."""
    assert desired_replicas([105.0] * 10, 100.0).replicas == 10
    assert desired_replicas([105.0] * 10, 100.0, tolerance=0.01).replicas == 11


def test_loading_pods_hold_back_a_scale_up():
    """Four pods at twice the target ask for 8; with four more still loading (no metric) they
    count as 0 and the ratio is 1: nothing is added while they load."""
    assert desired_replicas([20.0] * 4, 10.0).replicas == 8
    assert desired_replicas([20.0] * 4 + [None] * 4, 10.0).replicas == 8  # current is 8: no change
    assert desired_replicas([20.0] * 4 + [None] * 4, 10.0).reason.startswith("within tolerance")


def test_no_reporting_pod_and_bad_targets_are_refused():
    with pytest.raises(SimulationInputError, match="no pod has reported"):
        desired_replicas([None, None], 10.0)
    with pytest.raises(SimulationInputError, match="must be > 0"):
        desired_replicas([1.0], 0.0)


@pytest.mark.parametrize(("total", "per_pod", "status", "want"), [
    (8600, 2150, 3, 4),  # TestReplicaCalcScaleUpPerPodCMExternal
    (8600, 2867, 5, 3),  # TestReplicaCalcScaleDownPerPodCMExternal
    (8600, 2900, 3, 3),  # TestReplicaCalcTolerancePerPodCMExternal
])
def test_external_average_value(total, per_pod, status, want):
    assert external_replicas(total, per_pod, status_replicas=status).replicas == want


def test_default_scale_up_is_the_larger_of_double_and_four_more():
    assert scale_up_limit(1, (), 0.0, DEFAULT_SCALE_UP) == 5
    assert scale_up_limit(10, (), 0.0, DEFAULT_SCALE_UP) == 20
    # 6 of the 10 were added 10 s ago: the period started at 4 pods
    assert scale_up_limit(10, ((90.0, 6),), 100.0, DEFAULT_SCALE_UP) == 8
    # ... and 20 s ago they are outside the 15 s period
    assert scale_up_limit(10, ((80.0, 6),), 100.0, DEFAULT_SCALE_UP) == 20


def test_the_documented_scale_down_example():
    """kubernetes.io: Pods 4 per 60 s and Percent 10 per 60 s, the larger change wins: from 80
    pods, 8 go in the first step; from 72, 10 % (7.2) leaves 64.8, rounded down to 64."""
    rules = ScalingRules(0, (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)), "Max")
    assert scale_down_limit(80, (), 0.0, rules) == 72
    assert scale_down_limit(72, (), 61.0, rules) == 64
    # within the period the step already taken counts: no more until it passes
    assert scale_down_limit(72, ((0.0, -8),), 30.0, rules) == 72
    assert scale_down_limit(30, (), 0.0, rules) == 26  # below 40 pods the 4-pod policy is the larger change
    assert scale_down_limit(30, (), 0.0, ScalingRules(0, rules.policies, "Min")) == 27
    assert scale_down_limit(30, (), 0.0, ScalingRules(0, rules.policies, "Disabled")) == 30


def test_the_scale_down_window_takes_the_highest_recommendation():
    recs = [(0.0, 10), (100.0, 6), (200.0, 8)]
    # default: 300 s window, so at 250 s the highest of 10, 6, 8 and 4 holds
    assert stabilized(recs, 250.0, 4, 10, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 10
    # at 320 s the 10 has left the window: 8
    assert stabilized(recs, 320.0, 4, 10, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 8
    # a scale-up is not held back (no scale-up window by default)
    assert stabilized(recs, 250.0, 12, 10, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN) == 12


def test_rate_limits_and_bounds():
    assert rate_limited(50, 3, (), 0.0, min_replicas=1, max_replicas=100, up=DEFAULT_SCALE_UP, down=DEFAULT_SCALE_DOWN) == 7
    assert rate_limited(50, 30, (), 0.0, min_replicas=1, max_replicas=40, up=DEFAULT_SCALE_UP, down=DEFAULT_SCALE_DOWN) == 40
    assert rate_limited(1, 30, (), 0.0, min_replicas=5, max_replicas=40, up=DEFAULT_SCALE_UP, down=DEFAULT_SCALE_DOWN) == 5
    slow = ScalingRules(300, (ScalingPolicy("Pods", 1, 600),))
    assert rate_limited(1, 30, (), 0.0, min_replicas=1, max_replicas=40, up=DEFAULT_SCALE_UP, down=slow) == 29


def test_each_direction_has_its_own_tolerance():
    """KEP-4951 (behavior.scaleUp/scaleDown.tolerance, 1.33+): with scale-up at 0 a 5 % excess adds
    a pod; with scale-down at 1/3 a ratio of 0.7 keeps the count, 0.6 removes."""
    assert desired_replicas([105.0] * 10, 100.0, up_tolerance=0.0).replicas == 11
    assert desired_replicas([70.0] * 10, 100.0, down_tolerance=1 / 3).replicas == 10
    assert desired_replicas([60.0] * 10, 100.0, down_tolerance=1 / 3).replicas == 6
    assert external_replicas(1050.0, 100.0, status_replicas=10, up_tolerance=0.0).replicas == 11
