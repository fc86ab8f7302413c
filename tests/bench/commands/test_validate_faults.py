"""``bench validate --endpoint --live`` under injected AWS faults: scaling frozen for the load is
restored on every way out and stderr says so; when AWS refuses the restore, the error names the
exact ``bench thaw`` command, and that command restores what was there.

moto plays the control plane and CloudWatch; it has no response streaming, so :class:`Runtime`
answers InvokeEndpointWithResponseStream at ``before-send`` (botocore's real event-stream parser
reads it) as an endpoint of known capacity: two PCM parts after ``service_s``, and past the plan's
queue depth the container's 503 queue_saturated as SageMaker relays it (ModelError, HTTP 424).
Faults are injected ahead of both (the ``faults`` fixture, tests/bench/conftest.py). Everything
runs in this process: no server is started."""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time

import pytest
from botocore.awsrequest import AWSResponse

from bench.aws import client as aws
from bench.aws.freeze import state_path
from bench.cli.main import main
from speech.files import write_artifact

from ..conftest import ENDPOINT, _Raw
from .test_qmax_component import event_message

ORIGINAL = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": False}
FROZEN = {k: True for k in aws.SUSPEND_KEYS}


class Runtime:
    """The endpoint's data plane: at most ``gate`` requests admitted at once, each answered after
    ``service_s``; ``on_invoke(n)`` runs at the n-th invocation (to fail the endpoint, or press
    Ctrl-C, mid-load)."""

    def __init__(self, faults, gate: int, service_s: float = 0.2):
        self.gate, self.service_s = gate, service_s
        self.inflight = self.invocations = 0
        self.lock = threading.Lock()
        self.down = False
        self.on_invoke = None
        faults.answer["InvokeEndpointWithResponseStream"] = self

    def __call__(self, request):
        with self.lock:
            self.invocations += 1
            n, admitted = self.invocations, self.inflight < self.gate and not self.down
            if admitted:
                self.inflight += 1
        if self.on_invoke is not None:
            self.on_invoke(n)
        if self.down:
            return _error(request, 400, "ValidationError", {"Message": f"Endpoint {ENDPOINT} is not in service"})
        if not admitted:
            return _error(request, 424, "ModelError", {
                "Message": "Received server error (503) from primary with message \"queue_saturated\"",
                "OriginalStatusCode": 503, "OriginalMessage": json.dumps({"error": "queue_saturated"})})
        try:
            time.sleep(self.service_s)
        finally:
            with self.lock:
                self.inflight -= 1
        raw = event_message(b"\x00\x01" * 8) + event_message(b"\x02\x03" * 8)
        return AWSResponse(request.url, 200, {"Content-Type": "application/vnd.amazon.eventstream",
                                              "X-Amzn-SageMaker-Content-Type": "audio/pcm"}, _Raw(raw))


def _error(request, status: int, code: str, body: dict) -> AWSResponse:
    return AWSResponse(request.url, status, {"Content-Type": "application/json", "x-amzn-ErrorType": code},
                       _Raw(json.dumps(body).encode()))


@pytest.fixture
def runtime(deployed, faults, ref_plan):
    return Runtime(faults, gate=ref_plan.queue_max_depth)


def _snapshot(sess):
    t = aws.scalable_target(sess, ENDPOINT)
    return t["MinCapacity"], t["MaxCapacity"], aws.suspended(t)


def _validate(ref_plan, tmp_path, *extra: str) -> int:
    plan_file = write_artifact(tmp_path / "plan.json", ref_plan)
    return main(["validate", "--plan", str(plan_file), "--endpoint", ENDPOINT, "--live", "--mix", "short",
                 "--settle-s", "0.2", "--measure-s", "1", "--cloudwatch-wait-s", "0", "--poll-s", "0.01", "--json",
                 *extra])


def _restored(err: str) -> bool:
    return f"restored {ENDPOINT}: min 1, max 3, suspended {ORIGINAL}" in err


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_throttling_within_the_budget_is_retried_and_the_checks_pass(deployed, runtime, faults, ref_plan, tmp_path,
                                                                     capsys):
    before = _snapshot(deployed)
    assert before == (1, 3, ORIGINAL)
    faults.plan["RegisterScalableTarget"] = ["throttle", "throttle", None]
    faults.plan["DescribeEndpoint"] = ["throttle", None]
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert rc == 0 and report["ok"] is True, (report, err)
    ok, gate = report["live"]
    assert ok["rejected"] == 0 and ok["errors"] == 0 and gate["rejected"] > 0
    assert f"froze {ENDPOINT}: min=max=1" in err and _restored(err)
    assert faults.calls["RegisterScalableTarget"] == 4 and len(faults.sleeps) >= 3  # 2 taken, 2 throttled
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()


def test_throttling_past_the_budget_restores_scaling_and_is_one_line_exit_2(deployed, runtime, faults, ref_plan,
                                                                            tmp_path, capsys):
    """Scaling is frozen (the 3rd DescribeEndpoint is the freeze's), then every DescribeEndpoint
    is throttled: one error, exit 2, scaling restored and stderr says so."""
    before = _snapshot(deployed)
    faults.plan["DescribeEndpoint"] = [None, None, None, "throttle"]
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert rc == 2 and error["type"] == "AwsError", error
    assert error["message"].startswith("DescribeEndpoint: ThrottlingException: Rate exceeded")
    assert f"after {aws.MAX_ATTEMPTS} attempts" in error["message"]
    assert f"froze {ENDPOINT}" in err and _restored(err)
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()
    assert runtime.invocations == 0  # stopped before any load


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_a_dropped_connection_is_retried(deployed, runtime, faults, ref_plan, tmp_path, capsys):
    faults.plan["RegisterScalableTarget"] = ["drop", None]
    faults.plan["DescribeScalableTargets"] = ["drop", None]
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["ok"] is True, (out, err)
    assert faults.calls["RegisterScalableTarget"] == 3 and _restored(err)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_access_denied_while_restoring_names_the_thaw_command_that_restores(deployed, runtime, faults, ref_plan,
                                                                           tmp_path, capsys):
    before = _snapshot(deployed)
    faults.plan["RegisterScalableTarget"] = [None, "deny"]  # the freeze is allowed, the restore is not
    rc = _validate(ref_plan, tmp_path, "--state-dir", str(tmp_path / "state"))
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert rc == 2 and error["type"] == "BenchError", error
    assert error["message"].startswith(f"could not restore scaling of {ENDPOINT}") and "not authorized" in error["message"]
    cmd = f"python -m bench thaw --endpoint {ENDPOINT} --state-dir {tmp_path / 'state'} --region us-east-1"
    assert error["message"].endswith(f"run {cmd}")
    assert _snapshot(deployed) == (1, 1, FROZEN) and state_path(tmp_path / "state", ENDPOINT).exists()
    faults.plan.clear()
    capsys.readouterr()
    assert main(shlex.split(cmd)[3:]) == 0, capsys.readouterr()
    assert _snapshot(deployed) == before and not state_path(tmp_path / "state", ENDPOINT).exists()


@pytest.mark.parametrize("op", ["DescribeScalableTargets", "RegisterScalableTarget"])
def test_access_denied_before_anything_changes_freezes_nothing(deployed, runtime, faults, ref_plan, tmp_path, capsys,
                                                               op):
    """Denied on the first read, or on the freeze itself (every RegisterScalableTarget): nothing
    frozen, no state file, one line, exit 2, no load sent."""
    before = _snapshot(deployed)
    faults.plan[op] = ["deny"]
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert rc == 2 and error["type"] == "AwsError" and err == "", (error, err)
    assert error["message"].startswith(f"{op}: AccessDeniedException: User is not authorized")
    assert error["message"].endswith("grant the permission to this role or user")
    assert _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()
    assert runtime.invocations == 0


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_endpoint_going_failed_mid_load_stops_restores_and_names_the_way_back(deployed, runtime, ref_plan, tmp_path,
                                                                             capsys):
    from moto.backends import get_backend

    before = _snapshot(deployed)
    ep = get_backend("sagemaker")["123456789012"]["us-east-1"].endpoints[ENDPOINT]

    def fail(n: int) -> None:
        if n == 20 and not runtime.down:
            runtime.down = True
            ep.endpoint_status, ep.failure_reason = "Failed", "the instance failed its health check"

    runtime.on_invoke = fail
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert rc == 1 and report["ok"] is False
    [issue] = report["issues"]
    assert issue["kind"] == "endpoint"
    assert f"endpoint {ENDPOINT} went Failed during the live checks (the instance failed its health check)" in issue["message"]
    assert "pulumi up and re-run bench validate --live" in issue["message"]
    assert [row["check"] for row in report["live"]] == ["0.8 x C_scale_max"]  # stopped: the gate check was not run
    assert _restored(err) and _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_ctrl_c_mid_load_exits_130_and_restores_scaling(deployed, runtime, ref_plan, tmp_path, capsys):
    """A real SIGINT, sent while the load runs: Python raises KeyboardInterrupt in the main thread
    wherever it is; the run exits 130 and scaling is as it was."""
    before = _snapshot(deployed)
    runtime.on_invoke = lambda n: n == 10 and os.kill(os.getpid(), signal.SIGINT)
    rc = _validate(ref_plan, tmp_path)
    out, err = capsys.readouterr()
    assert rc == 130 and json.loads(out)["error"]["type"] == "Interrupted", (out, err)
    assert _restored(err) and _snapshot(deployed) == before and not state_path(None, ENDPOINT).exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_a_later_level_gets_all_its_requests_in_flight(deployed, runtime):
    """One load session for both checks (and for a qmax ladder): the second, higher level must
    reach the endpoint with all its requests at once, not with the first level's pool."""
    from bench.load.loadgen import Session
    from bench.load.targets import SageMakerTarget

    seen: list[int] = []
    runtime.on_invoke = lambda n: seen.append(runtime.inflight)
    session = Session(SageMakerTarget(ENDPOINT, session=aws.session()))
    try:
        session.level(1, 0, 0.3, ["Hello."])
        low = max(seen)
        session.level(30, 0, 0.6, ["Hello."])
    finally:
        session.close()
    assert low == 1 and max(seen) > 20, (low, max(seen))
