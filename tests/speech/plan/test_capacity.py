"""Capacity evaluation: best-fit into spare room (accelerator memory, CPU cores, host memory), new
instances for the rest, fragmentation; old accelerator-only fleet files give the old results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from speech.errors import PlanInputError
from speech.plan.capacity import copies_for, evaluate_capacity, fleet_model
from speech.plan.copies import build_copy_plan
from speech.plan.fleet import FleetInstance, FleetModel, FleetState
from speech.plan.placement import Amounts, best_fit, binding_resource, fits, place_best_fit_decreasing
from speech.schema.config import PlanInputs

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




# --- every resource a copy requests -----------------------------------------------------------

DATA = Path(__file__).parents[1] / "data"

CPU_MODEL = FleetModel(
    copy_cpu_cores=4, copy_host_memory_mib=2530, concurrency_per_copy=6, t_copy_s=20, t_total_s=290,
    new_instance_type="ml.c7i.4xlarge", new_instance_cpu_cores=16, new_instance_host_memory_mib=32768,
)


def cpu_instance(name: str, cores_free: float, host_free_mib: float, *, cores: float = 16, host_mib: float = 32768,
                 **kw) -> FleetInstance:
    return FleetInstance(name=name, instance_type="ml.c7i.4xlarge", cpu_cores=cores, used_cpu_cores=cores - cores_free,
                         host_memory_mib=host_mib, used_host_memory_mib=host_mib - host_free_mib, **kw)


def test_a_copy_that_fits_by_memory_but_not_by_cores_is_not_placed():
    # 30 GiB of host memory free but 3 cores: a 4-core copy does not fit there
    f = FleetState(instances=[cpu_instance("i0", 3, 30000)], models={"k": CPU_MODEL})
    ev = evaluate_capacity(f, "k", 6)
    assert ev.copies_needed == 1 and ev.hot_loadable == 0 and ev.steps == []
    assert ev.copies_on_new_instances == 1 and ev.new_instances == 1
    assert ev.fragmentation is None  # nothing split: the fleet together has 3 cores
    # the same instance with 4 cores free takes it, and says cores bound the choice
    ev = evaluate_capacity(FleetState(instances=[cpu_instance("i0", 4, 30000)], models={"k": CPU_MODEL}), "k", 6)
    assert ev.hot_loadable == 1 and ev.steps[0].binding == "cpu_cores"
    assert (ev.steps[0].free_after.cpu_cores, ev.steps[0].free_after.host_memory_mib) == (0.0, 30000 - 2530)
    assert ev.steps[0].free_after.accelerator_memory_mib == 0.0  # a CPU instance: no accelerator memory


def test_a_copy_that_fits_by_cores_but_not_by_host_memory_is_not_placed():
    f = FleetState(instances=[cpu_instance("i0", 16, 2000)], models={"k": CPU_MODEL})
    assert evaluate_capacity(f, "k", 6).hot_loadable == 0


def test_a_gpu_copy_does_not_fit_a_cpu_instance_and_a_cpu_copy_fits_a_gpu_instance():
    gpu = FleetInstance(name="g", instance_type="ml.g5.12xlarge", accelerator_memory_mib=98304, cpu_cores=48,
                        host_memory_mib=196608)
    cpu = cpu_instance("c", 16, 32768)
    gpu_model = MODEL.model_copy(update={"copy_cpu_cores": 1.0, "copy_host_memory_mib": 2530.0,
                                         "new_instance_cpu_cores": 48.0, "new_instance_host_memory_mib": 196608.0})
    f = FleetState(instances=[cpu, gpu], models={"gpu": gpu_model, "cpu": CPU_MODEL})
    assert {s.instance for s in evaluate_capacity(f, "gpu", 30).steps} == {"g"}
    # the CPU copy binds on cores: 16 free on c leaves 12 (3 copies' worth), 48 on g leaves 44: c is tighter
    assert [s.instance for s in evaluate_capacity(f, "cpu", 6).steps] == ["c"]


def test_best_fit_compares_the_binding_resource_in_copies_left():
    # i0: 8 cores (2 copies' worth) and lots of memory; i1: 16 cores but memory for 2 copies only.
    # After one copy: i0 has 1 copy's worth of cores left, i1 1 copy's worth of memory: a tie -> i0 (listed first).
    f = FleetState(instances=[cpu_instance("i0", 8, 30000), cpu_instance("i1", 16, 2 * 2530)], models={"k": CPU_MODEL})
    ev = evaluate_capacity(f, "k", 6)
    assert [(s.instance, s.binding) for s in ev.steps] == [("i0", "cpu_cores")]
    # i1 with memory for one copy only is tighter (0 left after it) and wins; the next copy fits i0 only
    f = FleetState(instances=[cpu_instance("i0", 8, 30000), cpu_instance("i1", 16, 2530)], models={"k": CPU_MODEL})
    ev = evaluate_capacity(f, "k", 12)
    assert [(s.instance, s.binding) for s in ev.steps] == [("i1", "host_memory_mib"), ("i0", "cpu_cores")]
    assert binding_resource(Amounts(0, 8, 30000), Amounts(0, 4, 2530)) == (1.0, "cpu_cores")


def test_a_cpu_only_fleet():
    # three c7i.4xlarge: 4, 8 and 16 cores free; 10 copies of 4 cores + 2530 MiB
    f = FleetState(instances=[cpu_instance("a", 4, 20000), cpu_instance("b", 8, 20000), cpu_instance("c", 16, 32768)],
                   models={"k": CPU_MODEL})
    ev = evaluate_capacity(f, "k", 60)
    assert ev.copies_needed == 10
    assert [s.instance for s in ev.steps] == ["a", "b", "b", "c", "c", "c", "c"]
    assert ev.hot_loadable == 7 and ev.copies_on_new_instances == 3
    # a new c7i.4xlarge holds min(16 / 4, 32768 // 2530) = min(4, 12) = 4 copies: cores set it
    assert (ev.copies_per_new_instance, ev.new_instance_limited_by, ev.new_instances) == (4, "cpu_cores", 1)
    assert "limited by CPU cores" in ev.finding("hot_load").message
    assert all(p.free_after.cpu_cores == 0 for p in ev.placements)
    assert FleetState.model_validate_json(f.model_dump_json()) == f


def test_host_memory_can_set_copies_per_new_instance():
    fat = CPU_MODEL.model_copy(update={"copy_cpu_cores": 1.0, "copy_host_memory_mib": 10000.0})
    ev = evaluate_capacity(FleetState(models={"k": fat}), "k", 60)
    assert (ev.copies_per_new_instance, ev.new_instance_limited_by, ev.new_instances) == (3, "host_memory_mib", 4)


def test_a_cpu_copy_larger_than_the_new_instance_is_unplaceable_and_names_the_resource():
    huge = CPU_MODEL.model_copy(update={"copy_cpu_cores": 32.0})
    ev = evaluate_capacity(FleetState(models={"k": huge}), "k", 6)
    assert ev.unplaceable_copies == 1 and ev.verdict == "stop"
    msg = ev.finding("copy_fits").message
    assert "a copy requests 32 of CPU cores, it has 16" in msg and "more CPU cores" in msg


def test_cores_split_across_instances_are_fragmentation():
    # 2 + 2 + 2 cores free: one 4-core copy would fit if the cores were on one instance
    f = FleetState(instances=[cpu_instance(n, 2, 30000) for n in "abc"], models={"k": CPU_MODEL})
    ev = evaluate_capacity(f, "k", 6)
    assert ev.hot_loadable == 0 and ev.fragmentation is not None
    assert ev.fragmentation.copies_if_contiguous == 1 and ev.fragmentation.free_total.cpu_cores == 6
    assert "no instance has all of a copy's request free" in ev.finding("fragmentation").message


def test_a_model_goes_only_to_its_own_variants_instances():
    gpu = FleetInstance(name="g", instance_type="ml.g5.12xlarge", variant="gpu", accelerator_memory_mib=98304,
                        cpu_cores=48, host_memory_mib=196608)
    f = FleetState(instances=[gpu, cpu_instance("c", 16, 32768, variant="cpu")],
                   models={"k": CPU_MODEL.model_copy(update={"variant": "cpu"})})
    ev = evaluate_capacity(f, "k", 60)  # 10 copies: 4 on c, none on the GPU variant's g
    assert {s.instance for s in ev.steps} == {"c"} and ev.hot_loadable == 4
    ev = evaluate_capacity(FleetState(instances=[gpu], models={"k": CPU_MODEL.model_copy(update={"variant": "cpu"})}), "k", 6)
    assert ev.hot_loadable == 0 and "no running instance of variant cpu" in ev.finding("fleet_empty").message


def test_resources_a_copy_requests_must_be_tracked():
    with pytest.raises(ValidationError, match="model 'k' requests copy_cpu_cores 4 but instance 'a' has no cpu_cores: add"):
        FleetState(instances=[FleetInstance(name="a", instance_type="ml.c7i.4xlarge", host_memory_mib=32768)],
                   models={"k": CPU_MODEL})
    with pytest.raises(ValidationError, match="copy_cpu_cores is set but new_instance_cpu_cores is not"):
        FleetModel.model_validate({**CPU_MODEL.model_dump(), "new_instance_cpu_cores": None})
    with pytest.raises(ValidationError, match="a copy must request a resource"):
        FleetModel(concurrency_per_copy=1, t_copy_s=1, t_total_s=1, new_instance_type="ml.c7i.large")
    with pytest.raises(ValidationError, match="declares no capacity"):
        FleetInstance(name="a", instance_type="ml.c7i.large")
    with pytest.raises(ValidationError, match="used_cpu_cores 17 exceeds its cpu_cores 16"):
        cpu_instance("a", -1, 100)
    with pytest.raises(ValidationError, match="used_cpu_cores 2 is set but cpu_cores is not"):
        FleetInstance(name="a", instance_type="x", accelerator_memory_mib=1, used_cpu_cores=2)


def test_fleet_model_from_a_cpu_copy_plan(qmax_ref, ttotal_ref):
    cpu_copy = copy_artifact(qmax_ref, device="cpu", accelerator_mib=None, cpu_cores=3.2)
    plan = build_copy_plan(qmax_ref, cpu_copy, PlanInputs(peak_rps=100), instance="ml.c7i.4xlarge", ttotal=ttotal_ref)
    m = fleet_model(plan)
    assert m.copy_memory_mib == 0 and m.copy_cpu_cores == plan.packing.reserved_cpu_cores
    assert m.copy_host_memory_mib == plan.packing.reserved_host_memory_mib
    assert (m.new_instance_cpu_cores, m.new_instance_host_memory_mib) == (16, 32768)
    ev = evaluate_capacity(FleetState(models={"k": m}), "k", plan.thresholds.c_scale_max)
    assert ev.copies_per_new_instance == plan.packing.copies_per_instance >= 1


# --- old fleet files ------------------------------------------------------------------------------


def _old_rule_placement(free: list[float], size: float, n: int) -> list[int]:
    """The accelerator-only rule, restated as the oracle: each copy to the instance with the least
    memory left after it (first on ties), while one fits."""
    free, out = list(free), []
    for _ in range(n):
        fit = [i for i, f in enumerate(free) if f + 1e-6 >= size]
        if not fit:
            break
        i = min(fit, key=lambda k: (free[k], k))
        free[i] -= size
        out.append(i)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([24576.0, 98304.0, 196608.0]), st.floats(0, 1)), min_size=0, max_size=6),
       copy_mib, deltas)
def test_accelerator_only_fleets_place_as_the_old_rule(sizes, size, delta):
    # instances of different sizes: a rule normalising by capacity would differ from "least memory left"
    insts = [FleetInstance(name=f"i{k}", instance_type="x", accelerator_memory_mib=t, used_accelerator_memory_mib=round(t * u))
             for k, (t, u) in enumerate(sizes)]
    f = FleetState(instances=insts, models={"k": MODEL.model_copy(update={"copy_memory_mib": size})})
    ev = evaluate_capacity(f, "k", delta)
    expected = _old_rule_placement([i.free_mib for i in insts], size, ev.copies_needed)
    assert [s.instance for s in ev.steps] == [f"i{k}" for k in expected]


def test_an_old_fleet_file_gives_the_old_results():
    """tests/speech/data/fleet-accelerator-v1.json is in the accelerator-only format; the expected
    file holds what the accelerator-only implementation (c0cc6b3) returned for it."""
    fleet = FleetState.model_validate_json((DATA / "fleet-accelerator-v1.json").read_text())
    expected = json.loads((DATA / "fleet-accelerator-v1.expected.json").read_text())
    assert len(expected["cases"]) == 7
    for case in expected["cases"]:
        ev = evaluate_capacity(fleet, case["model"], case["delta_concurrency"]).model_dump(mode="json")
        old = case["evaluation"]
        for key in ("copies_needed", "hot_loadable", "copies_on_new_instances", "copies_per_new_instance", "new_instances",
                    "unplaceable_copies", "serving", "verdict"):
            assert ev[key] == old[key], (case["model"], case["delta_concurrency"], key)
        for part in ("steps", "placements"):
            fields = ("instance", "free_before_mib", "free_after_mib") + (("copies",) if part == "placements" else ())
            assert [{k: s[k] for k in fields} for s in ev[part]] == [{k: s[k] for k in fields} for s in old[part]]
        if old["fragmentation"] is None:
            assert ev["fragmentation"] is None
        else:
            assert {k: ev["fragmentation"][k] for k in old["fragmentation"]} == old["fragmentation"]
        assert [[f["name"], f["level"]] for f in ev["findings"]] == case["findings"]


cpu_frees = st.lists(st.tuples(st.floats(0, 16), st.floats(0, 32768)), min_size=0, max_size=6)


@settings(max_examples=150, deadline=None)
@given(cpu_frees, st.sampled_from([0.25, 1.0, 3.75, 4.0, 6.5]), st.floats(128, 12000), deltas)
def test_properties_of_a_three_resource_evaluation(free, cores, host_mib, delta):
    m = CPU_MODEL.model_copy(update={"copy_cpu_cores": cores, "copy_host_memory_mib": host_mib})
    f = FleetState(instances=[cpu_instance(f"i{k}", c, h) for k, (c, h) in enumerate(free)], models={"k": m})
    ev = evaluate_capacity(f, "k", delta)
    need = m.request
    # never beyond what is free, resource by resource
    for p in ev.placements:
        inst = next(i for i in f.instances if i.name == p.instance)
        assert p.copies * cores <= inst.free.cpu_cores + 1e-6 and p.copies * host_mib <= inst.free.host_memory_mib + 1e-3
    assert ev.hot_loadable + ev.copies_on_new_instances + ev.unplaceable_copies == ev.copies_needed
    # each step took, among the instances the copy fitted, the one with the least headroom on its binding resource
    free_now = {i.name: i.free for i in f.instances}
    for s in ev.steps:
        fitting = [a for a in free_now.values() if fits(a, need)]
        assert fits(free_now[s.instance], need)
        assert binding_resource(free_now[s.instance], need)[0] <= min(binding_resource(a, need)[0] for a in fitting) + 1e-9
        free_now[s.instance] = free_now[s.instance].minus(need)
    # nothing left on the table: a copy sent to a new instance fitted no running one
    if ev.copies_on_new_instances or ev.unplaceable_copies:
        assert not any(fits(a, need) for a in free_now.values())
    # a new c7i.4xlarge holds what both its cores and its memory allow
    assert ev.copies_per_new_instance == min(math.floor(16 / cores + 1e-9), math.floor(32768 / host_mib + 1e-9))
