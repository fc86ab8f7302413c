"""The budget allocation (speech.plan.budget): examples with hand-computed numbers, and properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from artifacts.reference.build import reference_qmax, reference_ttotal
from speech.errors import ConfigError
from speech.plan.budget import ModelNeed, allocate, apply_allocation, check_deployed, daily_usd, realtime_need, share_out
from speech.plan.realtime import build_plan
from speech.schema.config import Budget, ModelConfig, PlanInputs
from tests.stack_files import embedded_config, embedded_stack

G5 = 1.408  # ml.g5.xlarge, the default table
G5_DAY = G5 * 24  # 33.792


def need(name, priority, floor, peak, itype="ml.g5.xlarge"):
    return ModelNeed(name=name, priority=priority, instance_type=itype, floor_instances=floor, peak_instances=peak)


def test_critical_full_standard_capped_batch_gets_the_rest():
    # critical 10 x 33.792 = 337.92; standard floor 1; batch floor 0. Budget 700 leaves
    # 700 - 337.92 - 33.792 = 328.288 -> 9 more standard instances (304.128), 24.16 left: no batch.
    alloc = allocate([need("a", "critical", 1, 10), need("b", "standard", 1, 20), need("c", "batch", 0, 4)],
                     Budget(daily_usd=700))
    assert [m.max_instances for m in alloc.models] == [10, 10, 0]
    assert alloc.verdict == "warn"
    b = alloc.of("b")
    assert b.finding.level == "warn" and "10 of the 20" in b.finding.message and "50%" in b.finding.message
    assert alloc.of("c").finding.level == "warn" and "no instance" in alloc.of("c").finding.message
    assert alloc.total_daily_usd == pytest.approx(20 * G5_DAY)
    assert alloc.required_daily_usd == pytest.approx(11 * G5_DAY)


def test_a_cheaper_batch_type_takes_what_standard_cannot_use():
    # After standard's 9 extra g5 (304.128), 24.16/day is left: one ml.c6i.xlarge (0.204 x 24 = 4.896) fits 4 times.
    alloc = allocate([need("a", "critical", 1, 10), need("b", "standard", 1, 20),
                      need("c", "batch", 0, 8, "ml.c6i.xlarge")], Budget(daily_usd=700))
    assert alloc.of("c").max_instances == 4
    assert alloc.total_daily_usd <= 700


def test_budget_below_critical_need_is_a_stop_with_the_shortfall():
    alloc = allocate([need("a", "critical", 1, 10), need("b", "standard", 1, 20)], Budget(daily_usd=300))
    assert alloc.verdict == "stop"
    stop = alloc.findings[0]
    # 10 x 33.792 + 1 x 33.792 = 371.712; shortfall 71.712
    assert stop.level == "stop" and "$71.71/day" in stop.message and "$371.71" in stop.message
    assert "a: 10 x ml.g5.xlarge" in stop.message
    assert alloc.of("a").max_instances == 10 and alloc.of("a").finding.level == "stop"
    assert alloc.of("b").max_instances == 1


def test_exact_budget_fits_and_whole_need_is_ok():
    alloc = allocate([need("a", "critical", 1, 3), need("b", "standard", 2, 5)], Budget(daily_usd=8 * G5_DAY))
    assert alloc.verdict == "ok" and [m.max_instances for m in alloc.models] == [3, 5]
    assert all(m.served_share == 1.0 for m in alloc.models)


def test_standard_models_share_by_fraction_of_need():
    # 30 extra instances wanted (10 + 20), 15 affordable: half of each.
    alloc = allocate([need("x", "standard", 0, 10), need("y", "standard", 0, 20)], Budget(daily_usd=15 * G5_DAY))
    assert alloc.of("x").max_instances == 5 and alloc.of("y").max_instances == 10


def test_unknown_price_and_stack_prices():
    with pytest.raises(ConfigError, match=r"budget\.prices_usd_per_hour: no price for ml\.p4d\.24xlarge"):
        allocate([need("a", "critical", 1, 2, "ml.p4d.24xlarge")], Budget(daily_usd=100))
    alloc = allocate([need("a", "critical", 1, 2, "ml.p4d.24xlarge")],
                     Budget(daily_usd=2000, prices_usd_per_hour={"ml.p4d.24xlarge": 37.69}))
    assert alloc.total_daily_usd == pytest.approx(2 * 37.69 * 24)


def test_plan_capped_by_allocation_is_a_warn_not_a_stop():
    q, t = reference_qmax(), reference_ttotal()
    cfg = ModelConfig(instance_type="ml.g5.xlarge", plan=PlanInputs(peak_rps=500, trough_rps=10), priority="standard")
    plan = build_plan(q, t, cfg.plan)
    n = realtime_need("kokoro-82m", cfg, plan)
    assert (n.floor_instances, n.peak_instances) == (1, 30)  # ceil(500 / 17.08, the 99.5 % SLO-share rate)
    alloc = allocate([n], Budget(daily_usd=10 * G5_DAY))
    capped = apply_allocation(plan, alloc.of("kokoro-82m"))
    assert capped.fleet.max_instances == 10
    assert capped.finding("budget").level == "warn" and capped.finding("fleet_capacity").level != "stop"
    assert capped.verdict == "warn" and capped.budget == alloc.of("kokoro-82m")
    # Stacks without a budget: the plan's JSON has no budget key (same bytes as before budgets existed).
    assert '"budget"' not in plan.model_dump_json() and '"budget"' in capped.model_dump_json()


def test_check_deployed_names_model_value_limit_fix():
    alloc = allocate([need("a", "critical", 1, 10), need("b", "standard", 1, 20)], Budget(daily_usd=700))
    assert check_deployed(alloc, {"a": 10, "b": 10}) == []
    low = check_deployed(alloc, {"a": 6, "b": 10})
    assert len(low) == 1 and "'a' may scale to 6 instances, below its measured peak need of 10" in low[0].message
    over = check_deployed(alloc, {"a": 10, "b": 20})
    assert len(over) == 1 and "above the daily budget $700.00" in over[0].message and "fix:" in over[0].message


# --- properties --------------------------------------------------------------------------------

TYPES = ["ml.g5.xlarge", "ml.g4dn.xlarge", "ml.c6i.xlarge", "ml.g5.2xlarge"]


@st.composite
def needs_lists(draw):
    n = draw(st.integers(1, 5))
    out = []
    for i in range(n):
        prio = draw(st.sampled_from(["critical", "standard", "batch"]))
        floor = 0 if prio == "batch" else draw(st.integers(1, 4))
        peak = floor + draw(st.integers(0, 60))
        out.append(need(f"m{i}", prio, floor, peak, draw(st.sampled_from(TYPES))))
    return out


@settings(max_examples=200, deadline=None)
@given(needs_lists(), st.floats(1.0, 20000.0))
def test_allocation_invariants(needs, daily):
    alloc = allocate(needs, Budget(daily_usd=daily))
    by = {n.name: n for n in needs}
    for m in alloc.models:
        n = by[m.name]
        assert n.floor_instances <= m.max_instances <= n.peak_instances
        if n.priority == "critical":
            assert m.max_instances == n.peak_instances  # never capped
        assert (m.finding.level == "warn") == (n.priority != "critical" and m.max_instances < n.peak_instances)
    if alloc.verdict == "stop":
        assert alloc.required_daily_usd > daily
        assert all(m.max_instances == by[m.name].floor_instances for m in alloc.models if m.priority != "critical")
    else:
        assert alloc.total_daily_usd <= daily + 1e-6
        # Nothing a lower tier got could have gone to a capped higher tier: a standard model below
        # its peak means batch got nothing beyond what is cheaper than that standard's next instance.
        left = daily - alloc.total_daily_usd
        for m in alloc.models:
            if m.priority != "critical" and m.max_instances < m.peak_instances:
                assert daily_usd(1, m.price_usd_per_hour) > left - 1e-6
        capped_std = [m for m in alloc.models if m.priority == "standard" and m.max_instances < m.peak_instances]
        if capped_std:
            cheapest = min(daily_usd(1, m.price_usd_per_hour) for m in capped_std)
            batch_extra = sum(daily_usd(m.max_instances, m.price_usd_per_hour) for m in alloc.models if m.priority == "batch")
            assert batch_extra < cheapest + 1e-6


@settings(max_examples=150, deadline=None)
@given(needs_lists(), st.floats(1.0, 10000.0), st.floats(0.0, 5000.0))
# Found by this test in CI's fast tier: with $11 more, the old rule (an equal rounded-down share,
# then what fits) bought one more ml.g5 in place of two ml.g4dn (56 standard instances -> 55).
@example(needs=[ModelNeed(name="m0", priority="standard", instance_type="ml.g4dn.xlarge", floor_instances=1, peak_instances=23),
                ModelNeed(name="m1", priority="critical", instance_type="ml.g5.xlarge", floor_instances=1, peak_instances=2),
                ModelNeed(name="m2", priority="standard", instance_type="ml.g5.xlarge", floor_instances=4, peak_instances=45)],
         daily=1638.0, more=11.0)
def test_more_budget_never_serves_less(needs, daily, more):
    low = allocate(needs, Budget(daily_usd=daily))
    high = allocate(needs, Budget(daily_usd=daily + more))
    assert high.total_daily_usd >= low.total_daily_usd - 1e-6 or low.verdict == "stop"
    for tier in ("critical", "standard"):
        lo = sum(m.max_instances for m in low.models if m.priority == tier)
        hi = sum(m.max_instances for m in high.models if m.priority == tier)
        assert hi >= lo or low.verdict == "stop"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=5), st.floats(0.0, 5000.0))
def test_share_out_fits_and_is_fair(extras, available):
    group = [need(f"s{i}", "standard", 0, e) for i, e in enumerate(extras)]
    got = share_out(group, {"ml.g5.xlarge": G5}, available)
    spent = sum(got.values()) * G5_DAY
    assert spent <= available + 1e-6
    assert all(0 <= got[n.name] <= n.peak_instances for n in group)
    # Same price: up to one instance of rounding each way, nobody is served a larger share of its
    # need than a peer that was capped.
    for a in group:
        for b in group:
            if a.peak_instances and b.peak_instances and got[b.name] < b.peak_instances:
                assert (got[a.name] - 1) / a.peak_instances <= (got[b.name] + 1) / b.peak_instances + 1e-9
    if sum(extras) and spent + G5_DAY <= available:
        assert all(got[n.name] == n.peak_instances for n in group)


# --- stack config ------------------------------------------------------------------------------


def test_stack_budget_config_parses_and_names_a_missing_price():
    from speech.stack.read import parse_stack_config

    model = {"instance_type": "ml.g5.xlarge", "plan": {"peak_rps": 100}, "priority": "critical"}
    cfg = parse_stack_config({"models": {"a": model}, "budget": {"daily_usd": 500}})
    assert cfg.budget is not None and cfg.budget.prices()["ml.g5.xlarge"] == G5
    assert parse_stack_config({"models": {"a": model}}).budget is None  # unchanged without a budget
    with pytest.raises(ConfigError, match=r"ml\.p5\.48xlarge, which has no price: add it under "
                                          r"speech-endpoints:budget\.prices_usd_per_hour"):
        parse_stack_config({"models": {"a": {**model, "instance_type": "ml.p5.48xlarge"}}, "budget": {"daily_usd": 500}})
    with pytest.raises(ConfigError, match=r"speech-endpoints:budget\.daily_usd"):
        parse_stack_config({"models": {"a": model}, "budget": {"daily_usd": -1}})
    with pytest.raises(ConfigError, match="priority"):
        parse_stack_config({"models": {"a": {**model, "priority": "urgent"}}})


def test_budget_refuses_a_component_hosted_model_it_cannot_allocate():

    from speech.stack.read import parse_stack_config

    raw = embedded_config(Path(__file__).parents[3] / "examples" / "Pulumi.components.yaml")
    models = raw["speech-endpoints:models"]
    assert parse_stack_config({"models": models}).models  # the example itself parses
    with pytest.raises(ConfigError, match=r"hosted as inference components, which speech-endpoints:budget does not "
                                          r"allocate yet"):
        parse_stack_config({"models": models, "budget": {"daily_usd": 500}})


# --- the program's side (pure: speech.deploy.gate.apply_budget) ----------------------------------------


def _multi_config(daily_usd: float):

    from speech.stack.read import parse_stack_config

    raw = embedded_stack(Path(__file__).resolve().parents[3] / "examples/Pulumi.multi.yaml")
    cfg = {k.split(":", 1)[1]: v for k, v in raw["config"].items() if k.startswith("speech-endpoints:")}
    cfg["budget"] = {"daily_usd": daily_usd}
    return parse_stack_config(cfg)


def test_apply_budget_caps_regates_and_records_the_allocation():
    from speech.deploy.gate import apply_budget, plan_model
    from speech.deploy.provenance import parse_document

    cfg = _multi_config(800)
    endpoints = {n: f"multi-{n}" for n in cfg.models}
    deps = {n: plan_model(n, m, endpoint=endpoints[n]) for n, m in cfg.models.items()}
    capped, alloc = apply_budget(deps, cfg, endpoints=endpoints)
    std = capped["narration"]
    assert deps["narration"].plan.fleet.max_instances == 24 and std.plan.fleet.max_instances == 10
    assert std.gate.enabled and "capped by the daily budget at 10 of the 24" in std.gate.reason
    doc = parse_document(std.document_text, "test")
    assert doc.budget == alloc.of("narration") and doc.stack_budget == cfg.budget
    # Without a budget nothing changes, and the provenance document keeps its bytes.
    plain = cfg.model_copy(update={"budget": None})
    same, none = apply_budget(deps, plain, endpoints=endpoints)
    assert none is None and same == deps and '"budget"' not in deps["narration"].document_text
    # Below the critical need: the critical model's gate closes on the shortfall.
    short, alloc = apply_budget(deps, _multi_config(400), endpoints=endpoints)
    assert alloc.verdict == "stop" and not short["assistant"].gate.enabled
    assert short["assistant"].gate.code == "plan_stop" and "shortfall" in short["assistant"].gate.reason
