"""The stack's Lambda functions run as deployed (their source strings), against botocore's Stubber:
on a first deploy a role policy created moments ago is not yet in force, and the calls must
survive the denials IAM answers meanwhile."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import Stubber

from speech.infra.components.cache import TRIGGER_CODE, build_may_take_s, trigger_wait_s
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


# --- an update keeps the capacity it has ----------------------------------------------------------------

def _sm():
    return boto3.client("sagemaker", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")


def _describe(stub: Stubber, desired: int | None, error: str | None = None) -> None:
    params = {"EndpointName": "dev-kokoro-82m"}
    if error:
        stub.add_client_error("describe_endpoint", service_error_code=error, service_message="Could not find endpoint",
                              expected_params=params)
        return
    stub.add_response("describe_endpoint", {
        "EndpointName": "dev-kokoro-82m", "EndpointArn": "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/dev-kokoro-82m",
        "EndpointConfigName": "c", "EndpointStatus": "InService", "CreationTime": "2026-01-01T00:00:00Z",
        "LastModifiedTime": "2026-01-01T00:00:00Z",
        "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": desired,
                                "DesiredInstanceCount": desired}]}, params)


EVENT = {"action": "desired_count", "endpoint_name": "dev-kokoro-82m", "variant": "AllTraffic", "floor": 1, "ceiling": 4}


@pytest.mark.parametrize(("desired", "kept"), [(3, 3), (7, 4), (0, 1)])
def test_capacity_read_keeps_the_desired_count_within_the_plan(monkeypatch, sleeps, desired, kept):
    client = _sm()
    with Stubber(client) as stub:
        _describe(stub, desired)
        out = _load(GUARD_CODE, client, monkeypatch)(EVENT, None)
    assert out["desired_instance_count"] == kept


def test_capacity_read_on_a_first_deploy_is_the_floor(monkeypatch, sleeps):
    client = _sm()
    with Stubber(client) as stub:
        _describe(stub, None, error="ValidationException")
        out = _load(GUARD_CODE, client, monkeypatch)(EVENT, None)
    assert out == {"desired_instance_count": 1, "source": "no endpoint yet"}


def test_initial_count_reads_the_invocation_result():
    from speech.infra.components.guard import initial_count

    assert initial_count('{"desired_instance_count": 5, "source": "desired 5 now"}', 1) == 5
    assert initial_count('{"status": "SUCCEEDED"}', 2) == 2 and initial_count("not json", 2) == 2
    assert initial_count('{"desired_instance_count": 0}', 1) == 1
    assert initial_count('{"desired_instance_count": 9}', 1, 4) == 4


def test_the_new_configuration_starts_from_the_capacity_read():
    from pathlib import Path

    from speech.infra.preview import run_preview

    dev = run_preview(Path(__file__).resolve().parents[3] / "Pulumi.dev.yaml", "dev")
    probe = dev.named("kokoro-82m-capacity")
    scaling = dev.outputs["scaling"]["kokoro-82m"]
    assert json.loads(probe.inputs["input"]) == {"action": "desired_count", "endpoint_name": "dev-kokoro-82m",
                                                 "variant": "AllTraffic", "floor": scaling["min"],
                                                 "ceiling": scaling["max"]}
    config = dev.named("kokoro-82m-config")
    # The read is re-run whenever the configuration would be replaced. Issue 46 item 3: the trigger
    # of an unchanged configuration is the one stacks were deployed with (model, instance type,
    # start-up timeout), so the first `up` after upgrading re-reads nothing and starts no fleet.
    variant = config.inputs["productionVariants"][0]
    assert probe.inputs["triggers"] == {"model": variant["modelName"], "instance_type": variant["instanceType"],
                                        "startup_timeout_s": str(int(variant["containerStartupHealthCheckTimeoutInSeconds"]))}
    assert "asyncInferenceConfig" not in config.inputs
    assert probe.urn in config.property_dependencies["productionVariants"]
    # Under the mocks the read returns no count: the floor, as on a first deploy.
    assert config.inputs["productionVariants"][0]["initialInstanceCount"] == 1


def test_a_changed_input_beyond_the_first_three_adds_to_the_capacity_trigger(monkeypatch):
    """The configuration's other inputs (AMI, routing, weight, download timeout) join the trigger
    only when they differ from the values every earlier release deployed (issue 34 F4 still holds:
    a change there makes a new configuration and re-reads the count); unchanged, the trigger keeps
    its old shape (issue 46 item 3)."""
    from pathlib import Path

    from speech.infra.components import endpoint
    from speech.infra.preview import run_preview

    monkeypatch.setattr(endpoint, "MODEL_DATA_DOWNLOAD_TIMEOUT_S", 900)
    dev = run_preview(Path(__file__).resolve().parents[3] / "Pulumi.dev.yaml", "dev")
    triggers = dev.named("kokoro-82m-capacity").inputs["triggers"]
    assert set(triggers) == {"model", "instance_type", "startup_timeout_s", "configuration"}
    assert json.loads(triggers["configuration"]) == {"model_data_download_timeout_in_seconds": 900}
    assert dev.named("kokoro-82m-config").inputs["productionVariants"][0]["modelDataDownloadTimeoutInSeconds"] == 900


def test_the_preview_says_what_a_configuration_replacement_costs():
    from pathlib import Path

    from speech.infra.preview import run_preview

    dev = run_preview(Path(__file__).resolve().parents[3] / "Pulumi.dev.yaml", "dev")
    [note] = [n for n in dev.notes if "blue/green" in n]
    assert "dev-kokoro-82m" in note and "second fleet" in note and "ml.g5.xlarge" in note
    assert "10 % canary for 600 s" in note and "300 s" in note and "at least 900 s" in note
