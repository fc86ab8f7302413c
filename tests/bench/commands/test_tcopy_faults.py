"""``bench tcopy --inference-component`` under injected AWS faults: the copy count it raised is put
back on every way out, and the output says so; when AWS refuses that too, the error names the
exact aws CLI call (with its values) that puts it back.

moto has no inference components, so :class:`Component` stands in for the two calls tcopy makes on
one (DescribeInferenceComponent, UpdateInferenceComponentRuntimeConfig) with the service's own
shapes, parsed by botocore's real JSON parser; the endpoint, its configuration and Application Auto
Scaling are moto's. Faults are injected ahead of both at ``before-send`` (the ``faults`` fixture,
tests/bench/conftest.py), so botocore's standard retry mode runs for real."""

from __future__ import annotations

import json
import os
import shlex
import signal

import pytest

from bench.aws import client as aws
from bench.cli.main import main
from speech.files import load_artifact
from speech.plan.copies import COPY_SCALABLE_DIMENSION
from speech.schema.artifacts import CopyArtifact

from ..conftest import create_endpoint, json_response
from .test_qmax_component import COMPONENT, component_response
from .test_tcopy import LOCAL_COPY

BASE = 2


class Component:
    """One inference component with ``BASE`` copies. A copy-count change is Updating for ``ticks``
    describes, then InService with the new count. ``on_describe(n)`` runs at the n-th describe
    after the first change (to fail the component, or press Ctrl-C, mid-run)."""

    def __init__(self, faults, ticks: int = 2):
        self.current = self.desired = BASE
        self.status, self.reason = "InService", None
        self.ticks, self.pending = ticks, 0
        self.updates: list[int] = []
        self.describes_since_update = 0
        self.on_describe = None
        faults.answer["DescribeInferenceComponent"] = self.describe
        faults.answer["UpdateInferenceComponentRuntimeConfig"] = self.update
        faults.answer["DescribeScalableTargets"] = self.copy_scaling

    def copy_scaling(self, request):
        """No copy scaling registered on the component (moto knows no copy dimension); the
        endpoint's own scalable targets stay moto's."""
        if json.loads(request.body).get("ScalableDimension") != COPY_SCALABLE_DIMENSION:
            return None
        return json_response(request, {"ScalableTargets": []})

    def describe(self, request):
        assert json.loads(request.body)["InferenceComponentName"] == COMPONENT
        if self.updates:
            self.describes_since_update += 1
            if self.on_describe is not None:
                self.on_describe(self.describes_since_update)
        if self.pending and self.status != "Failed":
            self.pending -= 1
            if self.pending == 0:
                self.current, self.status = self.desired, "InService"
        body = component_response(current=self.current, desired=self.desired, status=self.status)
        if self.reason:
            body["FailureReason"] = self.reason
        return json_response(request, body)

    def update(self, request):
        body = json.loads(request.body)
        assert body["InferenceComponentName"] == COMPONENT
        self.desired = body["DesiredRuntimeConfig"]["CopyCount"]
        self.updates.append(self.desired)
        if self.status != "Failed":
            self.status, self.pending = "Updating", self.ticks
        return json_response(request, {"InferenceComponentArn": f"arn:aws:sagemaker:us-east-1:123456789012:"
                                                                f"inference-component/{COMPONENT}"})

    def fail(self, reason: str) -> None:
        self.status, self.reason = "Failed", reason


@pytest.fixture
def component(faults, aws_env):
    create_endpoint(aws_env)  # the component's endpoint (its configuration names the instance type)
    return Component(faults)


def _tcopy(tmp_path, *extra: str) -> int:
    return main(["tcopy", "--inference-component", COMPONENT, "--footprint-from", str(LOCAL_COPY), "--poll-s", "0.01",
                 "--timeout-s", "60", "--out", str(tmp_path / "out"), "--json", *extra])


def _error(capsys) -> tuple[dict, list[str]]:
    """The one JSON error on stdout, and stderr's lines."""
    out, err = capsys.readouterr()
    [line] = out.strip().splitlines()
    return json.loads(line)["error"], err.strip().splitlines()


def _written(tmp_path) -> list:
    return list((tmp_path / "out").glob("copy-*.json")) if (tmp_path / "out").exists() else []


def test_throttling_within_the_budget_is_retried_and_the_run_completes(component, faults, tmp_path, capsys):
    faults.plan["UpdateInferenceComponentRuntimeConfig"] = ["throttle", "throttle", None]
    faults.plan["DescribeInferenceComponent"] = [None, "throttle", None]
    rc = _tcopy(tmp_path, "--starts", "2")
    assert rc == 0, capsys.readouterr()
    [path] = _written(tmp_path)
    assert len(load_artifact(path, CopyArtifact).starts) == 2
    assert component.updates == [BASE + 1, BASE, BASE + 1, BASE] and component.desired == BASE
    assert faults.calls["UpdateInferenceComponentRuntimeConfig"] == 6  # 4 taken, 2 throttled and retried
    assert len(faults.sleeps) >= 3 and max(faults.sleeps) <= 20


def test_throttling_past_the_budget_puts_the_count_back_and_says_so(component, faults, tmp_path, capsys):
    """The copy count was raised; then every describe is throttled: exit 2 with the AWS error in
    one line, the count set back, and stderr says it was."""
    faults.plan["DescribeInferenceComponent"] = [None, "throttle"]
    rc = _tcopy(tmp_path, "--starts", "1")
    error, err = _error(capsys)
    assert rc == 2 and error["type"] == "AwsError", error
    assert error["message"].startswith("DescribeInferenceComponent: ThrottlingException: Rate exceeded")
    assert f"after {aws.MAX_ATTEMPTS} attempts" in error["message"]
    assert err == [f"restored {COMPONENT}: copy count set back to {BASE} (was unknown)"]
    assert component.updates == [BASE + 1, BASE] and component.desired == BASE
    assert not _written(tmp_path)


def test_a_dropped_connection_is_retried(component, faults, tmp_path, capsys):
    faults.plan["UpdateInferenceComponentRuntimeConfig"] = ["drop", None]
    faults.plan["DescribeInferenceComponent"] = [None, "drop", None]
    rc = _tcopy(tmp_path, "--starts", "1")
    assert rc == 0, capsys.readouterr()
    assert len(_written(tmp_path)) == 1 and component.updates == [BASE + 1, BASE]
    assert faults.calls["UpdateInferenceComponentRuntimeConfig"] == 3


def test_access_denied_while_putting_back_names_the_exact_aws_call(component, faults, tmp_path, capsys):
    """Raising the count is allowed, every later update (the give-back, the put-back) is denied:
    nonzero exit, the message names the aws CLI call, and that call, run, puts the count back."""
    faults.plan["UpdateInferenceComponentRuntimeConfig"] = [None, "deny"]
    rc = _tcopy(tmp_path, "--starts", "1")
    error, err = _error(capsys)
    assert rc == 2 and error["type"] == "BenchError", error
    message = error["message"]
    assert f"could not put the copy count of inference component {COMPONENT} back to {BASE}" in message
    assert "not authorized" in message and f"its desired count is {BASE + 1}" in message
    cmd = (f"aws sagemaker update-inference-component-runtime-config --inference-component-name {COMPONENT} "
           f"--desired-runtime-config CopyCount={BASE} --region us-east-1")
    assert message.endswith(f"run {cmd}") and err == []
    assert component.desired == BASE + 1 and not _written(tmp_path)
    # Once the permission is there, the named call (its values, read back from the message) restores.
    faults.plan.clear()
    argv = shlex.split(message.rsplit("run ", 1)[1])
    values = dict(zip(argv[3::2], argv[4::2], strict=True))
    aws.session(values["--region"]).client("sagemaker").update_inference_component_runtime_config(
        InferenceComponentName=values["--inference-component-name"],
        DesiredRuntimeConfig={"CopyCount": int(values["--desired-runtime-config"].removeprefix("CopyCount="))})
    assert component.desired == BASE


@pytest.mark.parametrize("op", ["DescribeInferenceComponent", "UpdateInferenceComponentRuntimeConfig"])
def test_access_denied_before_anything_changes_is_one_line_exit_2(component, faults, tmp_path, capsys, op):
    faults.plan[op] = ["deny"]
    rc = _tcopy(tmp_path, "--starts", "1")
    error, err = _error(capsys)
    assert rc == 2 and error["type"] == "AwsError" and err == [], (error, err)
    assert error["message"].startswith(f"{op}: AccessDeniedException: User is not authorized")
    assert error["message"].endswith("grant the permission to this role or user")
    assert component.updates == [] and component.desired == BASE and not _written(tmp_path)


def test_component_going_failed_mid_run_stops_puts_the_count_back_and_names_the_way_back(component, tmp_path, capsys):
    component.on_describe = lambda n: n == 1 and component.fail("out of accelerator memory")
    rc = _tcopy(tmp_path, "--starts", "3")
    error, err = _error(capsys)
    assert rc == 1 and error["type"] == "CopyNotReady", error
    assert f"inference component '{COMPONENT}' went Failed while adding copy {BASE + 1}" in error["message"]
    assert "out of accelerator memory" in error["message"] and "nothing written" in error["message"]
    [restored] = err
    assert restored.startswith(f"restored {COMPONENT}: copy count set back to {BASE} (was {BASE + 1}); it is Failed "
                               "(out of accelerator memory)")
    assert "pulumi up" in restored and f"describe-inference-component --inference-component-name {COMPONENT}" in restored
    assert component.updates == [BASE + 1, BASE] and not _written(tmp_path)  # stopped: no second start


def _press(sig: int):
    def at(n: int) -> None:
        if n == 1:
            if sig == signal.SIGINT:
                raise KeyboardInterrupt  # what Python's SIGINT handler raises in the main thread
            os.kill(os.getpid(), sig)
    return at


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_mid_run_exits_130_and_puts_the_count_back(component, tmp_path, capsys, sig):
    component.on_describe = _press(sig)
    rc = _tcopy(tmp_path, "--starts", "2")
    error, err = _error(capsys)
    assert rc == 130 and error["type"] == "Interrupted", error
    assert err == [f"restored {COMPONENT}: copy count set back to {BASE} (was {BASE + 1})"]
    assert component.updates == [BASE + 1, BASE] and component.desired == BASE
    assert not _written(tmp_path)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the run's SIGTERM handler is gone
