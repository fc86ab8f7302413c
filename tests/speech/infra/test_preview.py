"""The offline preview: `python -m speech preview` and run_preview, on stack files written the
way users write them (by hand or by `bench plan --stack`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli.main import main as bench_main
from speech.errors import ConfigError
from speech.files import load_artifact
from speech.infra.preview import run_preview
from speech.schema.plan_artifacts import PlanArtifact

ROOT = Path(__file__).resolve().parents[3]
QMAX_REF = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL_REF = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
SCALING_TYPES = {"aws:appautoscaling/target:Target", "aws:appautoscaling/policy:Policy"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "speech", "preview", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_cli_previews_the_dev_stack():
    proc = _cli("--stack", "dev")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "aws:appautoscaling/target:Target" in out and "maxCapacity=293" in out
    assert "targetValue=15.9904" in out and "cooldown=960" in out and 'QUEUE_MAX_DEPTH="50"' in out
    assert "kokoro-82m: scaling:" in out


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_four_gate_cases_in_one_stack_and_one_process(kokoro_entry, write_stack, tmp_path):
    """Several models per stack, each gated on its own; then a second preview in the same process."""
    import copy

    def entry(**plan):
        e = copy.deepcopy(kokoro_entry)
        e["plan"].update(plan)
        return e

    unmeasured = copy.deepcopy(kokoro_entry)
    del unmeasured["measurements"]
    models = {
        "kokoro-82m": kokoro_entry,
        "unmeasured": unmeasured,
        "stopped": entry(slo_ms=50.0),
        "tiny": entry(peak_rps=10.0, trough_rps=10.0),
    }
    # Artifacts name their model; copy them under the other keys as bench would have written them.
    for name in ("stopped", "tiny"):
        for kind in ("qmax", "ttotal"):
            models[name]["measurements"][kind]["model"] = name
    path = write_stack(models, stack="multi")
    result = run_preview(path)

    gates = {g.model: g for g in result.gates}
    assert gates["kokoro-82m"].enabled
    assert not gates["unmeasured"].enabled and "no measurements" in gates["unmeasured"].reason
    assert not gates["stopped"].enabled and "slo_feasible" in gates["stopped"].reason
    assert not gates["tiny"].enabled and "nothing to scale" in gates["tiny"].reason

    targets = [r.inputs["resourceId"] for r in result.of_type("aws:appautoscaling/target:Target")]
    assert targets == ["endpoint/multi-kokoro-82m/variant/AllTraffic"]
    assert len(result.of_type("aws:sagemaker/endpoint:Endpoint")) == 4
    # The preview says why each gated model has no scaling.
    for name in ("unmeasured", "stopped", "tiny"):
        assert any(w.startswith(f"{name}: no autoscaling: ") for w in result.warnings), result.warnings
    # Without measurements there is no Q_max: the container keeps its own default queue depth.
    unmeasured_model = result.named("unmeasured-model").inputs["primaryContainer"]["environment"]
    assert "QUEUE_MAX_DEPTH" not in unmeasured_model
    assert result.named("tiny-model").inputs["primaryContainer"]["environment"]["QUEUE_MAX_DEPTH"] == "50"
    assert result.outputs["scaling"]["stopped"]["verdict"] == "stop"
    assert result.outputs["scaling"]["stopped"]["reason_code"] == "plan_stop"

    # Second run in the same process: nothing from the first one leaks in.
    again = run_preview(write_stack({"unmeasured": unmeasured}, stack="second"))
    assert not any(r.type in SCALING_TYPES for r in again.resources)
    assert {r.name for r in again.resources if r.type == "aws:sagemaker/endpoint:Endpoint"} == {"unmeasured-endpoint"}
    assert again.named("unmeasured-endpoint").inputs["name"] == "second-unmeasured"


@pytest.mark.slow
def test_cli_shows_each_gate_decision(kokoro_entry, write_stack, tmp_path):
    del kokoro_entry["measurements"]
    write_stack({"kokoro-82m": kokoro_entry}, stack="bare")
    proc = _cli("--stack", "bare", "--stack-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "kokoro-82m: NO scaling: no measurements" in proc.stdout
    assert "warning: kokoro-82m: no autoscaling: no measurements" in proc.stdout
    assert "aws:appautoscaling" not in proc.stdout

    proc = _cli("--stack", "bare", "--stack-dir", str(tmp_path), "--json")
    data = json.loads(proc.stdout)
    assert data["gates"] == [{"model": "kokoro-82m", "enabled": False, "reason": data["gates"][0]["reason"]}]
    assert all(r["type"] not in SCALING_TYPES for r in data["resources"])


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda e: e["plan"].update(surge_ratio=1.7), "speech-endpoints:models.kokoro-82m.plan.surge_ratio: "),
        (lambda e: e.update(colour="blue"), "speech-endpoints:models.kokoro-82m.colour: Extra inputs"),
        (lambda e: e["measurements"]["ttotal"].update(measured_total_s=1.0),
         "speech-endpoints:models.kokoro-82m.measurements.ttotal: "),
    ],
)
@pytest.mark.slow
def test_config_errors_exit_2_with_one_line(kokoro_entry, write_stack, tmp_path, mutate, key):
    mutate(kokoro_entry)
    path = write_stack({"kokoro-82m": kokoro_entry}, stack="bad")
    with pytest.raises(ConfigError, match="^" + key.replace(".", r"\.")):
        run_preview(path)
    proc = _cli("--stack", "bad", "--stack-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ConfigError: " + key), proc.stderr


@pytest.mark.slow
def test_missing_stack_file_and_unknown_top_level_key(write_stack, kokoro_entry, tmp_path):
    proc = _cli("--stack", "nope", "--stack-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.startswith("ConfigError: ") and "Traceback" not in proc.stderr
    # A key of our namespace the program does not read: one warning, the preview goes on.
    result = run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="typo", modle=1, owner="voice-team"))
    ours = [w for w in result.warnings if w.startswith(("speech-endpoints:modle:", "speech-endpoints:owner:"))]
    assert ours == ["speech-endpoints:modle: not a key this project reads, ignored (if you meant speech-endpoints:models, "
                    "rename it)",
                    "speech-endpoints:owner: not a key this project reads, ignored (this project reads "
                    "speech-endpoints:models, speech-endpoints:allow_config_mismatch, speech-endpoints:alerts, "
                    "speech-endpoints:budget)"]
    assert result.gates[0].enabled


def test_bench_plan_stack_file_round_trips(tmp_path):
    """A stack file written by `bench plan --stack` previews to exactly bench's numbers."""
    rc = bench_main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "2000",
                     "--trough-rps", "40", "--min-instances", "3", "--out", str(tmp_path),
                     "--stack", "rt", "--stack-dir", str(tmp_path),
                     "--image", "123456789012.dkr.ecr.eu-west-1.amazonaws.com/kokoro@sha256:"
                     "8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"])
    assert rc == 0
    plan = load_artifact(tmp_path / "plan-kokoro-82m.json", PlanArtifact)
    result = run_preview(tmp_path / "Pulumi.rt.yaml")
    out = result.outputs["scaling"]["kokoro-82m"]
    assert (out["target"], out["scale_in_threshold"]) == (plan.thresholds.scaling_target_value,
                                                          plan.thresholds.scale_in_threshold)
    assert (out["min"], out["max"]) == (plan.fleet.min_instances, plan.fleet.max_instances)
    assert out["cooldowns"] == {"scale_out_s": plan.cooldowns.scale_out_s, "scale_in_s": plan.cooldowns.scale_in_s}
    assert out["enabled"] is True
    target = result.of_type("aws:appautoscaling/target:Target")[0].inputs
    assert (target["minCapacity"], target["maxCapacity"]) == (plan.fleet.min_instances, plan.fleet.max_instances)
    assert plan.fleet.min_instances == 3 and plan.fleet.max_instances == 118
    config = result.of_type("aws:sagemaker/endpointConfiguration:EndpointConfiguration")[0].inputs
    assert config["productionVariants"][0]["initialInstanceCount"] == 3
    # The pack needs parents to rebuild the resource tree.
    assert all(r.parent for r in result.resources)
