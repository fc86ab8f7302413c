"""A batch model under Pulumi's mocks: an asynchronous endpoint scaled on its backlog from zero,
next to a real-time model in the same stack (speech.infra.preview.run_preview runs the program)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from speech.errors import ConfigError
from speech.infra.preview import run_preview
from tests.speech.conftest import MODELS, dev_config

TARGET = "aws:appautoscaling/target:Target"
POLICY = "aws:appautoscaling/policy:Policy"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


def batch_entry(kokoro_entry: dict, name: str = "narration", **plan) -> dict:
    e = copy.deepcopy(kokoro_entry)
    e.update(priority="batch", hosting="async")
    e["plan"].update({"peak_rps": 50.0, "trough_rps": 1.0, "max_delay_s": 900.0, **plan})
    for kind in ("qmax", "ttotal"):
        e["measurements"][kind]["model"] = name
    return e


@pytest.fixture(scope="module")
def two_routes(tmp_path_factory):
    """One preview of a stack with a real-time and a batch route, shared by the read-only tests."""
    kokoro = copy.deepcopy(dev_config()[MODELS]["kokoro-82m"])
    config = {"aws:region": "eu-west-1", MODELS: {"kokoro-82m": kokoro, "narration": batch_entry(kokoro)}}
    path = tmp_path_factory.mktemp("batch") / "Pulumi.t.yaml"
    path.write_text(json.dumps({"config": config}))
    return run_preview(path)


def test_async_endpoint_configuration(two_routes):
    r = two_routes
    cfg = r.named("narration-config").inputs
    a = cfg["asyncInferenceConfig"]
    assert a["clientConfig"]["maxConcurrentInvocationsPerInstance"] == 50  # the reference Q_max
    out = a["outputConfig"]
    assert out["s3OutputPath"].startswith("s3://") and out["s3OutputPath"].endswith("/async/narration/output/")
    assert out["s3FailurePath"].endswith("/async/narration/failure/")
    topics = {t.name: t for t in r.of_type("aws:sns/topic:Topic")}
    assert {"narration-async-success", "narration-async-error"} <= set(topics)
    assert out["notificationConfig"]["successTopic"] != out["notificationConfig"]["errorTopic"]
    variant = cfg["productionVariants"][0]
    assert "routingConfigs" not in variant or not variant["routingConfigs"]
    # The real-time model keeps its configuration.
    rt = r.named("kokoro-82m-config").inputs
    assert "asyncInferenceConfig" not in rt
    assert rt["productionVariants"][0]["routingConfigs"][0]["routingStrategy"] == "LEAST_OUTSTANDING_REQUESTS"
    env = r.named("narration-model").inputs["primaryContainer"]["environment"]
    assert env["ASYNC_INFERENCE"] == "true" and env["QUEUE_MAX_DEPTH"] == "50"
    assert "ASYNC_INFERENCE" not in r.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]


def test_backlog_scaling_from_zero_and_no_realtime_scaling(two_routes):
    r = two_routes
    target = r.named("narration-target").inputs
    assert target["resourceId"] == "endpoint/t-narration/variant/AllTraffic"
    assert (target["minCapacity"], target["maxCapacity"]) == (0, 3)  # ceil(50 / 17.87)

    backlog = r.named("narration-backlog").inputs
    tt = backlog["targetTrackingScalingPolicyConfiguration"]
    m = tt["customizedMetricSpecification"]
    assert backlog["policyType"] == "TargetTrackingScaling"
    assert (m["metricName"], m["namespace"], m["statistic"]) == ("ApproximateBacklogSizePerInstance", "AWS/SageMaker",
                                                                 "Average")
    assert m["dimensions"] == [{"name": "EndpointName", "value": "t-narration"}]
    assert tt["targetValue"] == math.floor(17.87 * (900 - 380.248))
    assert tt.get("disableScaleIn") in (None, False)  # target tracking takes it to zero
    assert (tt["scaleOutCooldown"], tt["scaleInCooldown"]) == (261, 1140)

    wake = r.named("narration-wake").inputs["stepScalingPolicyConfiguration"]
    assert wake["adjustmentType"] == "ChangeInCapacity" and wake["metricAggregationType"] == "Average"
    assert [(s["scalingAdjustment"], s["metricIntervalLowerBound"]) for s in wake["stepAdjustments"]] == [(1, "0")]
    alarm = r.named("narration-wake-alarm").inputs
    assert (alarm["metricName"], alarm["namespace"], alarm["statistic"]) == ("HasBacklogWithoutCapacity",
                                                                             "AWS/SageMaker", "Average")
    assert alarm["dimensions"] == {"EndpointName": "t-narration"}
    assert (alarm["threshold"], alarm["comparisonOperator"], alarm["period"], alarm["evaluationPeriods"]) == (
        1, "GreaterThanOrEqualToThreshold", 60, 2)
    assert len(alarm["alarmActions"]) == 1

    # Nothing real-time on the batch endpoint: no concurrency policies or alarms.
    names = {res.name for res in r.of_type(POLICY)}
    assert not {"narration-scale-out", "narration-scale-in", "narration-surge"} & names
    for a in r.of_type(ALARM):
        if (a.inputs.get("dimensions") or {}).get("EndpointName") == "t-narration":
            assert a.inputs["metricName"] not in ("ConcurrentRequestsPerModel", "InvocationsPerInstance"), a.name
    # ... and the real-time model's scaling is untouched.
    assert r.named("kokoro-82m-target").inputs["minCapacity"] == 1
    assert "kokoro-82m-scale-out" in names


def test_outputs_and_iam(two_routes):
    r = two_routes
    ep = r.outputs["endpoints"]["narration"]
    assert ep["runtime_call"] == "InvokeEndpointAsync" and ep["streaming"] is False
    assert ep["runtime_actions"] == ["sagemaker:InvokeEndpointAsync"]
    io = ep["async"]
    assert io["input_location"].endswith("/async/narration/input/")
    assert io["output_location"].endswith("/async/narration/output/")
    assert io["max_concurrent_invocations_per_instance"] == 50
    assert r.outputs["endpoints"]["kokoro-82m"]["async"] is None
    sc = r.outputs["scaling"]["narration"]
    assert sc["enabled"] and (sc["min"], sc["max"], sc["target"]) == (0, 3, float(math.floor(17.87 * 519.752)))

    invoke = json.loads(r.named("narration-invoke-policy").inputs["policy"])
    actions = {a for s in invoke["Statement"] for a in s["Action"]}
    assert actions == {"sagemaker:InvokeEndpointAsync", "s3:PutObject", "s3:GetObject"}
    by_sid = {s["Sid"]: s for s in invoke["Statement"]}
    assert by_sid["InvokeOneEndpointAsync"]["Resource"][0].endswith("t-narration")
    assert all(res.endswith("/async/narration/input/*") for res in by_sid["PutRequests"]["Resource"])

    execution = json.loads(r.named("narration-async-execution-async").inputs["policy"])
    by_sid = {s["Sid"]: s for s in execution["Statement"]}
    assert by_sid["WriteAsyncOutput"]["Action"] == ["s3:PutObject", "s3:AbortMultipartUpload"]
    assert sorted(x.rsplit("/", 2)[-2] for x in by_sid["WriteAsyncOutput"]["Resource"]) == ["failure", "output"]
    assert by_sid["NotifyAsync"]["Action"] == ["sns:Publish"] and len(by_sid["NotifyAsync"]["Resource"]) == 2
    assert not any("*" == s["Resource"] for s in execution["Statement"])


def test_stop_batch_plan_gets_no_scaling(kokoro_entry, write_stack):
    r = run_preview(write_stack({"narration": batch_entry(kokoro_entry, max_delay_s=300.0)}, stack="t"))
    assert not r.of_type(TARGET)
    gate = {g.model: g for g in r.gates}["narration"]
    assert not gate.enabled and "batch_delay" in gate.reason
    assert r.outputs["scaling"]["narration"]["reason_code"] == "plan_stop"
    # Still an asynchronous endpoint, at its floor.
    assert "asyncInferenceConfig" in r.named("narration-config").inputs


def test_batch_config_errors_name_the_key(kokoro_entry, write_stack):
    bad = batch_entry(kokoro_entry)
    bad["priority"] = "standard"
    with pytest.raises(ConfigError, match=r"models\.narration: hosting 'async' is for batch routes"):
        run_preview(write_stack({"narration": bad}, stack="t"))


def test_preview_report_shows_the_batch_route(two_routes):
    from speech.infra.preview import render

    text = render(two_routes)
    assert "narration: endpoint t-narration" in text
    assert "asynchronous (batch): Q_max 50 per instance, backlog target 9287 per instance" in text
    assert "fleet 0..3 (woken from 0 by HasBacklogWithoutCapacity)" in text
    assert "clients: InvokeEndpointAsync with role" in text and "/async/narration/input/" in text
    # The real-time model's line is unchanged.
    assert "Q_max 50, target 15.9904, scale-in 10.6602" in text


def test_delay_alarm_notifies_when_the_route_is_late(two_routes):
    r = two_routes
    a = r.named("narration-async-delay").inputs
    assert (a["metricName"], a["namespace"], a["statistic"]) == ("ApproximateAgeOfOldestRequest", "AWS/SageMaker",
                                                                 "Maximum")
    assert a["dimensions"] == {"EndpointName": "t-narration"}
    assert (a["threshold"], a["comparisonOperator"]) == (900, "GreaterThanThreshold")
    assert a["alarmActions"] == a["okActions"] == [r.outputs["observability"]["alarm_topic_arn"]]
    assert r.outputs["observability"]["alarms"]["narration"]["batch_delay"] == "t-narration-delay"
    assert "batch_delay" not in r.outputs["observability"]["alarms"]["kokoro-82m"]


def test_model_waits_for_its_async_permissions(two_routes):
    r = two_routes
    policy = r.named("narration-async-execution-async")
    assert policy.urn in r.named("narration-model").dependencies
    assert policy.urn not in r.named("kokoro-82m-model").dependencies


def test_unmeasured_batch_route_is_async_without_scaling(kokoro_entry, write_stack):
    e = batch_entry(kokoro_entry)
    del e["measurements"]
    r = run_preview(write_stack({"narration": e}, stack="t"))
    assert not r.of_type(TARGET) and not r.of_type(POLICY)
    a = r.named("narration-config").inputs["asyncInferenceConfig"]
    # No measured Q_max yet: SageMaker chooses the concurrency, and the container keeps its own queue depth.
    assert "maxConcurrentInvocationsPerInstance" not in (a.get("clientConfig") or {})
    env = r.named("narration-model").inputs["primaryContainer"]["environment"]
    assert env["ASYNC_INFERENCE"] == "true" and "QUEUE_MAX_DEPTH" not in env
    out = r.outputs
    assert out["scaling"]["narration"]["reason_code"] == "unmeasured" and out["scaling"]["narration"]["min"] is None
    assert out["endpoints"]["narration"]["async"]["max_concurrent_invocations_per_instance"] is None


def _metrics_read(alarm_inputs: dict) -> set[str]:
    """Every SageMaker/container metric name an alarm reads (single metric or metric math)."""
    names = {alarm_inputs.get("metricName")} - {None}
    for q in alarm_inputs.get("metricQueries") or []:
        if q.get("metric"):
            names.add(q["metric"]["metricName"])
    return names


def test_async_route_carries_no_realtime_alarm(two_routes):
    """An async job's first byte is its whole file (a TTFAB SLO alarm would sit in ALARM under any
    backlog and roll every update back), and SageMaker publishes no Invocations for an asynchronous
    endpoint (a rate over it never evaluates)."""
    from container import telemetry
    from speech.infra.components.observability import ASYNC_UNPUBLISHED

    r = two_routes
    alarms = {a.name: a.inputs for a in r.of_type(ALARM)}
    batch = {n: a for n, a in alarms.items() if n.startswith("narration-") and a.get("name", "").startswith("t-narration")}
    assert batch, sorted(alarms)
    for name, a in batch.items():
        assert not (_metrics_read(a) & set(ASYNC_UNPUBLISHED)), name
        assert telemetry.TTFAB_P95 not in _metrics_read(a) and "ttfab" not in a["name"], name
    rollback = r.named("narration-endpoint").inputs["deploymentConfig"]["autoRollbackConfiguration"]["alarms"]
    assert [x["alarmName"] for x in rollback] == ["t-narration-5xx"]
    # The real-time route keeps both of its.
    rt = r.named("kokoro-82m-endpoint").inputs["deploymentConfig"]["autoRollbackConfiguration"]["alarms"]
    assert [x["alarmName"] for x in rt] == ["t-kokoro-82m-5xx", "t-kokoro-82m-ttfab-slo"]
    assert {"t-kokoro-82m-5xx-rate", "t-kokoro-82m-ttfab-slo"} <= {a["name"] for a in alarms.values()}
