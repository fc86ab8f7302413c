"""batch-scaling-matches-plan through the real pack: a stack with a real-time and a batch route
passes every rule; real-time scaling on the batch endpoint, or backlog scaling off its plan, is blocked."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from policy.check import preview_resources
from tests.policy.policy_edits import messages, named, set_path
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[3]
RULE = "batch-scaling-matches-plan"
REALTIME_RULES = ("scaling-matches-plan", "one-scaling-path-per-variant", "scaling-plan-feasible",
                  "scaling-requires-measured-provenance", "deployment-matches-fingerprint")


@pytest.fixture(scope="module")
def _two_routes(tmp_path_factory):
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    models = config["speech-endpoints:models"]
    batch = copy.deepcopy(models["kokoro-82m"])
    batch.update(priority="batch", hosting="async")
    # 30 rps: 2 batch instances, so the two routes stay under the default $10,000/day ceiling (dev: 293).
    batch["plan"].update(peak_rps=30.0, trough_rps=1.0, max_delay_s=900.0)
    for kind in ("qmax", "ttotal"):
        batch["measurements"][kind]["model"] = "narration"
    models["narration"] = batch
    path = tmp_path_factory.mktemp("batch") / "Pulumi.dev.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "dev")
    return resources


@pytest.fixture
def routes(_two_routes):
    return copy.deepcopy(_two_routes)


def test_two_routes_pass_every_rule(pack, routes):
    report = pack.check(routes)
    assert {d.policy for d in report.diagnostics} == {"scaling-from-unmeasured-figures"}, [
        (d.policy, d.message) for d in report.mandatory]


def test_realtime_scaling_on_the_batch_endpoint_is_blocked(pack, routes):
    # Someone copies the real-time scale-out policy onto the batch endpoint.
    rt = copy.deepcopy(named(routes, "kokoro-82m-scale-out"))
    rt.name, rt.urn = "narration-scale-out", rt.urn.replace("kokoro-82m-scale-out", "narration-scale-out")
    rt.props["resourceId"] = "endpoint/dev-narration/variant/AllTraffic"
    rt.props["name"] = "dev-narration-scale-out"
    rt.dependencies = [named(routes, "narration-target").urn]
    routes.append(rt)
    report = pack.check(routes)
    msgs = messages(report, RULE, "mandatory")
    assert any("'narration-scale-out' tracks 'SageMakerVariantConcurrentRequestsPerModelHighResolution' on the batch "
               "endpoint 'dev-narration'" in m and "fix:" in m for m in msgs), msgs
    # The real-time rules stay quiet about the asynchronous endpoint: one rule, one message.
    for rule in REALTIME_RULES:
        assert messages(report, rule, "mandatory") == [], rule


def test_concurrency_alarm_on_the_batch_endpoint_is_blocked(pack, routes):
    alarm = copy.deepcopy(named(routes, "kokoro-82m-scale-in-alarm"))
    alarm.name, alarm.urn = "narration-scale-in-alarm", alarm.urn.replace("kokoro-82m-", "narration-")
    alarm.props["dimensions"] = {"EndpointName": "dev-narration", "VariantName": "AllTraffic"}
    routes.append(alarm)
    [msg] = messages(pack.check(routes), RULE, "mandatory")
    assert "'narration-scale-in-alarm' watches 'ConcurrentRequestsPerModel' of the batch endpoint" in msg


@pytest.mark.parametrize("name,path,value,expect", [
    ("narration-target", "minCapacity", 1.0, "minCapacity is 1, expected 0"),
    ("narration-target", "maxCapacity", 10.0, "maxCapacity is 10, expected 2"),
    ("narration-backlog", "targetTrackingScalingPolicyConfiguration.targetValue", 20000.0,
     "targetValue is 20000, expected 9287"),
    ("narration-backlog", "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.statistic", "Maximum",
     "statistic is 'Maximum', expected 'Average'"),
    ("narration-wake-alarm", "evaluationPeriods", 5.0, "evaluationPeriods is 5, expected 2"),
    ("narration-config", "asyncInferenceConfig.clientConfig.maxConcurrentInvocationsPerInstance", 200.0,
     "maxConcurrentInvocationsPerInstance is 200, expected 50"),
])
def test_backlog_scaling_must_match_the_batch_plan(pack, routes, name, path, value, expect):
    set_path(named(routes, name), path, value)
    [msg] = messages(pack.check(routes), RULE, "mandatory")
    assert f"'{name}'" in msg and expect in msg and "fix:" in msg


def test_missing_wake_is_blocked(pack, routes):
    routes.remove(named(routes, "narration-wake-alarm"))
    [msg] = messages(pack.check(routes), RULE, "mandatory")
    assert "0 HasBacklogWithoutCapacity alarms" in msg and "stays at zero" in msg


def test_batch_model_on_a_realtime_endpoint_is_blocked_once(pack, routes):
    # The endpoint configuration lost its asyncInferenceConfig: a batch plan on a real-time endpoint.
    del named(routes, "narration-config").props["asyncInferenceConfig"]
    report = pack.check(routes)
    [msg] = messages(report, RULE, "mandatory")
    assert "'narration-endpoint' is a batch model" in msg and "no asyncInferenceConfig" in msg
    assert "hosting: async" in msg
    # One finding, from the batch rule: the real-time rules do not judge a batch plan's scaling.
    for rule in REALTIME_RULES:
        assert messages(report, rule, "mandatory") == [], (rule, messages(report, rule))
