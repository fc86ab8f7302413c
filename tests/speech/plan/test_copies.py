"""The copy artifact and the plan for copies: formulas shared with the instance plan, packing by
SageMaker's placement units, compute requirements in the real AWS and pulumi-aws-native shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import botocore.session
import pytest
from botocore.validate import ParamValidator
from pydantic import ValidationError

from speech.errors import ArtifactError, PlanInputError
from speech.files import load_artifact, write_artifact
from speech.plan.copies import FOOTPRINT_MARGIN, build_copy_plan, copies_sharing_devices, cpu_cores_required, min_memory_required_mb
from speech.plan.realtime import build_plan
from speech.schema.artifacts import CopyArtifact, CopyFootprint, CopyStart, Phase, Provenance, TtotalArtifact, copy_filename, nearest_rank
from speech.schema.config import PlanInputs, ReactionPolicy
from speech.schema.instances import INSTANCE_SPECS, InstanceSpec

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


def starts(*ready_s: float, dated: bool = False) -> list[CopyStart]:
    return [
        CopyStart(
            started_at=T0 + timedelta(minutes=i) if dated else None,
            framework_init_s=0.1 * ready,
            weights_ready_s=0.8 * ready,
            ready_s=ready,
        )
        for i, ready in enumerate(ready_s)
    ]


def copy_artifact(
    qmax_ref,
    *,
    ready_s: tuple[float, ...] = (7.2, 7.5, 8.1),
    device: str = "cuda",
    accelerator_mib: float | None = 1100.0,
    host_mib: float = 2300.0,
    cpu_cores: float | None = 1.0,
    statistic: str = "max",
) -> CopyArtifact:
    """An assumed copy (no public figures exist for a Kokoro copy): sizes of the order a
    82M-parameter model in fp32 with its allocator cache holds."""
    s = starts(*ready_s)
    return CopyArtifact(
        model=qmax_ref.model,
        fingerprint=qmax_ref.fingerprint,
        footprint=CopyFootprint(
            device=device, accelerator_memory_mib=accelerator_mib, host_memory_mib=host_mib, cpu_cores=cpu_cores
        ),
        starts=s,
        planning_statistic=statistic,
        **CopyArtifact.summarize(s, statistic),  # type: ignore[arg-type]
        provenance=Provenance(origin="assumption", source="tests: assumed copy"),
    )


def ttotal_of(seconds: float, model: str, fingerprint) -> TtotalArtifact:
    """A ttotal artifact whose measured total is ``seconds`` (one phase), to plan instances with."""
    return TtotalArtifact(
        model=model,
        trigger="reference",
        fingerprint=fingerprint,
        phases=[Phase(name="traffic_recovered", at=T0, offset_s=seconds, source="test", bounded=False)],
        measured_total_s=seconds,
        provenance=Provenance(origin="assumption", source="tests"),
    )


INPUTS = PlanInputs(peak_rps=100.0, trough_rps=10.0)


# --- the artifact -----------------------------------------------------------------------------


def test_copy_artifact_roundtrip_and_filename(tmp_path, qmax_ref):
    c = copy_artifact(qmax_ref)
    assert copy_filename(c) == "copy-kokoro-82m-g5xlarge-8b1b96bc.json"
    path = write_artifact(tmp_path / copy_filename(c), c)
    assert load_artifact(path, CopyArtifact) == c
    assert (c.t_copy_p50_s, c.t_copy_max_s, c.t_copy_s) == (7.5, 8.1, 8.1)
    assert c.starts[0].weights_load_s == pytest.approx(0.7 * 7.2)
    assert c.starts[0].warmup_s == pytest.approx(0.2 * 7.2)


def test_summary_must_match_the_starts(qmax_ref):
    data = json.loads(copy_artifact(qmax_ref).model_dump_json())
    with pytest.raises(ValidationError, match=r"t_copy_max_s 9\.0 does not match the starts \(8\.100 s\)"):
        CopyArtifact.model_validate({**data, "t_copy_max_s": 9.0})
    with pytest.raises(ValidationError, match=r"t_copy_s 7\.5 is not the starts' max"):
        CopyArtifact.model_validate({**data, "t_copy_s": 7.5})


def test_p95_is_nearest_rank_and_may_be_the_planning_figure(qmax_ref):
    samples = [float(x) for x in range(1, 41)]  # 40 starts: p95 is the 38th smallest
    assert nearest_rank(samples, 0.95) == 38.0
    assert nearest_rank([3.0, 1.0, 2.0], 0.95) == 3.0  # below 20 samples p95 is the max
    c = copy_artifact(qmax_ref, ready_s=tuple(samples), statistic="p95")
    assert (c.t_copy_p95_s, c.t_copy_max_s, c.t_copy_s) == (38.0, 40.0, 38.0)


def test_footprint_fields_follow_the_device():
    with pytest.raises(ValidationError, match="a cuda copy needs accelerator_memory_mib"):
        CopyFootprint(device="cuda", host_memory_mib=1000)
    with pytest.raises(ValidationError, match="a cpu copy has no accelerator memory"):
        CopyFootprint(device="cpu", accelerator_memory_mib=10, host_memory_mib=1000)
    with pytest.raises(ValidationError, match="exceeds the device's total"):
        CopyFootprint(device="cuda", accelerator_memory_mib=30000, accelerator_memory_total_mib=23028, host_memory_mib=1)
    assert CopyFootprint(device="cpu", host_memory_mib=900).packing_memory_mib == 900


def test_phases_must_be_in_order():
    with pytest.raises(ValidationError, match="weights_ready_s 9.0 is after ready_s 8.0"):
        CopyStart(weights_ready_s=9.0, ready_s=8.0)


def test_measured_copy_needs_the_evidence_bench_tcopy_writes(tmp_path, qmax_ref):
    c = copy_artifact(qmax_ref)
    data = json.loads(c.model_dump_json())
    data["provenance"] = {"origin": "measured", "source": "me"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=r"provenance\.tool \(None, expected 'bench tcopy'\).*Only bench tcopy writes"):
        load_artifact(path, CopyArtifact)
    data["provenance"] = {
        "origin": "measured", "source": "bench tcopy", "tool": "bench tcopy", "tool_version": "0.1",
        "target": "sagemaker:kokoro", "region": "eu-west-1", "measured_at": T0.isoformat(),
        "ended_at": (T0 + timedelta(minutes=5)).isoformat(),
    }
    path.write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=r"starts\[\]\.started_at \(starts \[0, 1, 2\]\)"):
        load_artifact(path, CopyArtifact)
    data["starts"] = json.loads(json.dumps([s.model_dump(mode="json") for s in starts(7.2, 7.5, 8.1, dated=True)]))
    path.write_text(json.dumps(data))
    assert load_artifact(path, CopyArtifact).provenance.origin == "measured"


# --- the plan: the instance plan's formulas with T_copy ------------------------------------------


@pytest.mark.parametrize("t_copy", [4.0, 8.1, 45.0, 130.0])
@pytest.mark.parametrize("reaction", [ReactionPolicy(), ReactionPolicy(metric_period_s=30, datapoints_to_alarm=2)])
def test_copy_numbers_are_the_instance_plans_with_t_copy_for_t_total(qmax_ref, t_copy, reaction):
    inputs = PlanInputs(peak_rps=100.0, trough_rps=10.0, surge_ratio=1.2, reaction=reaction)
    c = copy_artifact(qmax_ref, ready_s=(t_copy,))
    copies = build_copy_plan(qmax_ref, c, inputs, instance="ml.g5.12xlarge")
    instance_plan = build_plan(qmax_ref, ttotal_of(t_copy, qmax_ref.model, qmax_ref.fingerprint), inputs)
    assert copies.thresholds == instance_plan.thresholds
    assert copies.cooldowns == instance_plan.cooldowns
    assert copies.t_copy == instance_plan.t_total
    assert copies.surge == instance_plan.surge
    assert copies.capacity == instance_plan.capacity
    assert copies.q_max_per_copy == instance_plan.q_max == copies.queue_max_depth
    assert copies.copies.min_safe_copies == instance_plan.fleet.min_safe_instances
    # copies needed at peak are what the instance plan calls instances: both are "units of Q_max"
    assert copies.copies.at_peak == instance_plan.fleet.max_instances
    assert copies.scaling.target_value == instance_plan.thresholds.scaling_target_value
    assert copies.scaling.scale_out_cooldown_s == instance_plan.cooldowns.scale_out_s


def test_reference_copy_on_g5_12xlarge(qmax_ref, ttotal_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", ttotal=ttotal_ref)
    pk = p.packing
    assert pk.reserved_accelerator_memory_mib == pytest.approx(1100 * (1 + FOOTPRINT_MARGIN))
    assert (pk.accelerator_devices_per_copy, pk.copies_by_devices, pk.copies_by_accelerator_memory) == (1, 4, 80)
    assert pk.copies_per_instance == 4 and pk.limited_by == "accelerator_devices"
    # 100 rps at ~17.9 rps per copy -> 6 copies -> 2 instances of 4
    assert (p.copies.at_peak, p.copies.at_trough, p.copies.min_copies, p.copies.max_copies) == (6, 1, 1, 6)
    assert (p.instances.min_instances, p.instances.max_instances) == (1, 2)
    assert p.compute.aws() == {
        "MinMemoryRequiredInMb": 2530,
        "NumberOfAcceleratorDevicesRequired": 1.0,
        "NumberOfCpuCoresRequired": 1.25,
    }
    assert p.finding("copy_fits").level == "ok"
    assert p.finding("packing_utilization").level == "warn"
    assert "memory alone would hold 80" in p.finding("packing_utilization").message
    assert p.finding("hot_loading").level == "ok"
    assert p.t_total is not None and p.t_total.planning_s == pytest.approx(320.248)


def test_compute_requirements_validate_against_botocore_and_pulumi_aws_native(qmax_ref):
    """The names and types the program will send, checked by the real schemas."""
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.xlarge")
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.shape_for("InferenceComponentComputeResourceRequirements")
    report = ParamValidator().validate(p.compute.aws(), shape)
    assert not report.has_errors(), report.generate_report()
    bad = ParamValidator().validate({**p.compute.aws(), "NumberOfAcceleratorDevicesRequired": "one"}, shape)
    assert bad.has_errors()  # the validator does check

    from pulumi_aws_native.sagemaker import InferenceComponentComputeResourceRequirementsArgs

    args = InferenceComponentComputeResourceRequirementsArgs(**p.compute.model_dump(exclude_none=True))
    assert args.min_memory_required_in_mb == p.compute.min_memory_required_in_mb
    assert args.number_of_accelerator_devices_required == 1.0


def test_copy_larger_than_any_device_spans_devices_or_does_not_fit(qmax_ref):
    big = copy_artifact(qmax_ref, accelerator_mib=30_000.0)  # x1.1 = 33000 MiB > one A10G
    on_four = build_copy_plan(qmax_ref, big, INPUTS, instance="ml.g5.12xlarge")
    assert on_four.packing.accelerator_devices_per_copy == 2
    assert on_four.packing.copies_per_instance == 2
    assert on_four.compute.number_of_accelerator_devices_required == 2.0
    on_one = build_copy_plan(qmax_ref, big, INPUTS, instance="ml.g5.xlarge")
    assert on_one.packing.copies_per_instance == 0
    assert on_one.finding("copy_fits").level == "stop" and on_one.verdict == "stop"
    assert "2 x 24576 MiB devices, but ml.g5.xlarge has 1" in on_one.finding("copy_fits").message


def test_gpu_copy_on_a_cpu_instance_is_a_stop(qmax_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.c5.xlarge")
    assert p.finding("copy_fits").level == "stop"
    assert "has no accelerator" in p.finding("copy_fits").message


def test_cpu_copy_packs_by_cores_and_memory(qmax_ref):
    c = copy_artifact(qmax_ref, device="cpu", accelerator_mib=None, host_mib=1500.0, cpu_cores=1.5)
    p = build_copy_plan(qmax_ref, c, INPUTS, instance="ml.c5.2xlarge")
    # 1.5 x 1.1 = 1.65 -> 1.75 cores; 8 vCPUs -> 4 copies; memory 16384 / 1650 -> 9 copies
    assert p.packing.reserved_cpu_cores == 1.75
    assert (p.packing.copies_by_cpu, p.packing.copies_by_host_memory) == (4, 9)
    assert p.packing.copies_per_instance == 4 and p.packing.limited_by == "cpu_cores"
    assert p.compute.number_of_accelerator_devices_required is None
    assert "NumberOfAcceleratorDevicesRequired" not in p.compute.aws()
    assert p.packing.memory_used_fraction == pytest.approx(4 * 1500 / 16384, abs=1e-6)


def test_unmeasured_cpu_use_leaves_cores_unconstrained(qmax_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref, cpu_cores=None), INPUTS, instance="ml.g5.xlarge")
    assert p.packing.copies_by_cpu is None and p.compute.number_of_cpu_cores_required is None


def test_hot_loading_that_buys_little_is_said(qmax_ref):
    c = copy_artifact(qmax_ref, ready_s=(150.0,))
    p = build_copy_plan(qmax_ref, c, INPUTS, ttotal=ttotal_of(200.0, qmax_ref.model, qmax_ref.fingerprint))
    f = p.finding("hot_loading")
    assert f.level == "warn" and "hot loading buys little" in f.message
    without = build_copy_plan(qmax_ref, c, INPUTS)
    assert without.finding("hot_loading").level == "warn" and "run bench ttotal" in without.finding("hot_loading").message


def test_scale_to_zero_gives_zero_floors_and_says_what_it_costs(qmax_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", min_copies=0)
    assert p.copies.min_copies == 0 and p.instances.min_instances == 0 and p.instances.max_instances == 2
    assert "scale to zero" in p.finding("scale_in_safety").message


def test_instance_cap_below_the_need_is_a_stop(qmax_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.xlarge", max_instances_cap=3)
    assert p.instances.max_instances == 3 and p.copies.max_copies == 3
    assert p.finding("fleet_capacity").level == "stop" and "raise the cap to 6" in p.finding("fleet_capacity").message


def test_floor_of_copies_sets_the_instance_floor(qmax_ref):
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", min_copies=5)
    assert p.copies.min_copies == 5 and p.instances.min_instances == 2


def test_inputs_that_cannot_be_planned(qmax_ref):
    c = copy_artifact(qmax_ref)
    with pytest.raises(PlanInputError, match=r"'ml\.x9\.huge' is not in the instance table"):
        build_copy_plan(qmax_ref, c, INPUTS, instance="ml.x9.huge")
    with pytest.raises(PlanInputError, match="copy artifact for 'other'"):
        build_copy_plan(qmax_ref, c.model_copy(update={"model": "other"}), INPUTS)
    with pytest.raises(PlanInputError, match="min_copies -1 is negative"):
        build_copy_plan(qmax_ref, c, INPUTS, min_copies=-1)


def test_a_custom_instance_spec_is_used_as_given(qmax_ref):
    spec = InstanceSpec(instance_type="ml.g7.xlarge", accelerator="X", accelerator_count=2,
                        accelerator_memory_mib=1000, vcpus=8, memory_mib=64000)
    p = build_copy_plan(qmax_ref, copy_artifact(qmax_ref, accelerator_mib=800.0), INPUTS, instance=spec)
    assert p.packing.copies_per_instance == 2 and p.packing.instance == spec


def test_rounding_steps():
    assert min_memory_required_mb(10.0) == 128
    assert min_memory_required_mb(1000.0) == 1100
    assert cpu_cores_required(0.1) == 0.25
    assert cpu_cores_required(1.0) == 1.25
    assert copies_sharing_devices(1000.0, 4, 24576) == 96
    assert copies_sharing_devices(30000.0, 4, 24576) == 2


def test_instance_table_is_consistent():
    for name, spec in INSTANCE_SPECS.items():
        assert name == spec.instance_type and name.startswith("ml.")
        assert (spec.accelerator is None) == (spec.accelerator_count == 0) == (spec.accelerator_memory_mib == 0)
        assert spec.vcpus > 0 and spec.memory_mib > 0


def test_hot_loading_on_a_one_gpu_instance_says_every_copy_waits_for_an_instance(qmax_ref, ttotal_ref):
    # The same fast copy: on ml.g5.12xlarge (4 GPUs) hot loading pays off, on ml.g5.xlarge (1 GPU)
    # each added copy needs a new instance, so T_copy buys nothing.
    c = copy_artifact(qmax_ref)
    roomy = build_copy_plan(qmax_ref, c, INPUTS, instance="ml.g5.12xlarge", ttotal=ttotal_ref)
    single = build_copy_plan(qmax_ref, c, INPUTS, instance="ml.g5.xlarge", ttotal=ttotal_ref)
    assert roomy.packing.copies_per_instance == 4 and roomy.finding("hot_loading").level == "ok"
    assert single.packing.copies_per_instance == 1
    f = single.finding("hot_loading")
    assert f.level == "warn" and "only one copy fits an instance" in f.message


def _zero_floor_alarm(qmax_ref, ttotal=None):
    from speech.deploy.scaling.copies import copy_scale_in_alarm

    zero = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", min_copies=0,
                           ttotal=ttotal)
    return zero, copy_scale_in_alarm(zero, "dev-kokoro-82m")


def _alarm_states(alarm, periods, extra_range):
    """The alarm's state after each minute (from its n-th), by CloudWatch's documented rule."""
    from speech.deploy.alarm_eval import evaluate

    n = alarm.evaluation_periods
    return evaluate(periods, threshold=alarm.threshold, comparison=alarm.comparison, evaluation_periods=n,
                    datapoints_to_alarm=alarm.datapoints_to_alarm, treat_missing_data=alarm.treat_missing_data,
                    evaluation_range=n + extra_range)


# Whether FILL fills a series with no point in the whole range is not documented; each verdict
# below must hold either way, over several evaluation ranges.
FILL_AND_RANGE = [(fill_empty, extra) for fill_empty in (True, False) for extra in (0, 2, 5)]


@pytest.mark.parametrize("fill_empty, extra_range", FILL_AND_RANGE)
def test_one_copy_under_steady_light_load_is_kept(qmax_ref, fill_empty, extra_range):
    """Issue 46 item 1: one copy serving steady light load (below the per-copy C_scale_min) for an
    hour. The old N -> N-1 rule removed it after one window, and every request then failed until a
    new copy started; now a minute one copy served reads as the guard value, and it stays."""
    from speech.deploy.alarm_eval import guarded_periods

    zero, alarm = _zero_floor_alarm(qmax_ref)
    light = alarm.threshold / 2
    minutes = 60
    conc, inv = [light] * minutes, [300.0] * minutes
    one_copy = list(inv)  # InvocationsPerCopy = Invocations / 1 copy
    old_rule = _alarm_states(alarm, conc, extra_range)
    assert "ALARM" in old_rule  # the defect: the per-copy rule alone removes the last, busy copy
    guarded = guarded_periods(conc, inv, one_copy, [None] * minutes, alarm.wake_guard, fill_empty=fill_empty)
    assert set(_alarm_states(alarm, guarded, extra_range)) == {"OK"}


@pytest.mark.parametrize("fill_empty, extra_range", FILL_AND_RANGE)
@pytest.mark.parametrize("idle_concurrency", [0.0, None])
def test_an_idle_hour_removes_the_last_copy(qmax_ref, fill_empty, extra_range, idle_concurrency):
    """Issue 46 items 1 and 5: nothing invoked for an hour. The alarm reaches ALARM one window in and
    stays there (its -1 step is invoked again after each cooldown, down to zero copies), whether the
    idle copy publishes zeros or nothing and whether FILL fills an all-empty series or not: before,
    an all-empty series left the alarm in INSUFFICIENT_DATA and the copy and its instance stayed."""
    from speech.deploy.alarm_eval import guarded_periods

    zero, alarm = _zero_floor_alarm(qmax_ref)
    minutes, n = 60, alarm.evaluation_periods
    none = [None] * minutes
    guarded = guarded_periods([idle_concurrency] * minutes, none, none, none, alarm.wake_guard, fill_empty=fill_empty)
    states = _alarm_states(alarm, guarded, extra_range)
    assert states == ["ALARM"] * len(states) and len(states) == minutes - n + 1
    assert alarm.treat_missing_data == "breaching"


@pytest.mark.parametrize("fill_empty, extra_range", FILL_AND_RANGE)
def test_two_lightly_loaded_copies_lose_one_and_the_last_stays(qmax_ref, fill_empty, extra_range):
    """N >= 2 keeps the per-copy C_scale_min rule: two copies under light load go to one; the one
    left, serving the same light load, is kept."""
    from speech.deploy.alarm_eval import guarded_periods

    zero, alarm = _zero_floor_alarm(qmax_ref)
    n, light = alarm.evaluation_periods, alarm.threshold / 2
    two, one = 2 * n, 3 * n
    conc = [light] * (two + one)
    inv = [300.0] * (two + one)
    ipc = [150.0] * two + [300.0] * one  # two copies share the requests, then one serves them all
    states = _alarm_states(alarm, guarded_periods(conc, inv, ipc, [None] * len(conc), alarm.wake_guard,
                                                  fill_empty=fill_empty), extra_range)
    by_minute = {n - 1 + i: s for i, s in enumerate(states)}
    assert by_minute[n - 1] == "ALARM"  # two copies at light load: remove one
    assert {by_minute[m] for m in range(two, two + one)} == {"OK"}  # from the first one-copy minute on


def _wake_timeline(n: int, busy: float, down_min: int = 2, start_min: int = 8, busy_min: int = 2):
    """Per minute (ConcurrentRequestsPerCopy Maximum, Invocations, InvocationsPerCopy,
    NoCapacityInvocationFailures): an idle copy (n low minutes, nothing invoked: removed),
    ``down_min`` minutes at zero copies, one minute in which a request found no copy (the wake),
    ``start_min`` minutes while the woken copy starts (no copy, no data), then the copy serves
    (``busy_min`` busy minutes) and goes idle again. Returns the four series and the index of the
    wake minute and of the copy's first minute."""
    conc: list[float | None] = [0.0] * n + [None] * down_min
    inv: list[float | None] = [None] * (n + down_min)
    fail: list[float | None] = [None] * (n + down_min)
    wake = len(conc)
    conc += [None] * (1 + start_min)
    inv += [None] * (1 + start_min)
    fail += [1.0] + [None] * start_min
    first = len(conc)
    conc += [busy] * busy_min + [0.0] * (3 * n)
    inv += [100.0] * busy_min + [None] * (3 * n)
    fail += [None] * (busy_min + 3 * n)
    return conc, inv, list(inv), fail, wake, first


@pytest.mark.parametrize("extra_range", [0, 2, 5])
@pytest.mark.parametrize("with_ttotal", [False, True])
def test_a_wake_is_not_undone_by_the_zero_floor_scale_in_alarm(qmax_ref, ttotal_ref, extra_range, with_ttotal):
    """The documented rule (speech.deploy.alarm_eval): the idle copy is removed, the alarm stays in
    ALARM at zero copies, and the minute a request finds no copy it must leave ALARM (else the -1
    step undoes the wake's +1) and not return to it until the woken copy has served and then been
    idle for the whole window. The window covers the woken copy's start (T_copy, or T_total from zero
    instances), however long. FILL of a series with points fills it (documented)."""
    from speech.deploy.alarm_eval import guarded_periods
    from speech.deploy.scaling.copies import wake_cooldown_s

    zero, alarm = _zero_floor_alarm(qmax_ref, ttotal_ref if with_ttotal else None)
    n = alarm.evaluation_periods
    start_min = -(-wake_cooldown_s(zero) // 60)
    assert alarm.wake_guard is not None and alarm.wake_guard > alarm.threshold and alarm.period_s == 60
    assert alarm.datapoints_to_alarm == n
    conc, inv, ipc, fail, wake, first = _wake_timeline(n, busy=float(zero.q_max_per_copy), start_min=start_min)
    got = _alarm_states(alarm, guarded_periods(conc, inv, ipc, fail, alarm.wake_guard), extra_range)
    guarded = {minute: got[minute - (n - 1)] for minute in range(n - 1, len(conc))}
    assert guarded[n - 1] == "ALARM"  # the idle copy is removed: scale to zero works
    assert guarded[wake - 1] == "ALARM"  # ...and at zero copies the alarm stays in ALARM
    idle_again = first + 2 + n - 1  # the woken copy's n-th idle minute after its busy ones
    pending = [m for m in range(wake, idle_again) if guarded[m] == "ALARM"]
    assert pending == [], f"the copy woken at minute {wake} is removed at minutes {pending}"
    assert guarded[idle_again] == "ALARM"  # an idle woken copy still goes, a whole window later


def test_the_zero_floor_window_covers_the_woken_copys_start(qmax_ref):
    from speech.deploy.scaling.copies import wake_cooldown_s
    from speech.plan.formulas import scale_in_evaluation_periods

    zero, alarm = _zero_floor_alarm(qmax_ref)
    period = INPUTS.reaction.metric_period_s
    window_min = -(-scale_in_evaluation_periods(period) * period // 60)
    assert alarm.evaluation_periods == window_min + -(-wake_cooldown_s(zero) // 60)


def test_the_scale_in_alarm_of_a_floor_of_one_breaches_on_missing_data(qmax_ref):
    one = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", min_copies=1)
    alarm = copy_scale_in_alarm_of(one)
    assert alarm.treat_missing_data == "breaching" and alarm.wake_guard is None
    assert alarm.period_s == INPUTS.reaction.metric_period_s


def copy_scale_in_alarm_of(plan):
    from speech.deploy.scaling.copies import copy_scale_in_alarm

    return copy_scale_in_alarm(plan, "dev-kokoro-82m")


def test_the_guarded_alarm_is_a_valid_put_metric_alarm_and_reads_back(qmax_ref):
    """The guarded queries as PutMetricAlarm takes them (botocore's cloudwatch model), and read back
    from DescribeAlarms' shape into the same spec (what bench drift does)."""
    from speech.deploy.scaling import GUARD_EXPRESSION, diff, guarded_queries, read_guarded
    from speech.deploy.scaling.copies import copy_scale_in_alarm

    zero = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), INPUTS, instance="ml.g5.12xlarge", min_copies=0)
    alarm = copy_scale_in_alarm(zero, "dev-kokoro-82m")
    metrics = [{"Id": q.id, "ReturnData": q.return_data, **({"Expression": q.expression} if q.expression else {
        "MetricStat": {"Metric": {"Namespace": q.namespace, "MetricName": q.metric_name,
                                  "Dimensions": [{"Name": k, "Value": v} for k, v in q.dimensions]},
                       "Period": alarm.period_s, "Stat": q.stat}})} for q in guarded_queries(alarm)]
    params = {"AlarmName": alarm.name, "EvaluationPeriods": alarm.evaluation_periods,
              "DatapointsToAlarm": alarm.datapoints_to_alarm, "Threshold": alarm.threshold,
              "ComparisonOperator": alarm.comparison, "TreatMissingData": alarm.treat_missing_data, "Metrics": metrics}
    shape = botocore.session.get_session().get_service_model("cloudwatch").operation_model("PutMetricAlarm").input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    flat = read_guarded(metrics)
    import dataclasses

    back = dataclasses.replace(alarm, **{k: flat[k] for k in ("namespace", "metric_name", "dimensions", "statistic",
                                                               "period_s", "wake_guard")})
    assert diff("scale_in_alarm", alarm, back) == []
    # A hand edit of the guard value is a difference the pack and drift report; so is the old
    # expression (the one copy under light load was removed).
    metrics[-1]["Expression"] = "IF(FILL(nocap, 0) > 0, 1, low)"
    assert isinstance(read_guarded(metrics)["wake_guard"], str)  # not the planned shape: a difference
    metrics[-1]["Expression"] = GUARD_EXPRESSION.format(value="1")
    assert read_guarded(metrics)["wake_guard"] == 1.0
