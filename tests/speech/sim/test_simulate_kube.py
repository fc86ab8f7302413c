"""The hpa-v2 and keda simulator policies (speech.sim.kube) on the reference measurements: what
the HPA does that SageMaker's scaling does not (no one change at a time, the behavior's rate
limits, the scale-down window, loading pods counted as 0), each on a trace that shows it."""

from __future__ import annotations

import numpy as np
import pytest

from speech.plan.realtime import build_plan
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy, simulate
from speech.sim.hpa import DEFAULT_SCALE_DOWN, ScalingPolicy, ScalingRules
from speech.sim.instance import build_instance
from speech.sim.kube import HpaSpec, KubePolicy, plan_hpa_spec
from speech.sim.scaler import scaling_numbers
from speech.sim.traces import generate


@pytest.fixture(scope="module")
def ref():
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from tests.conftest import QMAX_REF, TTOTAL_REF

    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    return q, t, build_instance(q, t)


def _step(model, *, base_pods: float, factor: float, at: int = 600, duration: int = 3000) -> np.ndarray:
    """A step from ``base_pods`` pods' worth of traffic at the target occupancy to ``factor`` times it."""
    per_pod = float(model.depart_rps[np.searchsorted(model.occupancy, 0.3 * model.q_max)])
    return generate(f"step:base={base_pods * per_pod:.3f},factor={factor},at={at},duration={duration}").arrivals


def test_a_pod_is_pending_until_its_container_runs(ref):
    """The reference ttotal's container_started (184.6 s) splits the 212.8 s start: Pending, then
    Running without a metric."""
    _, _, model = ref
    assert model.running_s == pytest.approx(184.559)
    assert model.startup_s == pytest.approx(212.808)


def test_no_change_is_refused_and_scale_ups_follow_the_default_rate(ref):
    """A Deployment takes a new count at any time: nothing is refused, and a second scale-up can
    come while the first pods still start. Each scale-up adds at most max(100 %, 4 pods) of the
    count 15 s before."""
    _, _, model = ref
    spec = HpaSpec(target_per_pod=0.3 * model.q_max, min_replicas=2, max_replicas=200)
    run = run_policy(model, _step(model, base_pods=2, factor=12), KubePolicy(spec, model))
    outs = [a for a in run.actions if a.after > a.before]
    assert not run.refused and len(outs) >= 2
    assert any(b.t_s - a.t_s < model.startup_s for a, b in zip(outs, outs[1:], strict=False))
    for a in outs:
        assert a.after <= max(2 * a.before, a.before + 4)


def test_loading_pods_count_as_zero_and_the_hpa_waits(ref):
    """After the step the first scale-up's pods load for T_total; while they do they count as 0, so
    the ratio over all pods stays near the target and the HPA adds little more: the fleet needs
    several syncs past the start-up to reach its size (the users' "6 cycles to grow 5x")."""
    _, _, model = ref
    spec = HpaSpec(target_per_pod=0.3 * model.q_max, min_replicas=2, max_replicas=200)
    run = run_policy(model, _step(model, base_pods=2, factor=5), KubePolicy(spec, model))
    first = next(a for a in run.actions if a.after > a.before)
    during = [a for a in run.actions if first.t_s < a.t_s < first.t_s + model.running_s and a.after > a.before]
    after = [a for a in run.actions if a.t_s >= first.t_s + model.startup_s and a.after > a.before]
    assert first.after < 10  # the rate limit: 2 pods become at most 6 at once
    assert len(during) + len(after) >= 1


def test_scale_down_waits_for_the_stabilization_window(ref):
    """Twenty pods on a tenth of their traffic: the controller's first sync seeds the scale-down
    window with the current count, so the highest recommendation of the window keeps all twenty
    until the window (300 s by default, then 900 s) has passed; then they go at once (the default
    policy allows 100 % per 15 s)."""
    _, _, model = ref
    per_pod = float(model.depart_rps[np.searchsorted(model.occupancy, 0.3 * model.q_max)])
    arrivals = np.full(2400, 2.0 * per_pod)
    for window in (300, 900):
        down = ScalingRules(window, DEFAULT_SCALE_DOWN.policies)
        spec = HpaSpec(target_per_pod=0.3 * model.q_max, min_replicas=1, max_replicas=50, scale_down=down)
        # a fleet already running, sized as if each pod took a tenth of its share: 20 pods
        run = run_policy(model, arrivals, KubePolicy(spec, model), warm_x_rps=per_pod / 10)
        first_in = next(a for a in run.actions if a.after < a.before)
        assert run.serving[0] == 20 and window < first_in.t_s <= window + 30
        assert first_in.after <= 4


def test_a_scale_down_policy_limits_each_period(ref):
    """One pod per 120 s: after the drop, consecutive removals are at least 120 s apart."""
    _, _, model = ref
    arrivals = _step(model, base_pods=10, factor=0.1, at=600, duration=3600)
    down = ScalingRules(60, (ScalingPolicy("Pods", 1, 120),))
    spec = HpaSpec(target_per_pod=0.3 * model.q_max, min_replicas=1, max_replicas=50, scale_down=down)
    per_pod = float(model.depart_rps[np.searchsorted(model.occupancy, 0.3 * model.q_max)])
    run = run_policy(model, arrivals, KubePolicy(spec, model), warm_x_rps=per_pod)
    ins = [a for a in run.actions if a.after < a.before]
    assert len(ins) >= 3 and all(a.before - a.after == 1 for a in ins)
    assert all(b.t_s - a.t_s >= 120 for a, b in zip(ins, ins[1:], strict=False))


def test_scheduled_floors_raise_min_replicas(ref):
    _, _, model = ref
    spec = HpaSpec(target_per_pod=0.3 * model.q_max, min_replicas=1, max_replicas=50, floors=((10, 6), (40, 1)))
    run = run_policy(model, np.full(3600, 0.5), KubePolicy(spec, model))
    up = next(a for a in run.actions if a.after > a.before)
    assert up.after == 6 and 600 <= up.t_s < 615 and up.reason == "minReplicas"
    assert run.serving[30 * 60] == 6 and run.serving[-1] < 6  # after 00:40 the floor is 1 again


def test_plan_rendered_as_hpa_and_keda_on_a_diurnal_day(ref):
    """The registry's hpa-v2 and keda: the plan's target, floor and scale-in as the HPA; both run
    a day through simulate, never refuse a change, and KEDA (status.replicas counts starting pods)
    and the HPA (loading pods count 0) take different actions on the same day."""
    q, t, _ = ref
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=200, trough_rps=10))
    spec = plan_hpa_spec(plan, scaling_numbers(plan))
    # the HPA simulated is the one speech.deploy.kubernetes renders: its target, bounds and behavior
    from speech.deploy.kubernetes import sizing
    from speech.sim.hpa_artifact import hpa_fields

    assert 0 <= plan.thresholds.c_scale_max - spec.target_per_pod < 1e-3 and spec.min_replicas == plan.fleet.min_instances
    rendered = sizing.behavior(plan, tolerance=True)
    fields = hpa_fields(spec)["behavior"]
    for direction in ("scaleUp", "scaleDown"):
        assert fields[direction]["policies"] == rendered[direction]["policies"]
        assert fields[direction]["stabilizationWindowSeconds"] == rendered[direction]["stabilizationWindowSeconds"]
        assert float(fields[direction]["tolerance"]) == pytest.approx(float(rendered[direction]["tolerance"]))
    trace = generate("diurnal:peak=200,trough=10,hours=4,seed=3")
    _, runs, sums = simulate(plan, q, t, trace.arrivals, policies=["hpa-v2", "keda"])
    by = {s.policy: s for s in sums}
    assert set(by) == {"hpa-v2", "keda"}
    assert all(s.refused_changes == 0 and s.scale_out_actions > 0 for s in sums)
    assert [(a.t_s, a.after) for a in runs[0].actions] != [(a.t_s, a.after) for a in runs[1].actions]
