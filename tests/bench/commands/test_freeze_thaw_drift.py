"""Freeze/thaw, drift and validate against moto in-process, through the real CLI entry point."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from bench.aws import client as aws
from bench.aws.freeze import Freeze, state_path
from bench.cli.main import main

from ..conftest import ENDPOINT, STACK, state_dir

ORIGINAL = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": True}


def _set_target(sess, min_c=2, max_c=7, suspended=ORIGINAL):
    sess.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT), ScalableDimension=aws.DIMENSION,
        MinCapacity=min_c, MaxCapacity=max_c, SuspendedState=suspended,
    )


def _snapshot(sess):
    t = aws.scalable_target(sess, ENDPOINT)
    return t["MinCapacity"], t["MaxCapacity"], aws.suspended(t)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_ladder_restores_scalable_target_exactly(deployed, tmp_path, sig):
    _set_target(deployed)
    before = _snapshot(deployed)
    seen = {}

    frozen = (1, 1, {k: True for k in aws.SUSPEND_KEYS})
    finished = threading.Event()

    def interrupt():
        # Wait (by events, not a time budget: a loaded machine may take long) until the ladder has
        # written its state and frozen the target, record what frozen looks like, then signal.
        deadline = time.monotonic() + 240
        while not finished.is_set() and time.monotonic() < deadline:
            if state_path(None, ENDPOINT).exists() and _snapshot(deployed) == frozen:
                break
            time.sleep(0.02)
        if finished.is_set():
            return  # the ladder ended first: the assertions below say so
        seen["frozen"] = _snapshot(deployed)
        seen["state_file"] = json.loads(state_path(None, ENDPOINT).read_text())
        os.kill(os.getpid(), sig)

    t = threading.Thread(target=interrupt)
    t.start()
    try:
        rc = main(["qmax", "--endpoint", ENDPOINT, "--levels", "1,2,4", "--settle-s", "0.2", "--measure-s", "30",
                   "--out", str(tmp_path / "out"), "--json"])
    finally:
        finished.set()
        t.join()
    assert "frozen" in seen, "the ladder ended before it had frozen the target"
    assert rc == 130
    assert seen["frozen"] == frozen
    assert seen["state_file"]["min_capacity"] == 2 and seen["state_file"]["suspended_state"] == ORIGINAL
    assert _snapshot(deployed) == before
    assert not state_path(None, ENDPOINT).exists()
    assert not (tmp_path / "out").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_exception_inside_freeze_restores(deployed):
    _set_target(deployed)
    before = _snapshot(deployed)
    with pytest.raises(RuntimeError):
        with Freeze(deployed, ENDPOINT, log=lambda m: None) as f:
            assert f.active and _snapshot(deployed)[0] == 1
            raise RuntimeError("boom")
    assert _snapshot(deployed) == before


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_killed_run_leaves_state_drift_reports_and_thaw_restores(deployed, capsys, tmp_path, model_config):
    from speech.stack.write import write_model_entry

    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    before = _snapshot(deployed)
    # A run killed outright: freeze entered, never exited.
    f = Freeze(deployed, ENDPOINT, log=lambda m: None)
    f.__enter__()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    aas = deployed.client("application-autoscaling")
    aas.put_scaling_policy(
        PolicyName="old-manual-policy", ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT),
        ScalableDimension=aws.DIMENSION, PolicyType="StepScaling",
        StepScalingPolicyConfiguration={"AdjustmentType": "ChangeInCapacity", "Cooldown": 60,
                                        "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]},
    )
    capsys.readouterr()
    rc = main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    kinds = [i["kind"] for i in report["endpoints"][ENDPOINT]]
    assert rc == 1 and report["ok"] is False
    assert "frozen" in kinds and "orphan_policy" in kinds
    assert any("old-manual-policy" in i["message"] for i in report["endpoints"][ENDPOINT])

    # A new measurement refuses to freeze over the saved state (it would save the frozen one).
    rc = main(["qmax", "--endpoint", ENDPOINT, "--levels", "1", "--settle-s", "0", "--measure-s", "1",
               "--out", str(tmp_path / "o"), "--json"])
    # Under --json the failure is one JSON object on stdout.
    error = json.loads(capsys.readouterr().out)["error"]
    assert rc == 2 and error["exit_code"] == 2 and "thaw" in error["message"]

    capsys.readouterr()
    assert main(["thaw", "--endpoint", ENDPOINT, "--json"]) == 0
    thawed = json.loads(capsys.readouterr().out)
    assert thawed["action"] == "restored" and thawed["endpoint"] == ENDPOINT
    assert not any(thawed["suspended_state"].values())
    assert _snapshot(deployed) == before
    assert not state_path(None, ENDPOINT).exists()
    capsys.readouterr()
    rc = main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1 and "[frozen]" not in out and "old-manual-policy" in out

    aas.delete_scaling_policy(PolicyName="old-manual-policy", ServiceNamespace=aws.NAMESPACE,
                              ResourceId=aws.resource_id(ENDPOINT), ScalableDimension=aws.DIMENSION)
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("preflight-ok")


def test_drift_unplanned_scaling_when_stack_has_no_measurements(deployed, tmp_path, capsys, model_config):
    from speech.stack.write import write_model_entry

    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config.model_copy(update={"measurements": None}))
    assert main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)]) == 1
    assert "[unplanned_scaling]" in capsys.readouterr().out


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_validate_catches_target_value_edited_after_deploy(deployed, ref_plan, tmp_path, capsys):
    from speech.files import write_artifact

    plan_file = write_artifact(tmp_path / "plan.json", ref_plan)
    assert main(["validate", "--plan", str(plan_file), "--endpoint", ENDPOINT]) == 0
    assert "validate: pass" in capsys.readouterr().out
    cfg = aws.scaling_policies(deployed, ENDPOINT)
    out = next(p for p in cfg if p["PolicyName"].endswith("-scale-out"))
    tt = dict(out["TargetTrackingScalingPolicyConfiguration"], TargetValue=99.0)
    deployed.client("application-autoscaling").put_scaling_policy(
        PolicyName=out["PolicyName"], ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT),
        ScalableDimension=aws.DIMENSION, PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration=tt,
    )
    assert main(["validate", "--plan", str(plan_file), "--endpoint", ENDPOINT]) == 1
    out = capsys.readouterr().out
    assert "TargetValue is 99.0" in out and f"{ref_plan.thresholds.scaling_target_value:g}" in out


def test_missing_endpoint_is_one_line_exit_2(aws_env, capsys, tmp_path):
    rc = main(["qmax", "--endpoint", "nope", "--settle-s", "0", "--measure-s", "1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "nope" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    assert main(["thaw", "--endpoint", "nope"]) == 2
    assert not list(state_dir().glob("*")) if state_dir().exists() else True


def test_the_named_thaw_command_runs_from_anywhere_as_printed(tmp_path, monkeypatch):
    import shlex

    from bench.aws.freeze import thaw_command

    monkeypatch.chdir(tmp_path)
    cmd = thaw_command("prod-kokoro-82m", Path("my state"), "eu-west-1")
    assert shlex.split(cmd) == ["python", "-m", "bench", "thaw", "--endpoint", "prod-kokoro-82m",
                                "--state-dir", str(tmp_path / "my state"), "--region", "eu-west-1"]
    assert thaw_command("x") == "python -m bench thaw --endpoint x"
