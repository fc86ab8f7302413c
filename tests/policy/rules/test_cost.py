"""daily-cost-ceiling (policy/rules/cost.py): the dev stack over a daily budget or at an instance type
without a price; a stack with several models and a daily budget (examples/Pulumi.multi.yaml), whose
allocation the pack recomputes with speech.plan.budget.allocate from the provenance documents."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from policy.check import main as check_main
from policy.check import preview_resources
from tests.policy.policy_edits import messages, named, set_path
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]
MULTI = ROOT / "examples/Pulumi.multi.yaml"
POLICY = "daily-cost-ceiling"


def lowered(directory: Path, daily_usd: float, stack: str = "low") -> Path:
    path = copy_stack(MULTI, directory, stack)  # with the artifacts it references
    text = path.read_text()
    assert "daily_usd: 800" in text
    path.write_text(text.replace("daily_usd: 800", f"daily_usd: {daily_usd:g}"))
    return path


@pytest.fixture(scope="module")
def _multi():
    resources, result = preview_resources(MULTI, "multi")
    return resources, result


@pytest.fixture
def multi(_multi):
    return copy.deepcopy(_multi[0])


def test_multi_stack_passes_with_standard_capped(pack, multi, _multi):
    report = pack.check(multi)
    assert report.mandatory == []
    # What passed is the capped allocation: critical at its peak need, standard at its share.
    assert named(multi, "assistant-target").props["maxCapacity"] == 12
    assert named(multi, "narration-target").props["maxCapacity"] == 10
    scaling = _multi[1].outputs["scaling"]
    budget = scaling["narration"]["budget"]
    assert budget["max_instances"] == 10 and budget["peak_instances"] == 24 and budget["level"] == "warn"
    # The batch route: an asynchronous endpoint scaled on its backlog from 0 to what the budget left.
    batch = scaling["audiobooks"]
    assert batch["enabled"] and (batch["min"], batch["max"]) == (0, 1) and batch["budget"]["peak_instances"] == 3
    assert named(multi, "audiobooks-target").props["maxCapacity"] == 1
    assert scaling["assistant"]["budget"]["max_instances"] == 12 == scaling["assistant"]["max"]


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_budget_below_critical_need_blocks_with_one_message(pack, tmp_path):
    resources, result = preview_resources(lowered(tmp_path, 400), "low")
    report = pack.check(resources)
    assert [d.policy for d in report.mandatory] == [POLICY]
    [msg] = messages(report, POLICY, "mandatory")
    assert "daily budget $400.00 cannot cover the critical models' peak" in msg
    assert "shortfall of $73.09/day" in msg and "assistant: 12 x ml.g5.xlarge" in msg
    assert "raise speech-endpoints:budget.daily_usd to at least $473.09" in msg
    # The program closed the critical model's scaling on the same stop finding.
    gate = {g.model: g for g in result.gates}["assistant"]
    assert not gate.enabled and "shortfall of $73.09/day" in gate.reason


def test_critical_model_capped_below_its_peak_need_is_blocked(pack, multi):
    set_path(named(multi, "assistant-target"), "maxCapacity", 8.0)
    [msg] = messages(pack.check(multi), POLICY, "mandatory")
    assert "critical model 'assistant' may scale to 8 instances, below its measured peak need of 12" in msg
    assert "fix:" in msg


def test_standard_model_raised_past_its_allocation_exceeds_the_budget(pack, multi):
    set_path(named(multi, "narration-target"), "maxCapacity", 23.0)
    [msg] = messages(pack.check(multi), POLICY, "mandatory")
    assert "above the daily budget $800.00" in msg and "narration: 23 x ml.g5.xlarge" in msg
    assert "speech-endpoints:budget.daily_usd" in msg


@pytest.mark.slow
def test_policy_check_cli_passes_multi_and_blocks_a_lowered_budget(tmp_path, capsys):
    assert check_main(["--stack-dir", str(ROOT / "examples"), "--stack", "multi"]) == 0
    assert "OK: no mandatory violation" in capsys.readouterr().out
    lowered(tmp_path, 420)
    assert check_main(["--stack-dir", str(tmp_path), "--stack", "low"]) == 1
    out = capsys.readouterr().out
    assert out.count("shortfall of $53.09/day") == 1 and "BLOCKED" in out


# --- one model: the dev stack ---------------------------------------------------------------------


def test_daily_cost_over_budget(pack, dev):
    report = pack.check(dev, {"daily-cost-ceiling": {"daily-budget-usd": 5000}})
    [d] = report.of("daily-cost-ceiling")
    assert d.level == "mandatory" and d.resource is None
    assert "$9,901/day" in d.message and "293 x ml.g5.xlarge x $1.408/h x 24" in d.message
    assert "daily budget $5,000" in d.message and "fix:" in d.message


def test_daily_cost_unknown_price(pack, dev):
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.p5.48xlarge")
    report = pack.check(dev, {"instance-type-allowed": {"allowed-instance-types": ["ml.p5.48xlarge"]}})
    [msg] = messages(report, "daily-cost-ceiling", "mandatory")
    assert "'ml.p5.48xlarge', which has no hourly price" in msg
    assert messages(report, "instance-type-allowed") == []
