"""`python -m bench plan`: report, artifact, stack config, exit codes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bench.cli.main import main
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import ModelConfig
from speech.schema.plan_artifacts import PlanArtifact
from speech.stack.read import file_sha256
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[3]
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


def args(out: Path, *extra: str, qmax: Path = QMAX, ttotal: Path = TTOTAL) -> list[str]:
    return [
        "plan", "--qmax", str(qmax), "--ttotal", str(ttotal), "--slo-ms", "3000", "--surge-ratio", "1.25",
        "--peak-rps", "5000", "--trough-rps", "10", "--out", str(out), *extra,
    ]  # fmt: skip


def test_reference_report_and_artifact(tmp_path, capsys):
    assert main(args(tmp_path)) == 0
    out = capsys.readouterr().out
    for needle in ("C_scale_max", "15.9904", "mean in flight at the SLO-share rate", "(1 - h) x Q_max = 37.5", "960 s",
                   "[WARN] surge_survival", "94.0%", "[ok  ] slo_share", "scale-in step", "-16% (>= 1)",
                   "promise: none (advisory", "verdict: WARN"):
        assert needle in out
    plan = load_artifact(tmp_path / "plan-kokoro-82m.json", PlanArtifact)
    assert plan.thresholds.c_scale_max == 15.9904 and plan.fleet.max_instances == 293


def test_json_output_is_the_artifact(tmp_path, capsys):
    assert main(args(tmp_path, "--json")) == 0
    printed = PlanArtifact.model_validate_json(capsys.readouterr().out)
    assert printed == load_artifact(tmp_path / "plan-kokoro-82m.json", PlanArtifact)


def test_stop_finding_exits_1(tmp_path, capsys):
    argv = args(tmp_path)
    argv[argv.index("--slo-ms") + 1] = "50"
    assert main(argv) == 1
    assert "[STOP] slo_feasible" in capsys.readouterr().out


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "case,expect",
    [
        ("missing", "no such file"),
        ("invalid-json", "invalid JSON"),
        ("schema-version", "schema_version 9 is not supported"),
        ("negative-rate", "--peak-rps"),
        ("zero-rate", "--peak-rps"),
        ("negative-trough", "--trough-rps"),
        ("surge-high", "--surge-ratio"),
        ("surge-low", "--surge-ratio"),
        ("fingerprint", "--allow-config-mismatch"),
        ("derate-zero", "--qmax-derate"),
        ("derate-high", "--qmax-derate"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, case, expect):
    out = tmp_path / "out"
    q, t = QMAX, TTOTAL
    extra: list[str] = []
    argv_edit: dict[str, str] = {}
    if case == "missing":
        q = tmp_path / "nope.json"
    elif case == "invalid-json":
        q = _write(tmp_path, "q.json", "{not json")
    elif case == "schema-version":
        data = json.loads(QMAX.read_text())
        q = _write(tmp_path, "q.json", json.dumps({**data, "schema_version": 9}))
    elif case == "negative-rate":
        argv_edit["--peak-rps"] = "-5"
    elif case == "zero-rate":
        argv_edit["--peak-rps"] = "0"
    elif case == "negative-trough":
        argv_edit["--trough-rps"] = "-1"
    elif case == "surge-high":
        argv_edit["--surge-ratio"] = "1.5"
    elif case == "surge-low":
        argv_edit["--surge-ratio"] = "0.9"
    elif case == "derate-zero":
        extra = ["--qmax-derate", "0"]
    elif case == "derate-high":
        extra = ["--qmax-derate", "1.2"]
    elif case == "fingerprint":
        data = json.loads(TTOTAL.read_text())
        data["fingerprint"] = {"instance_type": "ml.g6.xlarge", "image_digest": "sha256:" + "a" * 64,
                               "slug": "g6xlarge-aaaaaaaa"}  # fmt: skip
        t = _write(tmp_path, "t.json", json.dumps(data))
    argv = args(out, "--stack", "dev", "--stack-dir", str(out), qmax=q, ttotal=t) + extra
    for flag, value in argv_edit.items():
        argv[argv.index(flag) + 1] = value
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expect in err
    assert len(err.splitlines()) == 1, err
    assert not out.exists()


def test_mismatch_allowed_is_a_warn_finding(tmp_path, capsys):
    data = json.loads(TTOTAL.read_text())
    data["fingerprint"] = {"instance_type": "ml.g6.xlarge", "image_digest": "sha256:" + "a" * 64,
                           "slug": "g6xlarge-aaaaaaaa"}  # fmt: skip
    t = _write(tmp_path, "t.json", json.dumps(data))
    assert main(args(tmp_path / "o", "--allow-config-mismatch", ttotal=t)) == 0
    plan = load_artifact(tmp_path / "o/plan-kokoro-82m.json", PlanArtifact)
    assert plan.finding("fingerprint").level == "warn"


def test_stack_config_keeps_other_keys(tmp_path, capsys):
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(
        "# team settings\nconfig:\n  aws:region: eu-west-1  # where we run\n  other:key: keep-me\n"
        "  speech-endpoints:models:\n    other-model:\n      instance_type: ml.g5.2xlarge\n"
    )
    assert main(args(tmp_path, "--stack", "dev", "--stack-dir", str(tmp_path))) == 0
    text = stack.read_text()
    assert "# team settings" in text and "# where we run" in text
    config = YAML(typ="safe").load(text)["config"]
    assert config["aws:region"] == "eu-west-1" and config["other:key"] == "keep-me"
    models = config["speech-endpoints:models"]
    assert models["other-model"] == {"instance_type": "ml.g5.2xlarge"}
    # The artifacts (outside the stack's directory) are copied under artifacts/ and referenced.
    refs = models["kokoro-82m"]["measurements"]
    assert refs["qmax"] == {"path": f"artifacts/{QMAX.name}", "sha256": file_sha256((tmp_path / "artifacts" / QMAX.name).read_bytes())}
    assert refs["ttotal"]["path"] == f"artifacts/{TTOTAL.name}"
    entry = ModelConfig.model_validate(embedded_config(stack)["speech-endpoints:models"]["kokoro-82m"])
    assert entry.measurements.qmax == load_artifact(QMAX, QmaxArtifact)
    assert entry.measurements.ttotal == load_artifact(TTOTAL, TtotalArtifact)
    assert entry.plan.peak_rps == 5000 and entry.plan.surge_ratio == 1.25
    # No image given: the program builds container/Dockerfile and checks its digest at the push.
    assert entry.instance_type == "ml.g5.xlarge" and entry.image is None
    assert entry.measurements.qmax.fingerprint.image_digest.startswith("sha256:8b1b96bc")


@pytest.mark.slow
def test_plan_imports_neither_pulumi_nor_boto3(tmp_path):
    code = (
        "import sys; from bench.cli.main import main; rc = main(sys.argv[1:]);"
        "bad = [m for m in ('pulumi', 'boto3', 'botocore') if m in sys.modules];"
        "assert not bad, bad; sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code, *args(tmp_path, "--json")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_qmax_derate_plans_a_lower_q_max_and_says_so(tmp_path, capsys):
    assert main(args(tmp_path, "--qmax-derate", "0.9")) == 0
    plan = load_artifact(tmp_path / "plan-kokoro-82m.json", PlanArtifact)
    assert plan.q_max == 45 and plan.queue_max_depth == 45 and plan.thresholds.c_scale_max < 0.75 * 45
    assert plan.inputs.qmax_derate == 0.9
    f = plan.finding("qmax_derate")
    assert f.level == "warn" and "floor(50 x 0.9)" in f.message
    assert "x qmax_derate 0.9, floored" in capsys.readouterr().out


def test_schedule_and_tuned_values_go_into_the_artifact_and_the_stack(tmp_path, capsys):
    """--schedule-from derives daily floors from the trace; tuned flags and the promise land in the
    plan artifact and, with --stack, in the stack entry the program plans from."""
    promise = tmp_path / "promise.json"
    promise.write_text(json.dumps({"slo_share": 0.999, "rejected_share": 0.0005, "instance_hours": 4900.0,
                                   "cost_vs_floor": 1.64, "trace_sha256": "b" * 64, "seed": 1,
                                   "simulator_version": "sim-2"}))
    rc = main(args(tmp_path, "--schedule-from", "diurnal:peak=5000,seed=1", "--schedule-slot-min", "60",
                   "--scale-in-step-share", "0.2", "--reason", "scale_in_step_share=bench tune: cheaper at the same share",
                   "--promise", str(promise), "--stack", "dev", "--stack-dir", str(tmp_path)))
    assert rc == 0
    out = capsys.readouterr().out
    assert "scheduled floors (UTC, daily):" in out and "daily floors derived from diurnal:peak=5000,seed=1" in out
    assert "scale_in_step_share: 0.166667 -> 0.2 of the fleet: bench tune: cheaper at the same share" in out
    assert "promise (simulated):" in out and "1.64x the floor" in out
    plan = load_artifact(tmp_path / "plan-kokoro-82m.json", PlanArtifact)
    floors = plan.schedule.floors
    assert floors[-1].min_instances == plan.fleet.min_instances  # the release after the ramp
    assert max(f.min_instances for f in floors) == plan.fleet.max_instances  # the peak hour's need
    assert plan.scale_in.step_percent == -20 and plan.promise.seed == 1
    # The stack file references the artifacts (path + sha256); read it as the program does.
    entry = ModelConfig.model_validate(embedded_config(tmp_path / "Pulumi.dev.yaml")["speech-endpoints:models"]["kokoro-82m"])
    assert entry.plan.schedule == plan.schedule and entry.plan.scale_in_step_share == 0.2
    assert entry.plan.promise == plan.promise and entry.plan.reasons["scale_in_step_share"].startswith("bench tune")


@pytest.mark.parametrize("extra,needle", [
    (["--target-share", "0.9"], "target_share 0.9 is above 1 - h = 0.75"),
    (["--reason", "nonsense"], "--reason 'nonsense': use NAME=WHY"),
    (["--schedule-from", "nosuch:trace"], "--schedule-from:"),
    (["--schedule-from", "diurnal:peak=5000", "--schedule-timezone", "Mars/Olympus"], "IANA time zone"),
])
def test_bad_tuned_and_schedule_flags_exit_2_and_write_nothing(tmp_path, capsys, extra, needle):
    assert main(args(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert not (tmp_path / "plan-kokoro-82m.json").exists()
