"""The batch plan (speech.plan.batch): the reference run, the delay rule, the cap check, and config."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from speech.errors import PlanInputError
from speech.plan.batch import backlog_target_per_instance, build_batch_plan, cold_start, delay_at_cap, delay_holds, worst_delay_s
from speech.schema.artifacts import Fingerprint
from speech.schema.config import ModelConfig, PlanInputs

INPUTS = PlanInputs(peak_rps=50, trough_rps=1, max_delay_s=900)


def test_reference_batch_plan(qmax_ref, ttotal_ref):
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS)
    # The reference ladder: Q_max 50, X(50) = 17.87 rps; T_total 260.248 s.
    assert p.q_max == p.max_concurrent_invocations_per_instance == 50
    assert p.throughput_per_instance_rps == pytest.approx(17.87)
    assert p.cold_start.total_s == pytest.approx(120 + 260.248)
    assert p.drain_budget_s == pytest.approx(900 - 380.248, abs=1e-3)
    assert p.backlog_target_per_instance == math.floor(17.87 * (900 - 380.248))  # 9287
    assert (p.min_instances, p.peak_instances, p.max_instances) == (0, 3, 3)
    assert (p.cooldowns.scale_out_s, p.cooldowns.scale_in_s) == (261, 1140)
    assert (p.wake.period_s, p.wake.datapoints_to_alarm, p.wake.threshold, p.wake.instances_added) == (60, 2, 1.0, 1)
    assert p.finding("batch_delay").level == "ok"
    assert p.finding("batch_fleet_capacity").level == "ok"
    assert p.verdict == "warn"  # reference figures: the provenance finding
    assert p.finding("provenance").level == "warn"


def test_delay_shorter_than_cold_start_is_a_stop(qmax_ref, ttotal_ref):
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS.model_copy(update={"max_delay_s": 300.0}))
    f = p.finding("batch_delay")
    assert f.level == "stop" and p.verdict == "stop"
    assert "not longer than the cold start from zero 380.2 s" in f.message
    assert "raise max_delay_s above 381 s" in f.message
    assert p.backlog_target_per_instance == 0


def test_delay_that_drains_less_than_one_request_is_a_stop(qmax_ref, ttotal_ref):
    # 0.02 s after the cold start: one instance drains 17.87 x 0.02 = 0.36 requests.
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS.model_copy(update={"max_delay_s": 380.268}))
    assert p.finding("batch_delay").level == "stop"
    assert "less than one request" in p.finding("batch_delay").message


def test_config_cap_below_peak_warns_with_growth(qmax_ref, ttotal_ref):
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS, max_instances_cap=2)
    assert p.max_instances == 2 and p.peak_instances == 3
    f = p.finding("batch_fleet_capacity")
    assert f.level == "warn"
    # 50 - 2 x 17.87 = 14.26 rps of backlog growth during the peak.
    assert "grows by 14.26 requests/s" in f.message and "Raise the cap (or the budget) to 3" in f.message


def test_cap_check_for_a_budget(qmax_ref, ttotal_ref):
    """The budget allocation asks: does a cap of N hold the delay?"""
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS.model_copy(update={"trough_rps": 20.0}))
    assert delay_holds(p, 3) and delay_holds(p, 10)
    assert not delay_holds(p, 2)
    assert delay_at_cap(p, 2).level == "warn"
    # One instance (17.87 rps) does not carry the 20 rps trough: the backlog never drains.
    assert delay_at_cap(p, 1).level == "stop"
    assert delay_at_cap(p, 0).level == "stop"
    assert "never drains" in delay_at_cap(p, 1).message


def test_needs_max_delay(qmax_ref, ttotal_ref):
    with pytest.raises(PlanInputError, match="max_delay_s"):
        build_batch_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=5))


def test_derate_lowers_concurrency(qmax_ref, ttotal_ref):
    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS.model_copy(update={"qmax_derate": 0.5}))
    assert p.max_concurrent_invocations_per_instance == 25
    assert p.throughput_per_instance_rps == pytest.approx(17.9, abs=0.03)  # flat curve between 20 and 30


def test_fingerprint_mismatch_refused(qmax_ref, ttotal_ref):
    other = ttotal_ref.model_copy(update={"fingerprint": Fingerprint.of("ml.g5.2xlarge", ttotal_ref.fingerprint.image_digest)})
    with pytest.raises(PlanInputError, match="measured on"):
        build_batch_plan(qmax_ref, other, INPUTS)
    p = build_batch_plan(qmax_ref, other, INPUTS, allow_config_mismatch=True)
    assert p.finding("fingerprint").level == "warn"


@settings(max_examples=200, deadline=None)
@given(
    x=st.floats(min_value=0.01, max_value=500),
    measured=st.floats(min_value=1, max_value=3000),
    delay=st.floats(min_value=1, max_value=86400),
)
def test_backlog_target_keeps_the_delay_and_is_tight(x, measured, delay):
    cold = cold_start(measured)
    b = backlog_target_per_instance(x, delay - cold.total_s)
    if b >= 1:
        # Held at the target, the last request still finishes within the delay ...
        assert worst_delay_s(b, x, cold.total_s) <= delay + 1e-6
        # ... and one more request per instance would not.
        assert worst_delay_s(b + 1, x, cold.total_s) > delay - 1e-6
    else:
        assert b == 0 and (delay - cold.total_s) * x < 1 + 1e-6


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # read-only artifacts
@given(d1=st.floats(min_value=400, max_value=50000), d2=st.floats(min_value=400, max_value=50000),
       peak=st.floats(min_value=0.5, max_value=5000))
def test_plan_properties(qmax_ref, ttotal_ref, d1, d2, peak):
    lo, hi = sorted((d1, d2))
    a = build_batch_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=peak, trough_rps=0.5, max_delay_s=lo))
    b = build_batch_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=peak, trough_rps=0.5, max_delay_s=hi))
    assert a.backlog_target_per_instance <= b.backlog_target_per_instance  # more delay, more backlog
    x = a.throughput_per_instance_rps
    # The fleet at peak is the smallest that drains the peak rate.
    assert a.peak_instances * x >= peak - 1e-6
    assert a.peak_instances == 1 or (a.peak_instances - 1) * x < peak
    assert a.min_instances == 0
    assert delay_holds(a, a.peak_instances) and (a.peak_instances == 1 or not delay_holds(a, a.peak_instances - 1))


# --- config ------------------------------------------------------------------------------------


def _model(**kw):
    base = dict(instance_type="ml.g5.xlarge", plan={"peak_rps": 5})
    base.update(kw)
    return ModelConfig.model_validate(base)


def test_async_batch_config_accepted():
    m = _model(priority="batch", hosting="async", plan={"peak_rps": 5, "max_delay_s": 900})
    assert m.hosting == "async" and m.plan.max_delay_s == 900


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(hosting="async", priority="standard", plan={"peak_rps": 5, "max_delay_s": 900}),
         "hosting 'async' is for batch routes, but priority is 'standard'"),
        (dict(priority="batch"), "priority 'batch' queues instead of scaling for latency, so it is hosted async"),
        (dict(priority="batch", hosting="async"), "hosting 'async' needs plan.max_delay_s"),
        (dict(plan={"peak_rps": 5, "max_delay_s": 900}), "applies to hosting 'async' (batch) models only"),
        (dict(priority="batch", hosting="async", plan={"peak_rps": 5, "max_delay_s": 900, "min_instances": 2}),
         "plan.min_instances 2 has no effect on hosting 'async'"),
        (dict(priority="batch", hosting="async", plan={"peak_rps": 5, "max_delay_s": 0}), "greater than 0"),
    ],
)
def test_async_config_errors(kw, message):
    with pytest.raises(ValueError, match=None) as info:
        _model(**kw)
    assert message in str(info.value)


def test_realtime_dump_has_no_max_delay():
    """Real-time provenance documents keep their bytes: an unset max_delay_s is not dumped."""
    assert "max_delay_s" not in PlanInputs(peak_rps=5).model_dump_json()
    assert '"max_delay_s":900.0' in PlanInputs(peak_rps=5, max_delay_s=900).model_dump_json()


def test_batch_plan_kind_is_spelled_like_copy_plan_and_the_old_spelling_loads(qmax_ref, ttotal_ref):
    from speech.plan.batch import BatchPlan
    from speech.schema.copy_plan import CopyPlan

    p = build_batch_plan(qmax_ref, ttotal_ref, INPUTS)
    assert p.kind == "batch-plan" and CopyPlan.model_fields["kind"].default == "copy-plan"
    data = p.model_dump(mode="json")
    assert BatchPlan.model_validate(data) == p
    old = BatchPlan.model_validate({**data, "kind": "batch_plan"})  # written before the kinds were spelled one way
    assert old == p and old.kind == "batch-plan"
    with pytest.raises(ValueError, match="batch-plan"):
        BatchPlan.model_validate({**data, "kind": "plan"})
