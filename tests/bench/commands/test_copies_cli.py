"""`python -m bench copies`: the copy plan report and artifact, exit codes, bad input; and the copy
plan feeding `bench capacity --from-endpoint`."""

from __future__ import annotations

from pathlib import Path

import pytest

import bench.aws.client
from bench.cli.main import main
from speech.files import load_artifact, write_artifact
from speech.plan.fleet import FleetState
from speech.schema.copy_plan import CopyPlan
from tests.bench.commands.test_capacity_cli import ENDPOINT, StubbedSession, stub_endpoint
from tests.speech.plan.test_copies import copy_artifact

ROOT = Path(__file__).resolve().parents[3]
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


@pytest.fixture
def copy_file(tmp_path, qmax_ref) -> Path:
    return write_artifact(tmp_path / "copy.json", copy_artifact(qmax_ref))


def argv(out: Path, copy: Path, *extra: str) -> list[str]:
    return ["copies", "--qmax", str(QMAX), "--copy", str(copy), "--peak-rps", "100", "--trough-rps", "10",
            "--out", str(out), *extra]


def test_report_and_artifact(tmp_path, copy_file, capsys):
    assert main(argv(tmp_path, copy_file, "--ttotal", str(TTOTAL), "--instance-type", "ml.g5.12xlarge")) == 0
    out = capsys.readouterr().out
    for needle in ("copies per instance", "limited by accelerator devices", "instances min..max", "1..2",
                   "NumberOfAcceleratorDevicesRequired=1", "[WARN] packing_utilization", "[ok  ] hot_loading",
                   "verdict: WARN"):
        assert needle in out, needle
    plan = load_artifact(tmp_path / "copy-plan-kokoro-82m.json", CopyPlan)
    assert plan.packing.copies_per_instance == 4 and plan.t_total is not None


def test_copy_that_fits_nowhere_exits_1(tmp_path, qmax_ref, capsys):
    big = write_artifact(tmp_path / "big.json", copy_artifact(qmax_ref, accelerator_mib=30_000.0))
    assert main(argv(tmp_path, big, "--json")) == 1  # ml.g5.xlarge: one 24 GiB GPU
    assert CopyPlan.model_validate_json(capsys.readouterr().out).finding("copy_fits").level == "stop"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--instance-type", "ml.zz.huge"], "--instance-type 'ml.zz.huge' is not in the instance table"),
        (["--min-copies", "-1"], "--min-copies -1: outside the allowed range 0 <= x <= 1000 copies"),
        (["--margin", "1.5"], "--margin 1.5: outside the allowed range 0 <= x < 1"),
        (["--surge-ratio", "2"], "--surge-ratio"),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(tmp_path, copy_file, capsys, extra, message):
    assert main(argv(tmp_path / "out", copy_file, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_qmax_file_passed_as_copy_is_named(tmp_path, capsys):
    assert main(argv(tmp_path, QMAX)) == 2
    assert "is a 'qmax' artifact, expected 'copy'" in capsys.readouterr().err


def test_copy_plan_supplies_the_times_of_a_fleet_read(tmp_path, copy_file, capsys, monkeypatch):
    assert main(argv(tmp_path, copy_file, "--ttotal", str(TTOTAL), "--instance-type", "ml.g5.12xlarge", "--json")) == 0
    capsys.readouterr()
    plan = load_artifact(tmp_path / "copy-plan-kokoro-82m.json", CopyPlan)
    sess = StubbedSession()
    stub_endpoint(sess)
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    fleet_file = tmp_path / "fleet.json"
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", str(fleet_file),
                 "--copy-plan", str(tmp_path / "copy-plan-kokoro-82m.json")]) == 0
    fleet = FleetState.model_validate_json(fleet_file.read_text())
    k = fleet.models["kokoro-82m"]
    assert (k.t_copy_s, k.t_total_s) == (plan.t_copy.planning_s, plan.t_total.planning_s)
    assert k.concurrency_per_copy == plan.thresholds.c_scale_max
    assert "wrote" in capsys.readouterr().out


def test_copy_plan_without_t_total_is_refused_for_a_fleet_read(tmp_path, copy_file, capsys):
    assert main(argv(tmp_path, copy_file, "--json")) == 0
    capsys.readouterr()
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", str(tmp_path / "f.json"),
                 "--copy-plan", str(tmp_path / "copy-plan-kokoro-82m.json")]) == 2
    assert "has no T_total" in capsys.readouterr().err
    assert not (tmp_path / "f.json").exists()
