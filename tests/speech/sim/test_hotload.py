"""Hot loading in the simulator: copies into spare memory serve a spike after T_copy, new
instances after the start-up; with no spare memory there is nothing to gain."""

from __future__ import annotations

import numpy as np
import pytest

from speech.errors import SimulationInputError, SpeechError
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy, summarize
from speech.sim.hotload import CopyFleet, compare, render_table, run_copies
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy
from speech.sim.scaler import scaling_numbers
from speech.sim.traces import generate
from tests.conftest import QMAX_REF, TTOTAL_REF

T_COPY_S = 8.0  # the local measurement's median (artifacts/local/copy-*.json), order of magnitude


@pytest.fixture(scope="module")
def setup():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=100))
    model = build_instance(q, t, slo_ms=plan.inputs.slo_ms)
    s = scaling_numbers(plan)
    base = 0.5 * plan.fleet.min_instances * plan.capacity.throughput_at_target_rps
    # A spike: three times the trough for ten minutes, then back.
    arrivals = np.concatenate([generate(f"step:base={base:.3f},factor=3,at=600,duration=1200,seed=3").arrivals,
                               generate(f"steady:rps={base:.3f},duration=600,seed=4").arrivals])
    make = lambda: AwsPolicy(s, model.cloudwatch_ratio, model.q_max)  # noqa: E731
    return plan, model, arrivals, make, s


def fleet(s, copies_fit: int) -> CopyFleet:
    return CopyFleet(instance_memory_mib=24576.0, copy_memory_mib=24576.0 / copies_fit, t_copy_s=T_COPY_S,
                     initial_instances=s.min_instances, min_instances=s.min_instances)


def test_spare_memory_serves_the_spike_sooner(setup):
    plan, model, arrivals, make, s = setup
    only, packed, hot = compare(model, arrivals, make, fleet(s, copies_fit=4), slo_ms=3000,
                                planning_total_s=plan.t_total.planning_s)
    assert [r.summary.policy for r in (only, packed, hot)] == ["instance-only", "instance-only x4", "hot-load"]
    # The first added copy serves T_copy after the scale-out with spare memory, the start-up without
    # (whether an instance brings one copy or four).
    assert hot.first_added_serving_s == pytest.approx(T_COPY_S, abs=1.0)
    assert only.first_added_serving_s == pytest.approx(model.startup_s, abs=1.0)
    assert packed.first_added_serving_s == pytest.approx(model.startup_s, abs=1.0)
    assert hot.hot_loaded > 0 and only.hot_loaded == packed.hot_loaded == 0
    for slower in (only, packed):
        assert hot.summary.rejected_share < 0.5 * slower.summary.rejected_share
        assert hot.summary.within_slo_share > slower.summary.within_slo_share
        assert hot.summary.violation_minutes < slower.summary.violation_minutes
    # Copies packed into running instances: fewer instances and instance-hours than one copy each.
    assert hot.summary.peak_instances < only.summary.peak_instances
    assert hot.summary.instance_hours < only.summary.instance_hours
    table = render_table([only, packed, hot])
    assert "hot-load" in table and "instance-only x4" in table and "rejected" in table


def test_no_gain_when_memory_is_full(setup):
    """One copy fills an instance: every added copy needs a new instance, as without hot loading."""
    plan, model, arrivals, make, s = setup
    only, hot = compare(model, arrivals, make, fleet(s, copies_fit=1), slo_ms=3000, planning_total_s=plan.t_total.planning_s)
    assert hot.hot_loaded == 0
    assert hot.first_added_serving_s == only.first_added_serving_s == pytest.approx(model.startup_s, abs=1.0)
    for a, b in ((hot.summary.rejected_share, only.summary.rejected_share),
                 (hot.summary.within_slo_share, only.summary.within_slo_share),
                 (hot.summary.instance_hours, only.summary.instance_hours)):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)


def test_instance_only_with_one_copy_is_the_plain_simulator(setup):
    """The copy fleet at one copy per instance is the instance simulator, second for second (with
    changes applied at any time: the copy fleet does not model the endpoint's one change at a time)."""
    from speech.sim.policies import AwsReadings

    plan, model, arrivals, make, s = setup
    plain = run_policy(model, arrivals, make(), AwsReadings(one_change_at_a_time=False))
    copies = run_copies(model, arrivals, make(), fleet(s, copies_fit=1), "instance-only")
    np.testing.assert_allclose(copies.run.rejected, plain.rejected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(copies.run.serving, plain.serving)
    a, b = summarize(copies.run, model, 3000, plan.t_total.planning_s), summarize(plain, model, 3000, plan.t_total.planning_s)
    assert a.instance_hours == pytest.approx(b.instance_hours, rel=1e-9)


def test_placement_never_exceeds_instance_memory(setup):
    plan, model, arrivals, make, s = setup
    f = fleet(s, copies_fit=2)
    r = run_copies(model, arrivals, make(), f, "hot-load")
    # Serving copies never exceed what the alive instances can hold.
    assert (r.copies_serving <= r.instances * f.copies_fit).all()
    assert r.new_instances > 0  # the spike needed more than the spare memory held


def test_bad_fleet_is_refused():
    with pytest.raises(ValueError, match="does not fit an instance"):
        CopyFleet(instance_memory_mib=1000, copy_memory_mib=2000, t_copy_s=5)
    with pytest.raises(ValueError, match="3 copies per instance"):
        CopyFleet(instance_memory_mib=1000, copy_memory_mib=400, t_copy_s=5, copies_per_instance=3)
    # The package's own error: edges print it as `SimulationInputError: ...`, not a traceback.
    with pytest.raises(SpeechError) as err:
        CopyFleet(instance_memory_mib=0, copy_memory_mib=400, t_copy_s=5)
    assert type(err.value) is SimulationInputError and "must be > 0 MiB" in str(err.value)


def test_unknown_mode_is_the_packages_error():
    fleet = CopyFleet(instance_memory_mib=1000, copy_memory_mib=400, t_copy_s=5)
    with pytest.raises(SimulationInputError, match="mode 'warm-pool': choose from"):
        run_copies(None, np.zeros(3), None, fleet, "warm-pool")


def test_headroom_keeps_spare_memory_for_the_next_spike():
    """Tracking a slow rise copy by copy packs the fleet full, so the surge on top of it finds no
    spare memory and waits for new instances; headroom starts them in advance, for instance-hours."""
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    trace = generate("diurnal:peak=500,trough=50,hours=1,spikes=2,spike_factor=2,spike_s=300")
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=trace.peak_rps, trough_rps=50))
    # The exponential chain (phases=1): its queueing makes the copy-by-copy tracking pack the fleet
    # full before the surge, the situation headroom is for; the fitted service (16 phases) needs
    # fewer copies on this trace and leaves spare memory without headroom.
    model = build_instance(q, t, slo_ms=3000, phases=1)
    s = scaling_numbers(plan)
    runs = {}
    for h in (0, 4):
        f = CopyFleet(instance_memory_mib=4.0, copy_memory_mib=1.0, t_copy_s=T_COPY_S, initial_instances=s.min_instances,
                      min_instances=s.min_instances, headroom_copies=h)
        r = run_copies(model, trace.arrivals, AwsPolicy(s, model.cloudwatch_ratio, model.q_max), f, "hot-load")
        runs[h] = (r, summarize(r.run, model, 3000, plan.t_total.planning_s))
    (bare, bare_s), (kept, kept_s) = runs[0], runs[4]
    assert kept_s.rejected_share < 0.5 * bare_s.rejected_share
    assert kept_s.instance_hours > bare_s.instance_hours
    # Just before the surge (minute 28) the bare fleet is full, the other has its headroom free.
    before = int(np.argmax(trace.arrivals > 400)) - 30
    assert bare.instances[before] * 4 - bare.copies_serving[before] < 4 <= kept.instances[before] * 4 - kept.copies_serving[before]
