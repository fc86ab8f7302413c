"""`bench plan --max-delay-s`: a batch route end to end, artifact -> stack file -> program under mocks."""

from __future__ import annotations

import json
from pathlib import Path

from ruamel.yaml import YAML

from bench.cli.main import main
from speech.files import load_artifact
from speech.infra.preview import run_preview
from speech.plan.batch import BatchPlan, build_batch_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs

ROOT = Path(__file__).resolve().parents[3]
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


def args(out: Path, *extra: str) -> list[str]:
    return ["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--peak-rps", "50", "--trough-rps", "1",
            "--out", str(out), *extra]


def test_batch_plan_to_stack_to_async_endpoint(tmp_path, capsys):
    rc = main(args(tmp_path / "out", "--max-delay-s", "900", "--stack", "b", "--stack-dir", str(tmp_path), "--json"))
    assert rc == 0
    printed = BatchPlan.model_validate_json(capsys.readouterr().out)
    written = load_artifact(tmp_path / "out" / "batch-plan-kokoro-82m.json", BatchPlan)
    # The CLI writes exactly what the pure core computes from the same artifacts and inputs.
    expected = build_batch_plan(load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact),
                                PlanInputs(peak_rps=50, trough_rps=1, slo_ms=3000, max_delay_s=900))
    assert printed == written == expected
    assert not (tmp_path / "out" / "plan-kokoro-82m.json").exists()

    entry = YAML(typ="safe").load((tmp_path / "Pulumi.b.yaml").read_text())["config"]["speech-endpoints:models"][
        "kokoro-82m"]
    assert (entry["priority"], entry["hosting"], entry["plan"]["max_delay_s"]) == ("batch", "async", 900.0)

    # The program deploys that entry as an asynchronous endpoint scaled by the same plan.
    r = run_preview(tmp_path / "Pulumi.b.yaml")
    target = r.named("kokoro-82m-target").inputs
    assert (target["minCapacity"], target["maxCapacity"]) == (0, written.max_instances)
    tt = r.named("kokoro-82m-backlog").inputs["targetTrackingScalingPolicyConfiguration"]
    assert tt["targetValue"] == written.backlog_target_per_instance
    cfg = r.named("kokoro-82m-config").inputs["asyncInferenceConfig"]
    assert cfg["clientConfig"]["maxConcurrentInvocationsPerInstance"] == written.max_concurrent_invocations_per_instance
    assert r.outputs["scaling"]["kokoro-82m"]["plan_sha256"] is not None


def test_report_and_stop_exit_code(tmp_path, capsys):
    assert main(args(tmp_path, "--max-delay-s", "900")) == 0
    out = capsys.readouterr().out
    for needle in ("backlog target", "9287", "min / max instances", "0 / 3", "verdict: WARN"):
        assert needle in out
    # A delay shorter than a cold start from zero: stop, exit 1, the artifact still says why.
    assert main(args(tmp_path, "--max-delay-s", "300")) == 1
    assert "[STOP] batch_delay" in capsys.readouterr().out
    plan = load_artifact(tmp_path / "batch-plan-kokoro-82m.json", BatchPlan)
    assert plan.verdict == "stop"


def test_batch_plan_writes_its_csv(tmp_path, capsys):
    # A batch plan's rows under the plan's metrics; what a backlog-scaled route has no value for is empty.
    assert main(args(tmp_path, "--max-delay-s", "900", "--csv", str(tmp_path / "csv"))) == 0
    summary = dict(line.split(",", 1) for line in (tmp_path / "csv/plan-summary.csv").read_text().splitlines()[1:])
    assert (summary["min_instances"], summary["max_instances"], summary["c_scale_max"]) == ("0", "3", "")
    numbers = (tmp_path / "csv/plan-numbers.csv").read_text()
    assert numbers.startswith("name,value,formula\n") and "backlog target,9287," in numbers


def test_bad_delay_is_exit_2_and_writes_nothing(tmp_path, capsys):
    assert main(args(tmp_path / "out", "--max-delay-s", "0", "--stack", "b", "--stack-dir", str(tmp_path))) == 2
    err = capsys.readouterr().err
    assert "--max-delay-s" in err and "e.g. --max-delay-s 900" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "Pulumi.b.yaml").exists()


def test_replanning_a_batch_entry_real_time_makes_it_real_time(tmp_path):
    assert main(args(tmp_path / "out", "--max-delay-s", "900", "--stack", "b", "--stack-dir", str(tmp_path))) == 0
    assert main(args(tmp_path / "out", "--stack", "b", "--stack-dir", str(tmp_path))) == 0
    entry = json.loads(json.dumps(YAML(typ="safe").load((tmp_path / "Pulumi.b.yaml").read_text())))
    model = entry["config"]["speech-endpoints:models"]["kokoro-82m"]
    assert model["hosting"] == "realtime" and model["priority"] == "standard"
    assert "max_delay_s" not in model["plan"]
