"""The gate, the stack-config reader and the IAM documents: pure functions, called directly."""

from __future__ import annotations

import copy
import json

import pytest

from speech.deploy.gate import gate, plan_model
from speech.deploy.iam import cache_build_policy, cache_trigger_policy, endpoint_log_group_arn, execution_role_policy, wildcard_violations
from speech.errors import ConfigError
from speech.schema.config import ModelConfig
from speech.stack.read import parse_stack_config
from tests.policy.policy_edits import with_evidence

BUCKET = "arn:aws:s3:::weights-bucket"
REPO = "arn:aws:ecr:eu-west-1:123456789012:repository/kokoro-images"
EP = "dev-kokoro-82m"
LOGS = endpoint_log_group_arn("eu-west-1", "123456789012", "dev-kokoro-82m")


def _model(entry: dict) -> ModelConfig:
    return parse_stack_config({"models": {"kokoro-82m": entry}}).models["kokoro-82m"]


# --- gate: the four cases --------------------------------------------------------------------------


def test_gate_measured_and_feasible_enables_scaling(kokoro_entry):
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert dep.gate.enabled, dep.gate.reason
    assert dep.plan is not None and dep.plan.provenance.origin == "reference"
    # Reference numbers pass the gate but the plan says they are not the user's measurements.
    assert dep.plan.finding("provenance").level == "warn"


def test_gate_without_measurements_is_off(kokoro_entry):
    del kokoro_entry["measurements"]
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert not dep.gate.enabled and dep.plan is None
    assert "no measurements" in dep.gate.reason


def test_gate_stop_plan_is_off(kokoro_entry):
    kokoro_entry["plan"]["slo_ms"] = 50.0  # below the uncontended p95 of 66.1 ms
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert dep.plan is not None and dep.plan.verdict == "stop"
    assert not dep.gate.enabled
    assert "slo_feasible" in dep.gate.reason


@pytest.mark.parametrize("peak, floor", [(10.0, 1), (10.0, 3)])
def test_gate_min_equal_max_is_off(kokoro_entry, peak, floor):
    kokoro_entry["plan"].update(peak_rps=peak, trough_rps=peak, min_instances=floor)
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert dep.plan is not None and dep.plan.fleet.min_instances == dep.plan.fleet.max_instances == floor
    assert dep.plan.verdict != "stop"
    assert not dep.gate.enabled and "nothing to scale" in dep.gate.reason


def test_gate_off_when_deployed_image_was_not_measured(kokoro_entry):
    kokoro_entry["image"] = "123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro-82m@sha256:" + "a" * 64
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert not dep.gate.enabled and "re-measure" in dep.gate.reason
    assert gate(dep.config, dep.plan, name="kokoro-82m", endpoint=EP, allow_config_mismatch=True).enabled


def test_cap_below_need_is_a_stop_not_a_silent_cap(kokoro_entry):
    kokoro_entry["max_instances"] = 1
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert not dep.gate.enabled and "fleet_capacity" in dep.gate.reason


# --- config errors name the key --------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda e: e["plan"].update(surge_ratio=1.7), "speech-endpoints:models.kokoro-82m.plan.surge_ratio: "),
        (lambda e: e["plan"].update(peak_rps="lots"), "speech-endpoints:models.kokoro-82m.plan.peak_rps: "),
        (lambda e: e["plan"].update(bogus=1), "speech-endpoints:models.kokoro-82m.plan.bogus: Extra inputs"),
        (lambda e: e.pop("instance_type"), "speech-endpoints:models.kokoro-82m.instance_type: Field required"),
        (lambda e: e["measurements"]["qmax"].update(q_max=45), "speech-endpoints:models.kokoro-82m.measurements.qmax: "),
        (
            lambda e: e["measurements"]["qmax"]["ladder"][0].update(ttfab_p95_ms=-1),
            "speech-endpoints:models.kokoro-82m.measurements.qmax.ladder.0.ttfab_p95_ms: ",
        ),
    ],
)
def test_config_mistakes_name_the_key(kokoro_entry, mutate, key):
    mutate(kokoro_entry)
    with pytest.raises(ConfigError) as err:
        parse_stack_config({"models": {"kokoro-82m": kokoro_entry}})
    assert str(err.value).startswith(key), str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_and_missing_top_level_keys(kokoro_entry):
    # A key of the project namespace this project does not read is the team's own (or a typo):
    # warned about, never fatal. Without models there is nothing to deploy: that one is an error.
    warned: list[str] = []
    cfg = parse_stack_config({"models": {"kokoro-82m": kokoro_entry}, "owner": "voice-team"}, warn=warned.append)
    assert list(cfg.models) == ["kokoro-82m"]
    assert [w for w in warned if w.startswith("speech-endpoints:owner: not a key this project reads, ignored")]
    warned.clear()
    with pytest.raises(ConfigError, match=r"^speech-endpoints:models: missing"):
        parse_stack_config({"modles": {"kokoro-82m": kokoro_entry}}, warn=warned.append)
    assert warned == ["speech-endpoints:modles: not a key this project reads, ignored (if you meant "
                      "speech-endpoints:models, rename it)"]
    with pytest.raises(ConfigError, match=r"^speech-endpoints:models: missing"):
        parse_stack_config({})


def test_artifact_of_another_model_under_this_key_is_a_config_error(kokoro_entry):
    with pytest.raises(ConfigError, match=r"^speech-endpoints:models.other-model.measurements.qmax.model: "):
        plan_model("other-model", _model(copy.deepcopy(kokoro_entry)), endpoint="dev-other-model")


# --- IAM ------------------------------------------------------------------------------------------


def _resources(doc: dict) -> list[str]:
    out = []
    for st in doc["Statement"]:
        r = st["Resource"]
        out.extend([r] if isinstance(r, str) else r)
    return out


def test_execution_role_is_least_privilege():
    doc = execution_role_policy(bucket_arn=BUCKET, weights_prefix="weights/kokoro-82m", repository_arn=REPO, log_group_arn=LOGS)
    assert wildcard_violations(doc) == []
    text = json.dumps(doc)
    assert '"Action": "*"' not in text and ':*"' not in text.replace('log-group:/aws/sagemaker/Endpoints/dev-kokoro-82m:*"', "")
    assert set(_resources(doc)) == {"*", f"{BUCKET}/weights/kokoro-82m/*", BUCKET, REPO, LOGS, f"{LOGS}:*"}
    star = [st for st in doc["Statement"] if st["Resource"] == "*"]
    assert {a for st in star for a in st["Action"]} == {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"}
    reads = next(st for st in doc["Statement"] if st["Sid"] == "ReadOwnWeights")
    assert reads["Resource"] == [f"{BUCKET}/weights/kokoro-82m/*"]


def test_cache_roles_are_scoped():
    build = cache_build_policy(bucket_arn=BUCKET, weights_prefix="weights/kokoro-82m", log_group_arn=LOGS)
    trigger = cache_trigger_policy(project_arn="arn:aws:codebuild:eu-west-1:1:project/p", log_group_arn=LOGS)
    for doc in (build, trigger):
        assert wildcard_violations(doc) == []
        assert "*" not in _resources(doc)


def test_wildcard_checker_catches_what_it_should():
    bad = {"Statement": [{"Sid": "a", "Effect": "Allow", "Action": "*", "Resource": "*"},
                         {"Sid": "b", "Effect": "Allow", "Action": ["s3:*"], "Resource": [BUCKET]},
                         {"Sid": "c", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}]}
    assert len(wildcard_violations(bad)) == 3
    worse = {"Statement": [{"Sid": "d", "Effect": "Allow", "Action": ["s3:Get*"], "Resource": [BUCKET]},
                           {"Sid": "e", "Effect": "Allow", "NotAction": "iam:*", "Resource": [BUCKET]},
                           {"Sid": "f", "Effect": "Deny", "Action": "*", "Resource": "*"},
                           {"Sid": "g", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"}]}
    found = wildcard_violations(worse)
    assert len(found) == 2 and "(d) allows wildcard actions ['s3:Get*']" in found[0] and "(e) allows NotAction" in found[1], found





# --- target binding: measured on this stack's endpoint, or a named one with a reason ----------------


def test_measured_on_this_stacks_endpoint_enables_scaling(kokoro_entry):
    dep = plan_model("kokoro-82m", _model(with_evidence(kokoro_entry, EP)), endpoint=EP)
    assert dep.gate.enabled, dep.gate.reason
    assert dep.gate.reason.startswith("measured plan (origin measured")
    assert dep.plan.finding("provenance").level == "ok"


def test_reference_figures_are_labelled_in_the_gate_reason(kokoro_entry):
    dep = plan_model("kokoro-82m", _model(kokoro_entry), endpoint=EP)
    assert dep.gate.reason.startswith("plan from reference figures, not measurements of this endpoint")


def test_measured_on_another_endpoint_is_blocked(kokoro_entry):
    dep = plan_model("kokoro-82m", _model(with_evidence(kokoro_entry, "prod-kokoro-82m")), endpoint=EP)
    assert not dep.gate.enabled and dep.gate.code == "target_binding"
    assert "measured on 'sagemaker:prod-kokoro-82m', not on this stack's endpoint 'dev-kokoro-82m'" in dep.gate.reason
    assert f"bench qmax --endpoint {EP}" in dep.gate.reason and "measured_on: {endpoint: prod-kokoro-82m" in dep.gate.reason


def test_a_named_staging_endpoint_with_a_reason_is_allowed(kokoro_entry):
    entry = with_evidence(kokoro_entry, "staging-kokoro-82m")
    entry["measured_on"] = {"endpoint": "staging-kokoro-82m", "why": "staging runs the release image on g5.xlarge"}
    dep = plan_model("kokoro-82m", _model(entry), endpoint=EP)
    assert dep.gate.enabled, dep.gate.reason
    assert dep.document is not None and dep.document.measured_on.endpoint == "staging-kokoro-82m"
    # Naming staging does not let a third endpoint's figures in.
    other = with_evidence(copy.deepcopy(entry), "prod-kokoro-82m")
    dep = plan_model("kokoro-82m", _model(other), endpoint=EP)
    assert not dep.gate.enabled and "or the measured_on endpoint 'staging-kokoro-82m'" in dep.gate.reason


def test_measured_on_needs_a_reason(kokoro_entry):
    kokoro_entry["measured_on"] = {"endpoint": "staging-kokoro-82m", "why": "  "}
    with pytest.raises(ConfigError, match="measured_on.why"):
        _model(kokoro_entry)
