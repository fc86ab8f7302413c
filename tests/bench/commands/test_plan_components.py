"""`bench plan --stack --tcopy`: a hosting: components stack entry the program deploys, and a re-plan
that keeps the copy artifact and the components inputs."""

from __future__ import annotations

import json
from pathlib import Path

from ruamel.yaml import YAML

from bench.cli.main import main
from speech.infra.preview import run_preview
from tests.stack_files import embedded_config, embedded_stack

ROOT = Path(__file__).resolve().parents[3]
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
IMAGE = ("123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro-82m@sha256:"
         "8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced")
MODELS = "speech-endpoints:models"


def _tcopy(tmp_path: Path) -> Path:
    example = embedded_stack(ROOT / "examples/Pulumi.components.yaml")
    path = tmp_path / "copy-kokoro-82m-g5xlarge-8b1b96bc.json"
    path.write_text(json.dumps(example["config"][MODELS]["kokoro-82m"]["measurements"]["tcopy"]))
    return path


def _plan(tmp_path: Path, *extra: str) -> int:
    return main(["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--peak-rps", "5000", "--trough-rps", "10",
                 "--out", str(tmp_path), "--stack", "c", "--stack-dir", str(tmp_path), "--image", IMAGE, *extra])


def _entry(tmp_path: Path) -> dict:
    """The entry with its artifact references replaced by the files' content."""
    return embedded_config(tmp_path / "Pulumi.c.yaml")[MODELS]["kokoro-82m"]


def test_tcopy_writes_a_components_entry_the_program_deploys(tmp_path, capsys):
    assert _plan(tmp_path, "--tcopy", str(_tcopy(tmp_path))) == 0
    entry = _entry(tmp_path)
    assert entry["hosting"] == "components" and entry["measurements"]["tcopy"]["kind"] == "copy"
    # The copy artifact lies in the stack's directory: referenced where it is, not copied.
    raw = YAML(typ="safe").load((tmp_path / "Pulumi.c.yaml").read_text())["config"][MODELS]["kokoro-82m"]
    assert raw["measurements"]["tcopy"]["path"] == "copy-kokoro-82m-g5xlarge-8b1b96bc.json"
    result = run_preview(tmp_path / "Pulumi.c.yaml")
    assert [r.name for r in result.of_type("aws-native:sagemaker:InferenceComponent")] == ["kokoro-82m-component"]
    assert result.outputs["scaling"]["kokoro-82m"]["dimension"] == "sagemaker:inference-component:DesiredCopyCount"


def test_replan_keeps_the_copy_artifact_and_inputs(tmp_path, capsys):
    assert _plan(tmp_path, "--tcopy", str(_tcopy(tmp_path))) == 0
    path = tmp_path / "Pulumi.c.yaml"
    data = YAML(typ="safe").load(path.read_text())
    data["config"][MODELS]["kokoro-82m"]["components"] = {"min_copies": 0, "footprint_margin": 0.2}
    path.write_text(json.dumps(data))
    assert _plan(tmp_path, "--peak-rps", "2500") == 0  # new inputs, no --tcopy
    entry = _entry(tmp_path)
    assert entry["hosting"] == "components" and entry["measurements"]["tcopy"]["t_copy_s"] == 7.535
    assert entry["components"] == {"min_copies": 0, "footprint_margin": 0.2} and entry["plan"]["peak_rps"] == 2500


def test_tcopy_without_stack_is_bad_input(tmp_path, capsys):
    argv = ["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--peak-rps", "5000", "--out", str(tmp_path),
            "--tcopy", str(_tcopy(tmp_path))]
    assert main(argv) == 2
    assert "--tcopy only goes into a stack entry" in capsys.readouterr().err
    assert not list(tmp_path.glob("plan-*.json"))


def test_drift_refuses_copy_scaling_it_cannot_read(tmp_path, capsys):
    # Before any AWS call: a components model's scaling is not on the variant drift reads.
    assert _plan(tmp_path, "--tcopy", str(_tcopy(tmp_path))) == 0
    capsys.readouterr()
    assert main(["drift", "--stack", "c", "--stack-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "kokoro-82m: hosting: components" in err and "python -m policy check" in err
