"""The operations contract: stack outputs (same keys gated or not, no prose), the client invoke
role, alarms that notify the stack's topic, container metric dimensions equal to the alarms', the
slowdown alarm against synthetic series, and a consumer reading the outputs via StackReference."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pulumi
import pytest

from container import telemetry
from container.app import State
from container.settings import Settings
from speech.deploy.alarm_eval import evaluate_alarm
from speech.deploy.gate import plan_model
from speech.deploy.iam import INVOKE_ACTIONS, wildcard_violations
from speech.deploy.outputs import ENDPOINT_KEYS, OBSERVABILITY_KEYS, OUTPUTS_VERSION, SCALING_KEYS
from speech.deploy.scaling import POLICY_SUFFIXES
from speech.infra.components.observability import container_dimensions, ops_alarms, slowdown_threshold_ms
from speech.infra.preview import run_preview
from speech.stack.read import parse_stack_config

ROOT = Path(__file__).resolve().parents[3]
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """A stack with a measured (gated) model and an unmeasured one, previewed once."""
    from tests.speech.conftest import MODELS, dev_config

    entry = dev_config()[MODELS]["kokoro-82m"]
    bare = {k: v for k, v in entry.items() if k != "measurements"}
    path = tmp_path_factory.mktemp("stack") / "Pulumi.ops.yaml"
    path.write_text(json.dumps({"config": {
        "aws:region": "eu-west-1", MODELS: {"kokoro-82m": entry, "unmeasured": bare},
        "speech-endpoints:alerts": {"email": ["oncall@example.com"], "https": ["https://pager.example.com/hook"]},
    }}))
    return run_preview(path)


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_outputs_have_the_same_keys_gated_or_not(two_models):
    out = two_models.outputs
    assert set(out) == {"outputs_version", "endpoints", "scaling", "observability"}
    assert out["outputs_version"] == OUTPUTS_VERSION
    gated, ungated = out["scaling"]["kokoro-82m"], out["scaling"]["unmeasured"]
    assert list(gated) == list(ungated) == list(SCALING_KEYS)
    assert gated["enabled"] is True and gated["reason_code"] == "measured_plan" and gated["target"] == 15.9904
    assert ungated["enabled"] is False and ungated["reason_code"] == "unmeasured"
    assert all(ungated[k] is None for k in SCALING_KEYS if k not in ("enabled", "reason_code", "cooldowns"))
    assert ungated["cooldowns"] == {"scale_out_s": None, "scale_in_s": None}
    assert list(gated["cooldowns"]) == list(ungated["cooldowns"])
    for model in ("kokoro-82m", "unmeasured"):
        ep = out["endpoints"][model]
        assert list(ep) == list(ENDPOINT_KEYS)
        assert ep["name"] == f"ops-{model}" and ep["arn"].endswith(f"endpoint/ops-{model}")
        assert ep["runtime_call"] == "InvokeEndpointWithResponseStream" and ep["streaming"] is True
        assert ep["region"] == "eu-west-1" and ep["variant"] == "AllTraffic"
    assert list(out["observability"]) == list(OBSERVABILITY_KEYS)
    # Only the measured model has the alarms with planned thresholds.
    assert {"slowdown", "saturation", "queue_saturated_rate"} <= set(out["observability"]["alarms"]["kokoro-82m"])
    assert not {"slowdown", "saturation"} & set(out["observability"]["alarms"]["unmeasured"])
    # No prose: identifiers, ARNs, URLs and keys only (the gate's sentence stays in logs/preview).
    prose = [s for s in _strings(out) if " " in s]
    assert not prose, prose


def test_invoke_role_grants_only_the_two_calls_on_its_endpoint(two_models):
    for model in ("kokoro-82m", "unmeasured"):
        ep = two_models.outputs["endpoints"][model]
        policy = json.loads(two_models.named(f"{model}-invoke-policy").inputs["policy"])
        assert policy["Statement"] == [{"Sid": "InvokeOneEndpoint", "Effect": "Allow", "Action": list(INVOKE_ACTIONS),
                                        "Resource": [ep["arn"]]}]
        assert wildcard_violations(policy) == []
        role = two_models.named(f"{model}-invoke").inputs
        trust = json.loads(role["assumeRolePolicy"])["Statement"][0]
        assert trust["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
        att = two_models.named(f"{model}-invoke-attachment").inputs
        assert att["policyArn"] == ep["invoke_policy_arn"] and ep["invoke_role_arn"].endswith(f"role/{model}-invoke")


def test_every_operational_alarm_notifies_the_stack_topic(two_models):
    topic_arn = two_models.outputs["observability"]["alarm_topic_arn"]
    assert len(two_models.of_type("aws:sns/topic:Topic")) == 1
    subs = {(s.inputs["protocol"], s.inputs["endpoint"]) for s in two_models.of_type("aws:sns/topicSubscription:TopicSubscription")}
    assert subs == {("email", "oncall@example.com"), ("https", "https://pager.example.com/hook")}
    alarms = two_models.of_type(ALARM)
    scaling = [a for a in alarms if a.inputs["name"].endswith(POLICY_SUFFIXES)]
    operational = [a for a in alarms if a not in scaling]
    named = {n for per in two_models.outputs["observability"]["alarms"].values() for n in per.values()}
    assert {a.inputs["name"] for a in operational} == named
    for a in operational:
        assert a.inputs["alarmActions"] == [topic_arn] and a.inputs["okActions"] == [topic_arn], a.name
    # Scaling alarms act through their policies only (documented in speech/infra/components/observability.py).
    assert scaling and all(topic_arn not in (a.inputs.get("alarmActions") or []) for a in scaling)
    # The blue/green rollback alarms still roll back.
    endpoint = two_models.named("kokoro-82m-endpoint").inputs
    rollback = {a["alarmName"] for a in endpoint["deploymentConfig"]["autoRollbackConfiguration"]["alarms"]}
    assert rollback == {"ops-kokoro-82m-5xx", "ops-kokoro-82m-ttfab-slo"}


def test_container_dimensions_equal_the_alarms_and_dashboard(two_models):
    """The container, configured from the environment the program puts on the Model, emits exactly
    the dimensions every container-metric alarm and dashboard line uses."""
    env = two_models.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]
    settings = Settings(**{k.lower(): env[k] for k in ("MODEL_NAME", telemetry.ENV_ENDPOINT, telemetry.ENV_VARIANT)})
    emitted = State(settings).metrics.dimensions
    assert emitted == container_dimensions("ops-kokoro-82m", "kokoro-82m")
    assert list(emitted) == list(telemetry.DIMENSIONS)
    for a in [a for a in two_models.of_type(ALARM) if a.inputs["name"].startswith("ops-kokoro-82m-")]:
        i = a.inputs
        queries = [q["metric"] for q in i.get("metricQueries") or [] if q.get("metric")]
        for m in [i] * ("namespace" in i) + queries:
            if m["namespace"] == telemetry.NAMESPACE:
                assert m["dimensions"] == emitted, a.name
    body = json.loads(two_models.named("kokoro-82m-obs-dashboard").inputs["dashboardBody"])
    lines = [m for w in body["widgets"] for m in w["properties"]["metrics"] if m[0] == telemetry.NAMESPACE]
    assert lines
    for line in lines:
        assert dict(zip(line[2:-1:2], line[3:-1:2], strict=True)) == emitted


# --- the slowdown alarm against synthetic series ---------------------------------------------------


@pytest.fixture(scope="module")
def plan(request):
    from tests.speech.conftest import MODELS, dev_config

    dep = plan_model("kokoro-82m", parse_stack_config({"models": {"kokoro-82m": dev_config()[MODELS]["kokoro-82m"]}})
                     .models["kokoro-82m"], endpoint="dev-kokoro-82m")
    assert dep.plan is not None
    return dep.plan


def _series(plan, slower: float, minutes: int = 30, seed: int = 7) -> list[tuple[float, float]]:
    """ServiceTimep95 datapoints of a fleet at the planned load: every instance flushes every 10 s.
    Each flush's p95 is drawn around the measured uncontended p50..p95 (60..65.4 ms at c=1 on the
    reference ladder), with the spread of a busy instance (x 0.9..1.25), times ``slower``."""
    rng = random.Random(seed)
    instances = 8
    p95 = plan.alarms.ttfab_p95_alarm_ms
    points = []
    for t in range(0, minutes * 60, 10):
        for _ in range(instances):
            if rng.random() < 0.3:
                continue  # no uncontended request in this flush at load: no datapoint
            points.append((float(t), slower * p95 * rng.uniform(0.9, 1.25)))
    return points


def _slowdown(plan):
    return next(a for a in ops_alarms(endpoint_name="dev-kokoro-82m", model="kokoro-82m", plan=plan, slo_ms=3000.0)
                if a.key == "slowdown")


def test_slowdown_alarm_is_quiet_at_planned_load_and_fires_when_twice_slower(plan):
    alarm = _slowdown(plan)
    assert alarm.threshold == slowdown_threshold_ms(plan) == pytest.approx(1.5 * 65.4)
    quiet = evaluate_alarm(alarm, _series(plan, 1.0), 0, 1800)
    assert quiet and set(quiet) == {"OK"}
    slow = evaluate_alarm(alarm, _series(plan, 2.0), 0, 1800)
    assert set(slow) == {"ALARM"}
    # Slower only from minute 10: fires once 4 of 5 minutes breach, not before.
    mixed = [(t, v * (2.0 if t >= 600 else 1.0)) for t, v in _series(plan, 1.0)]
    states = evaluate_alarm(alarm, mixed, 0, 1800)
    first = states.index("ALARM") + alarm.evaluation_periods  # minutes elapsed when it fires
    assert 10 + alarm.datapoints_to_alarm <= first <= 10 + alarm.evaluation_periods


def test_the_old_first_chunk_definition_would_fire_at_planned_load(plan):
    """Queue-inclusive TTFAB at C_scale_max is far above the uncontended p95 (the ladder): an alarm
    on it at that threshold fires at any normal load; the slowdown alarm does not watch it."""
    ladder = {r.concurrency: r.ttfab_p95_ms for r in plan_ladder(plan)}
    at_target = max(c for c in ladder if c <= plan.thresholds.c_scale_max)
    assert ladder[at_target] > 2 * slowdown_threshold_ms(plan)
    assert _slowdown(plan).metric_name == telemetry.SERVICE_P95


def plan_ladder(plan):
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact

    q = load_artifact(ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json", QmaxArtifact)
    assert q.q_max == plan.q_max
    return q.ladder


# --- a consumer reads the outputs through a StackReference -----------------------------------------


def test_consumer_builds_a_client_policy_from_the_stack_reference(two_models):
    sys.path.insert(0, str(ROOT / "examples/consumer"))
    try:
        import consumer
    finally:
        sys.path.pop(0)
    produced = two_models.outputs
    registered: dict = {}

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered[(args.typ, args.name)] = dict(args.inputs)
            if args.typ == "pulumi:pulumi:StackReference":
                return args.name, {"name": args.name, "outputs": produced, "secretOutputNames": []}
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="consumer", stack="prod", preview=False)
    seen: dict = {}

    @pulumi.runtime.test
    def program():
        out = consumer.define("acme/speech-endpoints/ops", "kokoro-82m", "checkout-service")
        return pulumi.Output.all(**out).apply(seen.update)

    program()
    assert ("pulumi:pulumi:StackReference", "acme/speech-endpoints/ops") in registered
    assert seen["endpoint_name"] == "ops-kokoro-82m" and seen["runtime_call"] == "InvokeEndpointWithResponseStream"
    policy = json.loads(seen["policy"])
    assert policy["Statement"][0]["Resource"] == [produced["endpoints"]["kokoro-82m"]["arn"]]
    assert set(policy["Statement"][0]["Action"]) == set(INVOKE_ACTIONS)
    assert wildcard_violations(policy) == []

    # A producer on another contract version stops the consumer with a clear error.
    produced = {**produced, "outputs_version": OUTPUTS_VERSION + 1}
    pulumi.runtime.set_mocks(Mocks(), project="consumer", stack="prod", preview=False)

    @pulumi.runtime.test
    def newer():
        return consumer.define("acme/speech-endpoints/ops", "kokoro-82m", "checkout-service")["policy"]

    with pytest.raises(pulumi.RunError, match="outputs_version is 2"):
        newer()


def test_scaling_output_exports_the_step_the_floors_and_the_promise(qmax_ref, ttotal_ref):
    from speech.deploy.gate import GateDecision
    from speech.deploy.outputs import scaling_output
    from speech.plan.realtime import build_plan
    from speech.schema.config import FloorSchedule, PlanInputs, Promise

    promise = Promise(slo_share=0.999, rejected_share=0.0005, instance_hours=4900.0, cost_vs_floor=1.64,
                      trace_sha256="c" * 64, seed=3, simulator_version="sim-2")
    schedule = FloorSchedule(floors=[{"at": "07:40", "min_instances": 40}, {"at": "10:00", "min_instances": 1}])
    plan = build_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=5000, trough_rps=10, promise=promise, schedule=schedule))
    on = scaling_output(GateDecision(True, "measured", "measured_plan"), plan, "key")
    assert list(on) == list(SCALING_KEYS)
    assert on["scale_in_step"] == {"percent": -16, "min_removed": 1}
    assert on["schedule"]["floors"][0] == {"at": "07:40", "min_instances": 40} and on["schedule"]["timezone"] == "UTC"
    assert on["promise"]["seed"] == 3 and on["promise"]["cost_vs_floor"] == 1.64
    off = scaling_output(GateDecision(False, "stop", "plan_stop"), plan, "key")
    # A closed gate deploys neither step nor floors; the promise still says what the plan promised.
    assert off["scale_in_step"] is None and off["schedule"] is None and off["promise"]["seed"] == 3
