"""``python -m speech render``: exit codes, --json, and nothing written for a refused stack."""

from __future__ import annotations

import json
from pathlib import Path

from speech.__main__ import main
from speech.stack.render import read_yaml
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]


def test_render_writes_one_file_per_model_and_reports_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", "--stack-dir", str(ROOT / "examples"), "--stack", "k8s-keda", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["models"]["kokoro-82m"]
    assert report["file"] == str(out / "k8s-keda-kokoro-82m.yaml")
    docs = read_yaml((out / "k8s-keda-kokoro-82m.yaml").read_text())
    assert [f"{d['kind']}/{d['metadata']['name']}" for d in docs] == report["objects"]
    assert [d["kind"] for d in docs] == ["ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "ScaledObject"]


def test_a_sagemaker_stack_is_refused_with_exit_2(tmp_path, capsys):
    assert main(["render", "--stack-dir", str(ROOT), "--stack", "dev", "--out", str(tmp_path / "o")]) == 2
    assert "has no model with hosting: kubernetes" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_stack_the_api_server_would_refuse_writes_nothing(tmp_path, capsys):
    stack = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path, "bad")
    # A tuned scale-in cooldown past the HPA's 1800 s period limit.
    floor = "        min_instances: 2\n"
    stack.write_text(stack.read_text().replace(floor, floor + "        scale_in_cooldown_s: 3000\n"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "bad-kokoro-82m.yaml").write_text("previous\n")
    assert main(["render", "--stack-dir", str(tmp_path), "--stack", "bad", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ConfigError: ") and "periodSeconds 3000 must be within 1..1800" in err
    assert (out / "bad-kokoro-82m.yaml").read_text() == "previous\n"


def test_a_missing_stack_file_says_where_it_looked(tmp_path, capsys):
    assert main(["render", "--stack", "nope", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "pass --stack-dir DIR" in capsys.readouterr().err
