"""The plan on the reference run, on synthetic ladders, and its invariants."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speech.errors import FingerprintMismatch, PlanInputError
from speech.files import load_artifact, write_artifact
from speech.plan.formulas import c_scale_max, c_scale_min, capacity_at, headroom, min_safe_instances, unit_sizing
from speech.plan.realtime import build_plan
from speech.plan.survival import arrival_for_mean_occupancy, reach_probability, stationary
from speech.schema.artifacts import Fingerprint, LadderLevel, Provenance, QmaxArtifact, ServiceTime, Slo, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.schema.plan_artifacts import PlanArtifact

TTOTAL_REF = Path(__file__).resolve().parents[3] / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
REF_INPUTS = PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=10)


def test_reference_plan_numbers(qmax_ref, ttotal_ref):
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS)
    # The seed target (1 - h) x Q_max = 37.5 would hold each instance where its gate refuses ~2 %:
    # the SLO share (99.5 %) lowers it to the mean occupancy of the highest rate that keeps the share.
    assert p.thresholds.c_scale_max == pytest.approx(16.0, abs=0.1)
    assert p.thresholds.c_scale_min == pytest.approx(p.thresholds.c_scale_max * 0.5 / 0.75, abs=1e-3)
    assert p.thresholds.w_max_s == pytest.approx(2.934, abs=5e-4)
    assert p.thresholds.scaling_target_value == p.thresholds.c_scale_max  # CloudWatch/client ratio 1.0
    assert (p.cooldowns.scale_out_s, p.cooldowns.scale_in_s) == (30, 960)
    assert p.queue_max_depth == 50
    assert p.t_total.reaction_bound_s == 60
    assert round(p.t_total.planning_s, 1) == 320.2
    assert p.fleet.min_safe_instances == 3
    assert p.fleet.min_instances == 1
    # 5000 rps at 17.08 rps per instance (95.4 % of the saturated 17.9 rps).
    assert p.capacity.slo_rate_rps == pytest.approx(17.08, abs=0.01)
    assert p.capacity.per_instance_rps == p.capacity.slo_rate_rps
    assert p.fleet.max_instances == math.ceil(5000 / p.capacity.per_instance_rps) == 293
    assert p.capacity.refused_share_at_peak <= 0.005 and p.capacity.slo_share_at_peak >= 0.995
    assert p.alarms.ttfab_p95_alarm_ms == pytest.approx(65, abs=1)
    # Scale-in: a sixth of the fleet per step (survivors land at C_scale_max / 1.25), at most a third.
    assert (p.scale_in.step_percent, p.scale_in.min_removed, p.scale_in.window_s) == (-16, 1, 300)
    assert p.scale_in.max_safe_share == pytest.approx(1 / 3, abs=1e-6)

    surge = p.finding("surge_survival")
    assert surge.level == "warn" and "94.0%" in surge.message
    assert p.finding("scale_in_safety").level == "warn"
    assert "safe from 3" in p.finding("scale_in_safety").message
    share = p.finding("slo_share")
    assert share.level == "ok" and "17.1 rps per instance" in share.message and "SLO share" in share.message

    fleet = p.finding("fleet_capacity")
    # The finding must say why 9 (Little's law on S) is wrong for this endpoint.
    assert p.capacity.littles_law_instances == 9
    assert "would give 9, which serve only" in fleet.message
    assert f"-> {p.fleet.max_instances} instances" in fleet.message
    assert p.capacity.littles_law_capacity_rps < 200
    assert p.verdict == "warn"


def test_slo_share_sizes_the_fleet_from_the_gated_chain(qmax_ref, ttotal_ref):
    """A stricter share gives a lower rate per instance, a larger fleet and a lower target; the
    refused share at the sized fleet's peak is what the chain says and stays within the share."""
    loose = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"slo_share": 0.99}))
    strict = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"slo_share": 0.999}))
    assert loose.capacity.slo_rate_rps > strict.capacity.slo_rate_rps
    assert loose.fleet.max_instances < strict.fleet.max_instances
    assert loose.thresholds.c_scale_max > strict.thresholds.c_scale_max
    for p, share in ((loose, 0.99), (strict, 0.999)):
        assert p.capacity.slo_share_at_peak >= share
        assert p.inputs.slo_share == share


def test_small_qmax_fleet_names_the_levers(qmax_ref, ttotal_ref):
    """Q_max 2 (the demo's local ladder): near saturation the gate refuses a third of Poisson
    arrivals, so keeping 99.5 % takes a fleet many times what throughput needs; the finding says so."""
    small = qmax_ref.model_copy(update={"q_max": 2, "ladder": qmax_ref.ladder[:1] + [
        qmax_ref.ladder[0].model_copy(update={"concurrency": 2, "throughput_rps": 17.9, "ttfab_p95_ms": 130.0,
                                              "ttfab_p50_ms": 120.0, "ttfab_p99_ms": 135.0}),
        qmax_ref.ladder[0].model_copy(update={"concurrency": 3, "throughput_rps": 17.9, "ttfab_p95_ms": 5000.0,
                                              "ttfab_p50_ms": 4000.0, "ttfab_p99_ms": 6000.0, "meets_slo": False}),
    ]})
    p = build_plan(small, ttotal_ref, REF_INPUTS)
    f = p.finding("slo_share")
    assert f.level == "warn" and "looser SLO" in f.message and "batch route" in f.message
    assert p.capacity.slo_rate_rps < 0.1 * 17.9  # about 7 % of the saturated rate
    assert p.fleet.max_instances > 10 * math.ceil(5000 / 17.9)
    assert p.capacity.refused_share_at_peak <= 0.005


def test_cap_below_the_slo_fleet_says_what_will_be_refused(qmax_ref, ttotal_ref):
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS, max_instances_cap=250)
    f = p.finding("slo_share")
    assert f.level == "stop" and "No fleet under the cap of 250" in f.message and "293 instances" in f.message
    # 5000 rps over 250 instances is 20 rps each, above the saturated 17.9: about a tenth refused.
    assert 0.05 < p.capacity.refused_share_at_peak < 0.2


def test_no_fleet_keeps_a_share_an_idle_instance_misses(qmax_ref, ttotal_ref):
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"slo_ms": 66.0}))
    f = p.finding("slo_share")
    assert f.level == "stop" and "no fleet keeps" in f.message and p.verdict == "stop"


def _ladder_artifact(levels: list[tuple[int, float, float]], *, slo_ms: float = 3000.0, q_max: int, s_ms: float):
    """levels: (concurrency, p95 ms, throughput rps)."""
    ladder = [
        LadderLevel(
            concurrency=c,
            completed=int(x * 60),
            ok=int(x * 60),
            ttfab_p50_ms=p95 * 0.95,
            ttfab_p95_ms=p95,
            ttfab_p99_ms=p95 * 1.02,
            throughput_rps=x,
            client_concurrency_mean=float(c),
            meets_slo=p95 <= slo_ms,
        )
        for c, p95, x in levels
    ]
    failing = [lv.concurrency for lv in ladder if not lv.meets_slo]
    return QmaxArtifact(
        model="kokoro-82m",
        transport="stream",
        fingerprint=Fingerprint.of("ml.g5.xlarge", "sha256:" + "8b1b96bc" + "0" * 56),
        slo=Slo(ttfab_p95_ms=slo_ms),
        ladder=ladder,
        q_max=q_max,
        bracketed=bool(failing),
        first_failing_concurrency=failing[0] if failing else None,
        service_time=ServiceTime(mean_ms=s_ms, p95_ms=s_ms * 1.08),
        instances=1,
        cloudwatch_ratio=1.0,
        cloudwatch_ratio_source="assumed",
        provenance=Provenance(origin="assumption", source="test: hand-built ladder"),
    )


def test_batching_ladder_differs_from_one_at_a_time(qmax_ref, ttotal_ref):
    """A server whose throughput rises with concurrency needs fewer instances and sits less utilized."""
    t = ttotal_ref.model_copy(update={"fingerprint": Fingerprint.of("ml.g5.xlarge", "sha256:" + "8b1b96bc" + "0" * 56)})
    s = 61.3
    # Batching up to 64 requests at once: X(n) = n / S, p95 flat at about S until the batch is full.
    batching = [(c, s * 1.1, c / (s / 1000)) for c in (1, 8, 16, 32, 48, 64)] + [(80, 4000.0, 64 / (s / 1000))]
    flat = [(c, s * c, 1000 / s) for c in (1, 4, 8, 16, 32, 48, 64)]
    q_batch = _ladder_artifact(batching, q_max=64, s_ms=s)
    q_flat = _ladder_artifact(flat, q_max=48, s_ms=s)
    pb = build_plan(q_batch, t, REF_INPUTS)
    pf = build_plan(q_flat, t, REF_INPUTS)

    # One-at-a-time: M/M/1, utilization L/(1+L) at L = C_scale_max.
    assert pf.surge.utilization == pytest.approx(pf.thresholds.c_scale_max / (1 + pf.thresholds.c_scale_max), abs=1e-6)
    # Batching: the chain's own answer, far from the M/M/1 formula.
    mm1 = pb.thresholds.c_scale_max / (1 + pb.thresholds.c_scale_max)
    assert pb.surge.utilization < mm1 - 0.05
    # Fleet from the rate the gated chain holds at the target, never above the measured throughput there.
    x_target = pb.thresholds.c_scale_max / (s / 1000)
    assert pb.capacity.throughput_at_target_rps == pytest.approx(x_target, rel=1e-3)
    assert pb.capacity.per_instance_rps <= pb.capacity.throughput_at_target_rps
    assert pb.fleet.max_instances == math.ceil(5000 / pb.capacity.per_instance_rps - 1e-9)
    assert pf.fleet.max_instances == math.ceil(5000 / pf.capacity.per_instance_rps - 1e-9)
    assert pf.fleet.max_instances > math.ceil(5000 / (1000 / s))
    assert pb.fleet.max_instances < pf.fleet.max_instances / 10
    # At mean occupancy 48 with 64 served at once, about 48/64 of capacity is in use.
    assert pb.surge.utilization == pytest.approx(0.75, abs=0.02)


def test_flat_throughput_chain_is_mm1():
    mu, lam = 17.9, 17.0
    rates = np.full(5, mu)
    pi, tail, mean = stationary(lam, rates)
    rho = lam / mu
    assert mean == pytest.approx(rho / (1 - rho), rel=1e-9)
    assert pi == pytest.approx([(1 - rho) * rho**n for n in range(6)], rel=1e-9)
    lam_fit = arrival_for_mean_occupancy(37.5, rates)
    assert lam_fit / mu == pytest.approx(37.5 / 38.5, rel=1e-9)


def _uniformized_reach(start: int, q: int, lam: float, mu: float, horizon_s: float) -> float:
    """Independent check: discrete-time uniformized chain with Poisson weights (M/M/1, absorbing q)."""
    rate = lam + mu
    step = np.zeros((q + 1, q + 1))
    for n in range(q):
        step[n, n + 1] = lam / rate
        if n > 0:
            step[n, n - 1] = mu / rate
        step[n, n] = 1 - step[n].sum()
    step[q, q] = 1.0
    p = np.zeros(q + 1)
    p[start] = 1.0
    total = np.zeros(q + 1)
    weight = math.exp(-rate * horizon_s)
    k = 0
    while k < 20 * rate * horizon_s + 100:
        total += weight * p
        p = p @ step
        k += 1
        weight *= rate * horizon_s / k
    return float(total[q])


@pytest.mark.parametrize("start,q,lam,horizon", [(2, 6, 8.0, 0.5), (5, 10, 9.0, 1.5), (0, 4, 5.0, 2.0)])
def test_transient_reach_matches_uniformization(start, q, lam, horizon):
    mu = 10.0
    got = reach_probability(
        start_occupancy=start, q_max=q, arrival_rps=lam, rates=np.full(q, mu), horizon_s=horizon
    )
    assert got == pytest.approx(_uniformized_reach(start, q, lam, mu, horizon), abs=1e-8)


def test_ramping_traffic_raises_reach_probability():
    rates = np.full(10, 10.0)
    common = dict(start_occupancy=5, q_max=10, arrival_rps=8.0, rates=rates, horizon_s=1.0)
    assert reach_probability(**common, ramp_ratio=1.3) > reach_probability(**common)


def test_slo_below_uncontended_p95_is_stop(qmax_ref, ttotal_ref):
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"slo_ms": 60.0}))
    assert p.finding("slo_feasible").level == "stop"
    assert "66.1 ms" in p.finding("slo_feasible").message
    assert p.verdict == "stop"


def test_unbracketed_ladder_is_lower_bound_warn(ttotal_ref):
    q = _ladder_artifact([(1, 60, 16), (5, 290, 17.9), (10, 570, 17.9)], q_max=10, s_ms=61.3)
    t = ttotal_ref.model_copy(update={"fingerprint": q.fingerprint})
    f = build_plan(q, t, REF_INPUTS).finding("qmax_bracketed")
    assert f.level == "warn" and "lower bound" in f.message


def test_fingerprint_mismatch_refused_unless_allowed(qmax_ref, ttotal_ref):
    other = ttotal_ref.model_copy(update={"fingerprint": Fingerprint.of("ml.g6.xlarge", "sha256:" + "a" * 64)})
    with pytest.raises(FingerprintMismatch, match="allow-config-mismatch"):
        build_plan(qmax_ref, other, REF_INPUTS)
    p = build_plan(qmax_ref, other, REF_INPUTS, allow_config_mismatch=True)
    assert p.finding("fingerprint").level == "warn"


def test_max_instances_cap_below_need_is_stop(qmax_ref, ttotal_ref):
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS, max_instances_cap=9)
    f = p.finding("fleet_capacity")
    assert f.level == "stop" and "293" in f.message and p.fleet.max_instances == 9


def test_invocation_ceiling_stops_a_queue_that_cannot_drain_in_60s(ttotal_ref):
    slow = [(c, 900.0 * c, 1.0) for c in (1, 2, 4, 8, 16, 32, 64, 80)]
    q = _ladder_artifact(slow, slo_ms=100000, q_max=80, s_ms=900)
    t = ttotal_ref.model_copy(update={"fingerprint": q.fingerprint})
    p = build_plan(q, t, REF_INPUTS.model_copy(update={"slo_ms": 100000}))
    assert p.finding("invocation_ceiling").level == "stop"


@pytest.mark.parametrize("surge", [1.5, 1.7, 0.99])
def test_surge_out_of_range_refused(surge):
    with pytest.raises(PlanInputError):
        headroom(surge)


def test_min_safe_instances_at_quarter_headroom():
    assert min_safe_instances(37.5, 25.0) == 3
    assert min_safe_instances(45.0, 40.0) == 9  # h = 0.05 on Q_max 50: 9/8 <= 1.125


@settings(max_examples=200, deadline=None)
@given(q=st.integers(1, 500), surge=st.floats(1.0, 1.49), dq=st.integers(0, 100), ds=st.floats(0.0, 0.2))
def test_threshold_invariants(q, surge, dq, ds):
    h = headroom(surge)
    lo, hi = c_scale_min(q, h), c_scale_max(q, h)
    assert lo < hi <= q or (h == 0 and lo == hi == q)
    # More Q_max never lowers a threshold.
    assert c_scale_max(q + dq, h) >= hi and c_scale_min(q + dq, h) >= lo
    # A larger surge never raises C_scale_max.
    bigger = min(1.49, surge + ds)
    assert c_scale_max(q, headroom(bigger)) <= hi + 1e-12


@settings(max_examples=20, deadline=None)
@given(
    x=st.lists(st.floats(1.0, 100.0), min_size=2, max_size=6),
    surge=st.floats(1.01, 1.49),
)
@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_plan_survival_is_a_probability(x, surge):
    ttotal_ref = load_artifact(TTOTAL_REF, TtotalArtifact)
    xs = sorted(x)
    levels = [(c, 50.0 * c, xs[i]) for i, c in enumerate([1, 2, 4, 8, 16, 32][: len(xs)])]
    q = _ladder_artifact(levels, q_max=levels[-1][0], s_ms=50.0)
    t = ttotal_ref.model_copy(update={"fingerprint": q.fingerprint})
    p = build_plan(q, t, REF_INPUTS.model_copy(update={"surge_ratio": surge}))
    assert 0.0 <= p.surge.survival <= 1.0
    assert 0.0 <= p.surge.utilization <= 1.0
    assert p.thresholds.c_scale_min < p.thresholds.c_scale_max <= p.q_max


def test_sparse_and_dense_exponentials_agree(monkeypatch):
    """Large chains take the sparse Krylov path; it must give the dense answer."""
    import speech.plan.survival as sv

    common = dict(start_occupancy=30.5, q_max=40, arrival_rps=15.0, rates=np.full(40, 17.9), horizon_s=20.0,
                  ramp_ratio=1.25)  # fmt: skip
    dense = reach_probability(**common)
    monkeypatch.setattr(sv, "DENSE_MAX_STATES", 10)
    sparse = reach_probability(**common)
    assert 0.01 < dense < 0.99
    assert sparse == pytest.approx(dense, abs=1e-9)


def test_min_instances_carry_the_trough_below_the_target(qmax_ref, ttotal_ref):
    # 100 rps at the trough: each instance carries X(37.5) = 17.9 rps below the target -> 6.
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"trough_rps": 100.0}))
    assert p.fleet.min_instances == math.ceil(100 / p.capacity.throughput_at_target_rps) == 6
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"min_instances": 8}))
    assert p.fleet.min_instances == 8 and p.finding("scale_in_safety").level == "ok"


def test_a_level_that_served_nothing_still_plans_a_readable_artifact(ttotal_ref, tmp_path):
    # A local ladder on a busy machine: every request at concurrency 2 failed (throughput 0).
    q = _ladder_artifact([(1, 2061.1, 0.33), (2, 0.0, 0.0)], q_max=1, s_ms=2000.0)
    t = ttotal_ref.model_copy(update={"fingerprint": q.fingerprint})
    p = build_plan(q, t, REF_INPUTS)
    assert math.isfinite(p.surge.utilization) and math.isfinite(p.surge.arrival_rps)
    assert load_artifact(write_artifact(tmp_path / "plan.json", p), PlanArtifact) == p


def test_qmax_zero_stops_fleet_capacity_too(ttotal_ref):
    # Issue 36: with Q_max 0 no fleet serves anything within the SLO; fleet_capacity must not say
    # "ok -> 1000000 instances" next to the slo_feasible stop.
    q = _ladder_artifact([(1, 3400.0, 0.3), (2, 6000.0, 0.33)], q_max=0, s_ms=3300.0)
    t = ttotal_ref.model_copy(update={"fingerprint": q.fingerprint})
    p = build_plan(q, t, REF_INPUTS)
    fleet = p.finding("fleet_capacity")
    assert p.verdict == "stop" and fleet.level == "stop"
    assert "serves 0 rps" in fleet.message and "1000000" not in fleet.message


def test_tuned_values_are_bounded_recorded_and_explained(qmax_ref, ttotal_ref):
    tuned = REF_INPUTS.model_copy(update={
        "target_share": 0.3, "scale_in_step_share": 0.25, "scale_in_window_s": 600, "scale_in_cooldown_s": 700,
        "scale_out_cooldown_s": 20, "reasons": {"scale_in_step_share": "bench tune: 12 % cheaper, same SLO share"},
    })
    p = build_plan(qmax_ref, ttotal_ref, tuned)
    assert p.thresholds.c_scale_max == 15.0 and p.thresholds.c_scale_min == pytest.approx(10.0)
    assert (p.scale_in.step_percent, p.scale_in.window_s, p.alarms.scale_in_evaluation_periods) == (-25, 600, 60)
    assert (p.cooldowns.scale_in_s, p.cooldowns.scale_out_s) == (700, 20)
    # The planning T_total uses the tuned scale-out cooldown: 260.2 + 10 x 3 + 20.
    assert round(p.t_total.planning_s, 1) == 310.2
    by = {v.name: v for v in p.tuning}
    assert set(by) == {"target_share", "scale_in_step_share", "scale_in_window_s", "scale_in_cooldown_s",
                       "scale_out_cooldown_s"}
    assert by["target_share"].seed == 0.75 and by["scale_in_step_share"].seed == pytest.approx(1 / 6, abs=1e-6)
    assert by["scale_in_step_share"].reason.startswith("bench tune") and "no reason recorded" in by["target_share"].reason
    assert p.inputs.target_share == 0.3 and p.inputs.scale_in_cooldown_s == 700
    # Seed plans record none of it and keep their bytes free of the unset inputs.
    seed = build_plan(qmax_ref, ttotal_ref, REF_INPUTS)
    assert seed.tuning == [] and "target_share" not in seed.inputs.model_dump() and "tuning" not in seed.model_dump()


def test_the_plan_records_every_input_it_shares_by_name(qmax_ref, ttotal_ref):
    # PlanInputsRecord.of copies by name: each input the record has a field for is recorded as
    # given (the tuned ones too), the reaction flattened; no field list to keep in step by hand.
    from speech.schema.plan_artifacts import PlanInputsRecord

    tuned = REF_INPUTS.model_copy(update={"target_share": 0.3, "scale_in_step_share": 0.25, "scale_in_window_s": 600,
                                          "scale_in_cooldown_s": 700, "scale_out_cooldown_s": 20, "qmax_derate": 0.9,
                                          "slo_share": 0.99, "surge_average_share": 0.5})
    rec = build_plan(qmax_ref, ttotal_ref, tuned).inputs
    shared = set(PlanInputsRecord.model_fields) & set(PlanInputs.model_fields)
    assert len(shared) == 13
    assert {f: getattr(rec, f) for f in shared} == {f: getattr(tuned, f) for f in shared}
    assert (rec.metric_period_s, rec.datapoints_to_alarm) == (tuned.reaction.metric_period_s,
                                                              tuned.reaction.datapoints_to_alarm)
    assert rec.qmax_slug == qmax_ref.fingerprint.slug and rec.ttotal_sha256.startswith("sha256:")


@pytest.mark.parametrize("update,match", [
    ({"target_share": 0.8}, "above 1 - h = 0.75"),
    ({"scale_in_step_share": 0.4}, "above 1 - C_scale_min / C_scale_max"),
    ({"scale_in_cooldown_s": 200}, "below max"),
    ({"scale_out_cooldown_s": 5}, "outside"),
])
def test_tuned_values_outside_their_safety_bounds_are_refused(qmax_ref, ttotal_ref, update, match):
    with pytest.raises(PlanInputError, match=match):
        build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update=update))


def test_promise_is_recorded_and_judged_against_the_slo_share(qmax_ref, ttotal_ref):
    from speech.schema.config import Promise

    good = Promise(slo_share=0.998, rejected_share=0.001, instance_hours=4800, cost_vs_floor=1.6,
                   trace_sha256="a" * 64, seed=1, simulator_version="sim-2")
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"promise": good}))
    assert p.promise == good and p.finding("promise").level == "ok" and "1.60x the floor" in p.finding("promise").message
    bad = good.model_copy(update={"slo_share": 0.98})
    p = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"promise": bad}))
    assert p.finding("promise").level == "warn"
    # Below the share it says why (refused vs answered late) and what would keep it.
    msg = p.finding("promise").message
    assert f"2.00% missed: 0.10% refused at the gate (Q_max {p.q_max} in flight per instance) and 1.90% answered " \
           "after the SLO; what would keep 99.50%: a lower target_share" in msg
    refused = bad.model_copy(update={"rejected_share": 0.015})
    msg = build_plan(qmax_ref, ttotal_ref, REF_INPUTS.model_copy(update={"promise": refused})).finding("promise").message
    assert "1.50% refused at the gate" in msg and "what would keep 99.50%: more floor (min_instances" in msg
    assert "a queue in front" in msg and "a batch route (priority: batch, hosting: async)" in msg
    assert "promise" not in [f.name for f in build_plan(qmax_ref, ttotal_ref, REF_INPUTS).findings]


def test_the_promise_carries_its_share_bound_and_old_promises_still_load():
    """slo_share_bound (bench tune's rule, speech.sim.tune.unseen_share_bound) round-trips through
    the plan's JSON; a promise written before it has none and loads as it was."""
    import json

    from speech.schema.config import Promise

    old = {"slo_share": 0.998, "rejected_share": 0.001, "instance_hours": 4800, "cost_vs_floor": 1.6,
           "trace_sha256": "a" * 64, "seed": 1, "simulator_version": "sim-3", "slo_share_low": 0.997, "slo_share_high": 0.999}
    before = Promise.model_validate(old)
    assert before.slo_share_bound is None and "slo_share_bound" not in json.loads(before.model_dump_json())
    now = Promise.model_validate({**old, "slo_share_bound": 0.9955})
    assert Promise.model_validate_json(now.model_dump_json()).slo_share_bound == 0.9955
    with pytest.raises(ValueError):
        Promise.model_validate({**old, "slo_share_bound": 1.2})


def test_unit_sizing_returns_the_rule_and_evidence_with_the_target(qmax_ref, ttotal_ref):
    """One unit's sizing says which rule set the target and what it was computed from; the plan's
    capacity block is capacity_at over the fleet the plan chose."""
    inputs = PlanInputs(peak_rps=5000.0, trough_rps=10.0, surge_ratio=1.25)
    unit = unit_sizing(qmax_ref, inputs)
    assert unit.target_rule in ("surge rule", "SLO share")
    assert 0 < unit.c_scale_min < unit.c_scale_max <= (1 - unit.headroom) * unit.q_max + 1e-9
    assert unit.throughput_at_scale_in_rps <= unit.throughput_at_target_rps
    assert 0 < unit.per_unit_rps <= unit.throughput_at_target_rps
    plan = build_plan(qmax_ref, ttotal_ref, inputs)
    assert plan.capacity == capacity_at(unit, peak_rps=5000.0, units_at_peak=plan.fleet.max_instances, trough_rps=10.0,
                                        units_at_trough=plan.fleet.min_instances)
    tuned = unit_sizing(qmax_ref, PlanInputs(peak_rps=5000.0, trough_rps=10.0, surge_ratio=1.25, target_share=0.6))
    assert tuned.target_rule == "target share" and tuned.c_scale_max == pytest.approx(0.6 * tuned.q_max)
