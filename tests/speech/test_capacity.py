"""Capacity evaluation: best-fit into spare memory, new instances for the rest, fragmentation."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from speech.plan.capacity import (
    FleetInstance, FleetModel, FleetState, best_fit, copies_for, evaluate_capacity, fleet_model, place_best_fit_decreasing,
)
from speech.schema.config import PlanInputs
from speech.plan.copies import build_copy_plan
from speech.errors import PlanInputError

from .test_copies import copy_artifact

MODEL = FleetModel(
    copy_memory_mib=4000,
    concurrency_per_copy=10,
    t_copy_s=40,
    t_total_s=320,
    new_instance_type="ml.g5.12xlarge",
    new_instance_accelerator_memory_mib=4 * 24576,
)


def fleet(*free: float, total: float = 24576.0, model: FleetModel = MODEL, **kw) -> FleetState:
    return FleetState(
        instances=[
            FleetInstance(name=f"i{n}", instance_type="ml.g5.xlarge", accelerator_memory_mib=total,
                          used_accelerator_memory_mib=total - f)
            for n, f in enumerate(free)
        ],
        models={"kokoro": model},
        **kw,
    )


def test_best_fit_chooses_the_tightest_instance():
    # 9000, 4500 and 20000 MiB free: a 4000 MiB copy goes where 500 would be left
    ev = evaluate_capacity(fleet(9000, 4500, 20000), "kokoro", 10)
    assert ev.copies_needed == 1 and ev.hot_loadable == 1
    assert [(p.instance, p.copies, p.free_after_mib) for p in ev.placements] == [("i1", 1, 500.0)]
    assert ev.new_instances == 0 and ev.finding("hot_load").level == "ok"
    assert [s.part for s in ev.serving] == ["hot-load"] and ev.serving[0].serving_after_s == 40


def test_best_fit_keeps_filling_the_tightest_then_moves_on():
    ev = evaluate_capacity(fleet(9000, 4500, 20000), "kokoro", 40)  # 4 copies
    # i1 (4500 -> 500), then i0 (9000 -> 5000 -> 1000), then i2
    assert [s.instance for s in ev.steps] == ["i1", "i0", "i0", "i2"]
    assert [s.free_after_mib for s in ev.steps] == [500.0, 5000.0, 1000.0, 16000.0]


def test_ties_go_to_the_instance_listed_first():
    assert best_fit([5000.0, 5000.0], 4000.0) == 0
    assert best_fit([3000.0], 4000.0) is None


def test_fragmentation_is_reported_when_split_memory_would_hold_copies():
    # 3 x 3000 MiB free = 9000 MiB, enough for 2 copies of 4000 together, but none fits anywhere
    ev = evaluate_capacity(fleet(3000, 3000, 3000), "kokoro", 20)
    assert ev.hot_loadable == 0 and ev.copies_on_new_instances == 2 and ev.new_instances == 1
    assert ev.fragmentation is not None
    assert (ev.fragmentation.free_total_mib, ev.fragmentation.largest_free_mib, ev.fragmentation.copies_if_contiguous) == (
        9000.0, 3000.0, 2)
    assert {f.name for f in ev.findings} >= {"fragmentation", "hot_load"}
    assert "split so that no copy fits" in ev.finding("fragmentation").message


def test_no_fragmentation_when_free_memory_is_too_small_anyway():
    ev = evaluate_capacity(fleet(1000, 1000), "kokoro", 10)
    assert ev.fragmentation is None and ev.new_instances == 1


def test_copies_larger_than_any_instance_are_unplaceable():
    huge = MODEL.model_copy(update={"copy_memory_mib": 200_000.0})
    ev = evaluate_capacity(fleet(24576, model=huge), "kokoro", 25)
    assert ev.copies_needed == 3 and ev.hot_loadable == 0
    assert ev.unplaceable_copies == 3 and ev.new_instances == 0 and ev.copies_per_new_instance == 0
    assert ev.verdict == "stop" and "fit no running instance and no new ml.g5.12xlarge" in ev.findings[0].message
    assert ev.serving == []


def test_a_delta_that_needs_copies_and_instances():
    # 2 copies fit (8000 + 4100 free), 5 more need 98304 / 4000 = 24 per new instance -> 1 instance
    ev = evaluate_capacity(fleet(8000, 4100, 100), "kokoro", 65)
    assert ev.copies_needed == 7 and ev.hot_loadable == 3 and ev.copies_on_new_instances == 4
    assert ev.copies_per_new_instance == 24 and ev.new_instances == 1
    assert [(s.part, s.copies, s.concurrency, s.serving_after_s) for s in ev.serving] == [
        ("hot-load", 3, 30.0, 40.0), ("new-instances", 4, 40.0, 320.0)]
    assert ev.verdict == "warn"


def test_many_new_instances_are_counted():
    small = MODEL.model_copy(update={"new_instance_accelerator_memory_mib": 24576.0})  # 6 copies per new instance
    ev = evaluate_capacity(FleetState(models={"kokoro": small}), "kokoro", 130)  # 13 copies, no fleet
    assert ev.hot_loadable == 0 and ev.new_instances == 3 and ev.copies_per_new_instance == 6


def test_bad_inputs_are_refused_with_the_way_out():
    with pytest.raises(PlanInputError, match=r"model 'nope' is not in the fleet file's models \(kokoro\)"):
        evaluate_capacity(fleet(1), "nope", 1)
    for bad in (0, -3, float("inf"), float("nan")):
        with pytest.raises(PlanInputError, match="must be a finite number > 0"):
            evaluate_capacity(fleet(1), "kokoro", bad)
    with pytest.raises(ValidationError, match="exceeds its accelerator_memory_mib"):
        FleetInstance(name="a", instance_type="ml.g5.xlarge", accelerator_memory_mib=10, used_accelerator_memory_mib=11)
    with pytest.raises(ValidationError, match="repeated: a"):
        FleetState(instances=[FleetInstance(name="a", instance_type="x", accelerator_memory_mib=1)] * 2,
                   models={"kokoro": MODEL})


def test_fleet_file_roundtrips_as_json():
    f = fleet(9000, 4500, placement="inferred", source="sagemaker:kokoro")
    assert FleetState.model_validate_json(f.model_dump_json()) == f
    data = json.loads(f.model_dump_json())
    data["extra"] = 1
    with pytest.raises(ValidationError, match="extra"):
        FleetState.model_validate(data)
    assert evaluate_capacity(f, "kokoro", 1).finding("placement_source").level == "warn"


def test_fleet_model_from_a_copy_plan_reserves_whole_devices(qmax_ref, ttotal_ref):
    plan = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), PlanInputs(peak_rps=100), instance="ml.g5.12xlarge",
                           ttotal=ttotal_ref)
    m = fleet_model(plan)
    assert m.copy_memory_mib == 24576 and m.new_instance_accelerator_memory_mib == 4 * 24576
    assert m.concurrency_per_copy == plan.thresholds.c_scale_max and m.t_copy_s == plan.t_copy.planning_s
    assert fleet_model(plan, shared_devices=True).copy_memory_mib == plan.packing.reserved_accelerator_memory_mib
    # a delta of 4 copies onto an empty fleet: one new instance holding exactly 4 (SageMaker's packing)
    ev = evaluate_capacity(FleetState(models={"k": m}), "k", 4 * plan.thresholds.c_scale_max)
    assert ev.copies_per_new_instance == plan.packing.copies_per_instance == 4 and ev.new_instances == 1
    no_ttotal = build_copy_plan(qmax_ref, copy_artifact(qmax_ref), PlanInputs(peak_rps=100), instance="ml.g5.xlarge")
    with pytest.raises(PlanInputError, match="has no T_total"):
        fleet_model(no_ttotal)


# --- properties -------------------------------------------------------------------------------

frees = st.lists(st.floats(min_value=0, max_value=50_000, allow_nan=False), min_size=0, max_size=8)
copy_mib = st.floats(min_value=100, max_value=60_000, allow_nan=False)
deltas = st.floats(min_value=0.5, max_value=500, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(frees, copy_mib, deltas, st.floats(min_value=0.5, max_value=60, allow_nan=False))
def test_properties_of_an_evaluation(free, size, delta, per_copy):
    m = MODEL.model_copy(update={"copy_memory_mib": size, "concurrency_per_copy": per_copy})
    f = fleet(*free, total=50_000.0, model=m)
    ev = evaluate_capacity(f, "kokoro", delta)
    # never beyond free memory, per instance
    for p in ev.placements:
        inst = next(i for i in f.instances if i.name == p.instance)
        assert p.copies * size <= inst.free_mib + 1e-3
        assert p.free_after_mib >= -1e-3
    # copies placed + copies on new instances (+ any that fit nowhere) cover the delta
    assert ev.hot_loadable + ev.copies_on_new_instances + ev.unplaceable_copies == ev.copies_needed
    assert ev.copies_needed * per_copy >= delta - 1e-6
    if ev.copies_on_new_instances:
        assert ev.new_instances * ev.copies_per_new_instance >= ev.copies_on_new_instances
    # each step took the instance with the least memory left among those it fitted
    free_now = {i.name: i.free_mib for i in f.instances}
    for s in ev.steps:
        candidates = [v for v in free_now.values() if v + 1e-6 >= size]
        assert s.free_before_mib == pytest.approx(free_now[s.instance], abs=1e-2)
        assert free_now[s.instance] - size <= min(candidates) - size + 1e-6
        free_now[s.instance] -= size
    # nothing left on the table: a copy sent to a new instance fitted no running one
    if ev.copies_on_new_instances or ev.unplaceable_copies:
        assert all(v + 1e-6 < size for v in free_now.values())


@settings(max_examples=100, deadline=None)
@given(frees, st.lists(st.floats(min_value=1, max_value=20_000, allow_nan=False), max_size=12))
def test_best_fit_decreasing_never_overfills(free, sizes):
    where, left = place_best_fit_decreasing(free, sizes)
    for i, f in enumerate(free):
        placed = sum(s for s, w in zip(sizes, where, strict=True) if w == i)
        assert placed <= f + 1e-3 and left[i].accelerator_memory_mib == pytest.approx(f - placed, abs=1e-3)


def test_a_huge_delta_is_arithmetic_not_a_loop():
    ev = evaluate_capacity(fleet(9000, 4500), "kokoro", 1e9)  # 1e8 copies
    assert ev.hot_loadable == 3 and ev.copies_on_new_instances == 10**8 - 3
    assert ev.new_instances == math.ceil((10**8 - 3) / 24)


def test_copies_for_rounds_up():
    assert copies_for(10, 10) == 1 and copies_for(10.5, 10) == 2 and copies_for(37.5, 37.5) == 1


