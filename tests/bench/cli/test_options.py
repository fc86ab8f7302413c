"""``bench plan --promise FILE`` (bench.cli.options): the promise read from what ``bench tune``
writes (its artifact, the tuned plan) or from a promise's JSON in either shape, and refused with
a message that names the file when the file holds none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.main import main
from speech.files import load_artifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import TuneArtifact
from tests.conftest import QMAX_REF, TTOTAL_REF

# written by `bench tune` at cb71c71 (tests/speech/sim/test_artifact.py loads them too)
DATA = Path(__file__).parents[2] / "speech" / "data"
TUNE = DATA / "tune-kokoro-82m-diurnal-cb71c71.json"
TUNED_PLAN = DATA / "plan-kokoro-82m-tuned-cb71c71.json"


def _plan(out: Path, promise: Path) -> int:
    return main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--peak-rps", "600",
                 "--trough-rps", "10", "--out", str(out), "--promise", str(promise)])


def _recorded(out: Path):
    return load_artifact(out / "plan-kokoro-82m.json", PlanArtifact).promise


def test_the_tune_artifact_gives_its_promise_plan_part(tmp_path, capsys):
    assert _plan(tmp_path, TUNE) in (0, 1)
    assert _recorded(tmp_path) == load_artifact(TUNE, TuneArtifact).promise.plan_promise()


def test_the_tuned_plan_gives_its_own_promise(tmp_path, capsys):
    assert _plan(tmp_path, TUNED_PLAN) in (0, 1)
    assert _recorded(tmp_path) == load_artifact(TUNED_PLAN, PlanArtifact).promise


@pytest.mark.parametrize("shape", ["plan", "tune"])
def test_a_promise_alone_in_either_shape(tmp_path, capsys, shape):
    plan_promise = load_artifact(TUNED_PLAN, PlanArtifact).promise
    tune_promise = load_artifact(TUNE, TuneArtifact).promise
    text = plan_promise.model_dump_json() if shape == "plan" else tune_promise.model_dump_json()
    assert ("within_slo_share" in text) == (shape == "tune")  # the two shapes differ on disk
    (tmp_path / "p.json").write_text(text)
    assert _plan(tmp_path / "out", tmp_path / "p.json") in (0, 1)
    assert _recorded(tmp_path / "out") == (plan_promise if shape == "plan" else tune_promise.plan_promise())


@pytest.mark.parametrize("what,expect", [
    ("qmax", "a 'qmax' artifact holds no plan promise"),
    ("untuned plan", "the plan holds no promise (an untuned plan)"),
    ("bad field", "slo_share"),
    ("not json", "invalid JSON"),
])
def test_a_file_without_a_promise_is_refused_by_name(tmp_path, capsys, what, expect):
    bad = tmp_path / "bad.json"
    if what == "qmax":
        bad = QMAX_REF
    elif what == "untuned plan":
        assert main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--peak-rps", "600",
                     "--out", str(tmp_path / "seed")]) in (0, 1)
        bad = tmp_path / "seed" / "plan-kokoro-82m.json"
    elif what == "bad field":
        promise = json.loads(load_artifact(TUNED_PLAN, PlanArtifact).promise.model_dump_json())
        bad.write_text(json.dumps({**promise, "slo_share": 1.5}))
    else:
        bad.write_text("{not json")
    capsys.readouterr()
    assert _plan(tmp_path / "out", bad) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"UsageError: --promise {bad}") and expect in err, err
    assert not (tmp_path / "out" / "plan-kokoro-82m.json").exists()  # nothing written
