"""bench and stack config: `bench plan --migrate-config`, a re-plan that keeps the stored inputs,
drift on the referenced and the embedded form, and aws:region honoured by drift."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from ruamel.yaml import YAML

from bench.cli.main import main
from speech.stack.read import file_sha256, load_stack_file
from speech.stack.write import write_model_entry
from tests.stack_files import MODELS, embedded_stack

from ..conftest import ENDPOINT, STACK, create_endpoint, deploy_scaling

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT / "Pulumi.dev.yaml"
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


def _config(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())["config"]


def test_migrate_config_writes_artifacts_and_references_that_load_the_same(tmp_path, capsys):
    stack = tmp_path / "Pulumi.old.yaml"
    stack.write_text("# our notes\n" + json.dumps(embedded_stack(DEV)))
    before = load_stack_file(stack)
    size = stack.stat().st_size
    assert main(["plan", "--stack", "old", "--stack-dir", str(tmp_path), "--migrate-config"]) == 0
    out = capsys.readouterr().out
    refs = _config(stack)[MODELS]["kokoro-82m"]["measurements"]
    assert refs["qmax"]["path"] == f"artifacts/{QMAX.name}" and refs["ttotal"]["path"] == f"artifacts/{TTOTAL.name}"
    for ref in (refs["qmax"], refs["ttotal"]):
        assert ref["sha256"] == file_sha256((tmp_path / ref["path"]).read_bytes())
        assert f"-> {ref['path']} ({ref['sha256']}) written" in out
    assert load_stack_file(stack) == before
    assert stack.stat().st_size < size / 4 and "# our notes" in stack.read_text()
    assert "max_instances" not in _config(stack)[MODELS]["kokoro-82m"]  # the earlier writer's null keys go
    # A second run finds nothing embedded and writes nothing.
    mtime = stack.stat().st_mtime_ns
    assert main(["plan", "--stack", "old", "--stack-dir", str(tmp_path), "--migrate-config"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out and stack.stat().st_mtime_ns == mtime


def test_migrate_config_reuses_an_artifact_already_in_the_repository(tmp_path, capsys):
    # The dev stack's own directory already holds the reference artifacts: they are referenced, not copied.
    (tmp_path / "artifacts/reference").mkdir(parents=True)
    for f in (QMAX, TTOTAL):
        (tmp_path / "artifacts/reference" / f.name).write_bytes(f.read_bytes())
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(json.dumps(embedded_stack(DEV)))
    assert main(["plan", "--stack", "dev", "--stack-dir", str(tmp_path), "--migrate-config", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["written"] for r in report["references"]] == [False, False]
    assert _config(stack)[MODELS]["kokoro-82m"]["measurements"] == _config(DEV)[MODELS]["kokoro-82m"]["measurements"]
    assert sorted(p.name for p in (tmp_path / "artifacts").rglob("*.json")) == sorted([QMAX.name, TTOTAL.name])


def test_migrate_config_is_bad_input_with_artifact_flags(tmp_path, capsys):
    assert main(["plan", "--stack", "dev", "--qmax", str(QMAX), "--migrate-config", "--stack-dir", str(tmp_path)]) == 2
    assert "--migrate-config rewrites a stack file: pass --stack NAME alone" in capsys.readouterr().err


def _plan(tmp_path: Path, *flags: str) -> int:
    return main(["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--out", str(tmp_path / "out"),
                 "--stack", "s", "--stack-dir", str(tmp_path), *flags])


def test_replan_keeps_stored_inputs_unless_a_flag_overrides_them_and_says_what_changed(tmp_path, capsys):
    assert _plan(tmp_path, "--peak-rps", "5000", "--trough-rps", "10", "--surge-ratio", "1.2", "--min-instances", "3",
                 "--max-instances", "400") == 0
    stack = tmp_path / "Pulumi.s.yaml"
    # A field bench has no flag for, set by hand (or by a later version): kept too.
    text = stack.read_text().replace("metric_period_s: 10", "metric_period_s: 20")
    stack.write_text(text)
    capsys.readouterr()
    assert _plan(tmp_path, "--peak-rps", "6000") == 0
    out = capsys.readouterr().out
    entry = _config(stack)[MODELS]["kokoro-82m"]
    assert entry["plan"] == {"slo_ms": 3000.0, "surge_ratio": 1.2, "peak_rps": 6000.0, "trough_rps": 10.0,
                             "min_instances": 3, "reaction": {"metric_period_s": 20, "datapoints_to_alarm": 3},
                             "qmax_derate": 1.0}
    assert entry["max_instances"] == 400
    assert "stack 's', kokoro-82m: inputs changed: peak_rps 5000 -> 6000" in out
    # No null keys: what is unset is left out.
    assert "null" not in json.dumps(entry) and ": \n" not in stack.read_text() and not stack.read_text().count(":\n      max")
    capsys.readouterr()
    assert _plan(tmp_path, "--peak-rps", "6000") == 0
    assert "inputs unchanged (kept the entry's stored inputs; flags override them)" in capsys.readouterr().out


def test_replan_with_schedule_from_keeps_the_stored_cap(tmp_path, capsys):
    # The cap the entry stores (no --max-instances on the re-plan) bounds the plan that carries the
    # derived floors, as it bounds the one without them: the floors, the fleet and the stack agree.
    assert _plan(tmp_path, "--peak-rps", "5000", "--trough-rps", "10", "--max-instances", "40") in (0, 1)
    capsys.readouterr()
    assert _plan(tmp_path, "--peak-rps", "5000", "--schedule-from", "diurnal:peak=5000,seed=1",
                 "--schedule-slot-min", "60") in (0, 1)
    plan = json.loads((tmp_path / "out" / "plan-kokoro-82m.json").read_text())
    assert plan["fleet"]["max_instances"] == 40  # the peak needs far more: the stored cap holds it
    assert plan["schedule"]["floors"] and max(f["min_instances"] for f in plan["schedule"]["floors"]) == 40
    assert _config(tmp_path / "Pulumi.s.yaml")[MODELS]["kokoro-82m"]["max_instances"] == 40


def test_replan_with_a_stored_trough_above_the_new_peak_names_the_stored_value(tmp_path, capsys):
    assert _plan(tmp_path, "--peak-rps", "5000", "--trough-rps", "10") == 0
    capsys.readouterr()
    assert _plan(tmp_path, "--peak-rps", "5") == 2
    err = capsys.readouterr().err
    assert "trough_rps 10.0 exceeds peak_rps 5.0" in err and "kept from the stack entry: " in err and "trough_rps 10" in err


def _embedded_entry(model_config) -> dict:
    return json.loads(model_config.model_dump_json(exclude_none=True))


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_drift_is_the_same_on_the_referenced_and_the_embedded_form(deployed, tmp_path, capsys, model_config):
    ref_dir, emb_dir = tmp_path / "ref", tmp_path / "emb"
    emb_dir.mkdir()
    write_model_entry(ref_dir / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    assert "path" in _config(ref_dir / f"Pulumi.{STACK}.yaml")[MODELS]["kokoro-82m"]["measurements"]["qmax"]
    (emb_dir / f"Pulumi.{STACK}.yaml").write_text(json.dumps({"config": {MODELS: {"kokoro-82m": _embedded_entry(model_config)}}}))
    results = []
    for d in (ref_dir, emb_dir):
        capsys.readouterr()
        rc = main(["drift", "--stack", STACK, "--stack-dir", str(d), "--json"])
        results.append((rc, json.loads(capsys.readouterr().out)))
    assert results[0] == results[1] and results[0][0] == 0


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_drift_uses_the_stacks_aws_region(aws_env, tmp_path, capsys, model_config, ref_plan):
    # The endpoint lives in eu-west-1; the environment's default region is us-east-1.
    eu = boto3.session.Session(region_name="eu-west-1")
    create_endpoint(eu)
    deploy_scaling(eu, ref_plan)
    stack = tmp_path / f"Pulumi.{STACK}.yaml"
    write_model_entry(stack, "kokoro-82m", model_config)
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 2  # no aws:region: us-east-1
    assert f"endpoint {ENDPOINT!r}" in capsys.readouterr().err
    stack.write_text(stack.read_text().replace("config:\n", "config:\n  aws:region: eu-west-1\n", 1))
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 0
    assert "preflight-ok" in capsys.readouterr().out
    # The qualified name is the same stack; --region still overrides the stack's.
    assert main(["drift", "--stack", f"acme/speech-endpoints/{STACK}", "--stack-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path), "--region", "us-east-1"]) == 2


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_validate_takes_the_region_from_the_stack(aws_env, tmp_path, capsys, ref_plan):
    from speech.files import write_artifact

    eu = boto3.session.Session(region_name="eu-west-1")
    create_endpoint(eu)
    deploy_scaling(eu, ref_plan)
    plan = write_artifact(tmp_path / "plan.json", ref_plan)
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text("config:\n  aws:region: eu-west-1\n")
    argv = ["validate", "--plan", str(plan), "--endpoint", ENDPOINT]
    assert main(argv) == 2  # the environment's us-east-1 has no such endpoint
    capsys.readouterr()
    assert main([*argv, "--stack", STACK, "--stack-dir", str(tmp_path)]) == 0
    assert "validate: pass" in capsys.readouterr().out
