"""The dev stack through the real pack process (analyzer protocol over gRPC), and the same stack
with one user edit each; the in-process pack the rule tests use reports exactly what it reports."""

from __future__ import annotations

import copy
import json

import pytest

from policy.harness import UNKNOWN, Report, Resource
from speech.deploy import provenance as pv
from speech.plan.realtime import build_plan
from speech.schema.config import PlanInputs
from tests.policy.policy_edits import messages, named, set_path


@pytest.fixture
def pack(real_pack):
    """These tests go through the real pack process."""
    return real_pack


def _diagnostics(report: Report) -> list[tuple[str, str, str, str | None]]:
    return sorted((d.policy, d.level, d.message, d.resource) for d in report.diagnostics)


def _edits(dev: list[Resource]) -> list[list[Resource]]:
    """The dev stack, and edits that trip stack rules, resource rules, config and an unknown."""
    edited = []
    for name, path, value in [("kokoro-82m-scale-out", "targetTrackingScalingPolicyConfiguration.targetValue", 45.0),
                              ("kokoro-82m-target", "maxCapacity", 400.0),
                              ("kokoro-82m-config", "productionVariants.0.instanceType", "ml.g5.2xlarge"),
                              ("kokoro-82m-weights-public-access", "blockPublicPolicy", False)]:
        stack = copy.deepcopy(dev)
        set_path(named(stack, name), path, value)
        edited.append(stack)
    unknown = copy.deepcopy(dev)
    named(unknown, "kokoro-82m-execution-policy").props["policy"] = UNKNOWN  # "can't run during preview"
    return [dev, *edited, unknown]


def test_in_process_pack_reports_what_the_pack_process_reports(real_pack, dev):
    from policy.inprocess import InProcessPack

    in_process = InProcessPack(stack="dev")
    assert in_process.policies == real_pack.policies
    for stack in _edits(dev):
        for config in (None, {"scaling-matches-plan": "advisory", "s3-no-public-access": "disabled"}):
            assert _diagnostics(in_process.check(stack, config)) == _diagnostics(real_pack.check(stack, config))


def test_dev_stack_passes_with_no_mandatory_violation(pack, dev):
    report = pack.check(dev)
    assert report.mandatory == [], [d.message for d in report.mandatory]
    # Reference figures deploy (allow-reference-artifacts defaults to true) but are announced.
    notice = messages(report, "scaling-from-unmeasured-figures", "advisory")
    assert len(notice) == 1 and "'reference' figures" in notice[0]


def test_target_value_changed_by_hand_is_blocked(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.targetValue", 45.0)
    report = pack.check(dev)
    [msg] = messages(report, "scaling-matches-plan", "mandatory")
    assert "scaling policy 'kokoro-82m-scale-out'" in msg
    assert "targetValue is 45, expected 15.9904" in msg
    assert "fix:" in msg


def test_scaling_target_without_provenance_is_blocked(pack, dev):
    # A hand-written target (and scale-out) on an endpoint outside the program's provenance.
    dev.append(Resource(type="aws:appautoscaling/target:Target", name="manual-target", props={
        "serviceNamespace": "sagemaker", "scalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "resourceId": "endpoint/legacy-tts/variant/AllTraffic", "minCapacity": 1, "maxCapacity": 4}))
    report = pack.check(dev)
    prov = [d for d in report.of("scaling-requires-measured-provenance") if d.resource == "manual-target"]
    assert prov and prov[0].level == "mandatory"
    assert "'legacy-tts'" in prov[0].message and "not in this stack" in prov[0].message
    tags = [d for d in report.of("scalable-target-provenance-tags") if d.resource == "manual-target"]
    assert tags and "no provenance tags" in tags[0].message


def test_queue_depth_not_q_max_is_blocked(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.QUEUE_MAX_DEPTH", "80")
    report = pack.check(dev)
    [msg] = messages(report, "scaling-matches-plan", "mandatory")
    assert "SageMaker model 'kokoro-82m-model'" in msg and "QUEUE_MAX_DEPTH is '80', expected '50'" in msg


def test_image_digest_different_from_artifacts_is_blocked(pack, dev):
    model = named(dev, "kokoro-82m-model")
    repo = model.props["primaryContainer"]["image"].split("@")[0]
    set_path(model, "primaryContainer.image", f"{repo}@sha256:{'ab' * 32}")
    report = pack.check(dev)
    [msg] = messages(report, "deployment-matches-fingerprint", "mandatory")
    assert "'kokoro-82m-model' deploys image digest sha256:abababababab" in msg
    assert "measured on sha256:8b1b96bc4dc" in msg and "fix:" in msg


def test_stop_plan_forced_through_is_blocked(pack, dev):
    # The user lowers the SLO below the measured service time (slo_feasible: stop) and patches the
    # program's gate so scaling is still created: document and tags are consistent, the plan is not.
    obj = named(dev, "kokoro-82m-provenance")
    doc = pv.parse_document(obj.props["content"], "test")
    doc = doc.model_copy(update={"inputs": PlanInputs(**{**doc.inputs.model_dump(), "slo_ms": 50.0})})
    text = pv.document_text(doc)
    plan = build_plan(doc.measurements.qmax, doc.measurements.ttotal, doc.inputs)
    assert plan.verdict == "stop"
    obj.props["content"] = text
    tags = pv.provenance_tags("kokoro-82m", plan, text, doc.measurements)
    for name in ("kokoro-82m-endpoint", "kokoro-82m-target", "kokoro-82m-model"):
        named(dev, name).props["tags"] = {**named(dev, name).props.get("tags", {}), **tags}
    report = pack.check(dev)
    [msg] = messages(report, "scaling-plan-feasible", "mandatory")
    assert "verdict 'stop'" in msg and "slo_feasible" in msg and "kokoro-82m-target" in msg
    [pre] = messages(report, "scalable-target-provenance-tags", "mandatory")
    assert "speech:plan-verdict='stop'" in pre


def test_public_bucket_is_blocked(pack, dev):
    set_path(named(dev, "kokoro-82m-weights-public-access"), "blockPublicPolicy", False)
    set_path(named(dev, "kokoro-82m-weights-public-access"), "restrictPublicBuckets", False)
    report = pack.check(dev)
    [msg] = messages(report, "s3-no-public-access", "mandatory")
    assert "public access block 'kokoro-82m-weights-public-access'" in msg
    assert "blockPublicPolicy=False" in msg and "restrictPublicBuckets=False" in msg and "fix:" in msg


def test_edited_provenance_document_fails_closed(pack, dev):
    obj = named(dev, "kokoro-82m-provenance")
    data = json.loads(obj.props["content"])
    data["measurements"]["qmax"]["q_max"] = 60
    obj.props["content"] = json.dumps(data, sort_keys=True, separators=(",", ":"))
    report = pack.check(dev)
    msgs = messages(report, "scaling-requires-measured-provenance", "mandatory")
    assert len(msgs) == 1 and "hashes to sha256:" in msgs[0] and "edited by hand" in msgs[0]
    # The dependent rules do not pass either.
    assert messages(report, "scaling-matches-plan", "mandatory")
    assert messages(report, "deployment-matches-fingerprint", "mandatory")


def test_missing_and_malformed_provenance_documents_fail_closed(pack, dev):
    broken = copy.deepcopy(dev)
    named(broken, "kokoro-82m-provenance").props["content"] = "{not json"
    tags = named(broken, "kokoro-82m-endpoint").props["tags"]
    tags[pv.TAG_DOC_SHA] = pv.document_sha256("{not json")
    named(broken, "kokoro-82m-target").props["tags"][pv.TAG_DOC_SHA] = tags[pv.TAG_DOC_SHA]
    [msg] = messages(pack.check(broken), "scaling-requires-measured-provenance", "mandatory")
    assert "provenance document S3 object 'kokoro-82m-provenance'" in msg and "Invalid JSON" in msg

    gone = [r for r in dev if r.name != "kokoro-82m-provenance"]
    [msg] = messages(pack.check(gone), "scaling-requires-measured-provenance", "mandatory")
    assert "'provenance/kokoro-82m/g5xlarge-8b1b96bc.json'" in msg and "no S3 object" in msg
