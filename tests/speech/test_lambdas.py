"""The stack's Lambda functions run as deployed (their source strings), against botocore's Stubber:
on a first deploy a role policy created moments ago is not yet in force, and the calls must
survive the denials IAM answers meanwhile."""

from __future__ import annotations

import time
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import Stubber

from speech.infra.components.cache import TRIGGER_CODE, trigger_wait_s, build_may_take_s
from speech.infra.components.guard import GUARD_CODE, GUARD_TIMEOUT_S
from speech.infra.components.lambda_code import IAM_RETRY_S, retry_budget_s

RESOURCE_ID = "endpoint/dev-kokoro-82m/variant/AllTraffic"


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(time, "sleep", waited.append)
    return waited


def _load(code: str, client, monkeypatch):
    monkeypatch.setattr(boto3, "client", lambda service, **kw: client)
    namespace: dict = {}
    exec(compile(code, "index.py", "exec"), namespace)  # the function's source, as Lambda loads it
    return namespace["handler"]


def _aas():
    return boto3.client("application-autoscaling", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def _deregister(stub: Stubber, error: str | None = None) -> None:
    params = {"ServiceNamespace": "sagemaker", "ResourceId": RESOURCE_ID,
              "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}
    if error:
        stub.add_client_error("deregister_scalable_target", service_error_code=error, expected_params=params)
    else:
        stub.add_response("deregister_scalable_target", {}, params)


def test_guard_retries_while_its_policy_propagates(monkeypatch, sleeps):
    client = _aas()
    with Stubber(client) as stub:
        _deregister(stub, "AccessDeniedException")
        _deregister(stub, "AccessDeniedException")
        _deregister(stub)
        out = _load(GUARD_CODE, client, monkeypatch)({"resource_id": RESOURCE_ID, "instance_type": "ml.g5.xlarge"}, None)
        stub.assert_no_pending_responses()
    assert out == {"deregistered": True, "instance_type": "ml.g5.xlarge"} and sleeps == list(IAM_RETRY_S[:2])


def test_guard_on_a_first_deploy_finds_nothing_to_deregister(monkeypatch, sleeps):
    client = _aas()
    with Stubber(client) as stub:
        _deregister(stub, "ObjectNotFoundException")
        out = _load(GUARD_CODE, client, monkeypatch)({"resource_id": RESOURCE_ID, "instance_type": "ml.g5.xlarge"}, None)
    assert out["deregistered"] is False and sleeps == []


def test_guard_gives_up_on_a_denial_that_lasts(monkeypatch, sleeps):
    client = _aas()
    with Stubber(client) as stub:
        for _ in range(len(IAM_RETRY_S) + 1):
            _deregister(stub, "AccessDeniedException")
        with pytest.raises(client.exceptions.ClientError, match="AccessDeniedException"):
            _load(GUARD_CODE, client, monkeypatch)({"resource_id": RESOURCE_ID, "instance_type": "ml.g5.xlarge"}, None)
    assert sleeps == list(IAM_RETRY_S)
    assert GUARD_TIMEOUT_S >= retry_budget_s() + 60


def test_guard_does_not_retry_other_errors(monkeypatch, sleeps):
    client = _aas()
    with Stubber(client) as stub:
        _deregister(stub, "ValidationException")
        with pytest.raises(client.exceptions.ClientError, match="ValidationException"):
            _load(GUARD_CODE, client, monkeypatch)({"resource_id": RESOURCE_ID, "instance_type": "ml.g5.xlarge"}, None)
    assert sleeps == []


def test_cache_trigger_retries_start_build_while_denied(monkeypatch, sleeps):
    client = boto3.client("codebuild", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("start_build", service_error_code="AccessDeniedException",
                              expected_params={"projectName": "p"})
        stub.add_response("start_build", {"build": {"id": "p:1"}}, {"projectName": "p"})
        stub.add_response("batch_get_builds", {"builds": [{"id": "p:1", "buildStatus": "IN_PROGRESS"}]}, {"ids": ["p:1"]})
        stub.add_response("batch_get_builds", {"builds": [{"id": "p:1", "buildStatus": "SUCCEEDED"}]}, {"ids": ["p:1"]})
        context = SimpleNamespace(get_remaining_time_in_millis=lambda: 600_000)
        out = _load(TRIGGER_CODE, client, monkeypatch)({"project": "p"}, context)
        stub.assert_no_pending_responses()
    assert out == {"build": "p:1", "status": "SUCCEEDED"}
    assert sleeps[0] == IAM_RETRY_S[0]  # the denied StartBuild, then one poll
    assert build_may_take_s() <= trigger_wait_s()
