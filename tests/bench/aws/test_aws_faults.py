"""AWS failures injected under moto, as AWS documents them: throttling and dropped connections are
retried within bench's budget (standard mode, bench.aws.client.MAX_ATTEMPTS attempts in all); past the
budget, and for AccessDenied, the command stops with one line, exit 2, and a run that froze
scaling restores it or prints exactly what to run.

The faults are injected at botocore's ``before-send`` event, registered first, so they stand in
for the HTTP exchange itself (moto answers the calls that are not faulted). Backoff sleeps are
recorded instead of slept."""

from __future__ import annotations

import json

import pytest

from bench.aws import client as aws
from bench.aws.freeze import state_path
from bench.cli.main import main

from ..conftest import ENDPOINT

ORIGINAL = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": False}


def _target(sess, min_c=2, max_c=7, suspended=None):
    sess.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT), ScalableDimension=aws.DIMENSION,
        MinCapacity=min_c, MaxCapacity=max_c, SuspendedState=suspended or ORIGINAL,
    )


def _snapshot(sess):
    t = aws.scalable_target(sess, ENDPOINT)
    return t["MinCapacity"], t["MaxCapacity"], aws.suspended(t)


def test_throttling_is_retried_within_the_budget(deployed, faults, capsys):
    _target(deployed, 1, 1, {k: True for k in aws.SUSPEND_KEYS})
    faults.plan["DescribeScalableTargets"] = ["throttle", "throttle", None]
    rc = main(["thaw", "--endpoint", ENDPOINT, "--min", "2", "--max", "7", "--json"])
    assert rc == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["action"] == "registered"
    assert faults.calls["DescribeScalableTargets"] >= 3 and len(faults.sleeps) >= 2
    assert _snapshot(deployed) == (2, 7, ORIGINAL)


def test_throttling_past_the_budget_is_one_line_exit_2(deployed, faults, capsys):
    faults.plan["DescribeScalableTargets"] = ["throttle"]
    rc = main(["thaw", "--endpoint", ENDPOINT, "--min", "2", "--max", "7"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("AwsError: DescribeScalableTargets: ThrottlingException: Rate exceeded")
    assert f"after {aws.MAX_ATTEMPTS} attempts" in err[0]
    assert faults.calls["DescribeScalableTargets"] == aws.MAX_ATTEMPTS
    assert len(faults.sleeps) == aws.MAX_ATTEMPTS - 1 and max(faults.sleeps) <= 20


def test_a_dropped_connection_is_retried(deployed, faults, capsys):
    _target(deployed)
    faults.plan["DescribeScalableTargets"] = ["drop", None]
    rc = main(["thaw", "--endpoint", ENDPOINT])
    assert rc == 0 and "nothing to thaw" in capsys.readouterr().out
    assert faults.calls["DescribeScalableTargets"] == 2


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_access_denied_while_restoring_says_exactly_what_to_run(deployed, faults, capsys, tmp_path):
    """qmax froze the target; AWS refuses the restore: the state file stays, the message names the
    thaw command, and that command restores exactly what was there."""
    _target(deployed)
    before = _snapshot(deployed)
    # First RegisterScalableTarget freezes (allowed); every later one (the restore) is denied.
    faults.plan["RegisterScalableTarget"] = [None, "deny"]
    rc = main(["qmax", "--endpoint", ENDPOINT, "--levels", "1", "--settle-s", "0", "--measure-s", "1", "--cloudwatch-wait-s", "0",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith(f"BenchError: could not restore scaling of {ENDPOINT}")
    assert f"bench thaw --endpoint {ENDPOINT}" in err[-1]
    assert state_path(None, ENDPOINT).exists()
    assert _snapshot(deployed)[:2] == (1, 1)  # still frozen, as the message says
    assert not list((tmp_path / "out").glob("qmax-*.json")) if (tmp_path / "out").exists() else True
    faults.plan.clear()
    assert main(["thaw", "--endpoint", ENDPOINT]) == 0
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()


def test_access_denied_before_anything_changes_freezes_nothing(deployed, faults, capsys, tmp_path):
    _target(deployed)
    before = _snapshot(deployed)
    faults.plan["RegisterScalableTarget"] = ["deny", None]
    rc = main(["qmax", "--endpoint", ENDPOINT, "--levels", "1", "--settle-s", "0", "--measure-s", "1", "--cloudwatch-wait-s", "0",
               "--out", str(tmp_path / "out"), "--json"])
    out = capsys.readouterr().out
    error = json.loads(out)["error"]
    assert rc == 2 and "not authorized" in error["message"], error
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()


def test_endpoint_going_failed_mid_scale_out_stops_and_names_the_way_back(deployed, ref_artifacts, tmp_path,
                                                                           monkeypatch, capsys):
    """ttotal's scale-out: the endpoint goes Failed while Updating. The run stops at the next poll
    (not at --timeout-s), writes nothing, and leaves either the scaling it found or the exact thaw
    command; once the endpoint is back, that command restores what was there."""
    from moto.backends import get_backend
    from moto.sagemaker.models import SageMakerModelBackend

    from bench.commands import ttotal as ttotal_cmd
    from bench.operations import ttotal as ttotal_ops
    from speech.files import write_artifact
    from speech.schema.artifacts import Fingerprint, QmaxArtifact

    from ..conftest import DIGEST, INSTANCE

    _target(deployed)
    before = _snapshot(deployed)
    backend = get_backend("sagemaker")["123456789012"]["us-east-1"]
    real_update = SageMakerModelBackend.update_endpoint_weights_and_capacities
    polls = []

    def updating(self, endpoint_name, desired_weights_and_capacities):
        arn = real_update(self, endpoint_name, desired_weights_and_capacities)
        self.endpoints[endpoint_name].endpoint_status = "Updating"
        return arn

    def sleep(s):
        polls.append(s)
        if len(polls) == 2:
            ep = backend.endpoints[ENDPOINT]
            ep.endpoint_status = "Failed"
            ep.failure_reason = "the instance failed its health check"

    monkeypatch.setattr(SageMakerModelBackend, "update_endpoint_weights_and_capacities", updating)
    logs = deployed.client("logs")
    logs.create_log_group(logGroupName=ttotal_ops.log_group(ENDPOINT))
    q = QmaxArtifact.model_validate({**ref_artifacts[0].model_dump(), "fingerprint": Fingerprint.of(INSTANCE, DIGEST).model_dump()})
    qf = write_artifact(tmp_path / "q.json", q)
    from bench.cli.main import build_parser

    args = build_parser("ttotal").parse_args([
        "ttotal", "--qmax", str(qf), "--endpoint", ENDPOINT, "--poll-s", "0.01", "--probe-concurrency", "0",
        "--timeout-s", "3600", "--out", str(tmp_path / "out")])
    with pytest.raises(Exception) as exc:
        ttotal_cmd.run(args, session=deployed, sleep=sleep)
    message = str(exc.value)
    assert len(polls) <= 4  # stopped at the poll that saw Failed, not after the hour
    assert "Failed" in message and "health check" in message
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    if state_path(None, ENDPOINT).exists():  # the restore could not run on a Failed endpoint: it says how
        assert f"bench thaw --endpoint {ENDPOINT}" in message
        backend.endpoints[ENDPOINT].endpoint_status = "InService"
        assert main(["thaw", "--endpoint", ENDPOINT]) == 0
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()
