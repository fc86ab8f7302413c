"""Receipts in the program: which artifacts need one, what a read means, the gate's decision, and
where the program reads them (Pulumi's mocks answer the S3 data sources with the receipt bodies)."""

from __future__ import annotations

import copy
import json

import pytest

from speech.deploy.gate import GateDecision, with_receipts
from speech.deploy.receipts import read_receipt, receipt_claims, receipt_problem
from speech.errors import ConfigError
from speech.infra.preview import load_receipts, run_preview
from speech.schema.artifacts import Fingerprint, canonical_sha256
from speech.schema.config import MeasuredOn, Measurements, PlanInputs
from speech.schema.receipts import NO_RECEIPT, NOT_A_RECEIPT, RECEIPT_TAGS, Receipt
from tests.policy.policy_edits import receipts_of, with_evidence, with_receipt_keys

EP = "t-kokoro-82m"
"""The endpoint of model kokoro-82m in stack ``t`` (the conftest's write_stack default)."""
INPUTS = PlanInputs(peak_rps=50, trough_rps=10)


def _measured(entry: dict, endpoint: str = EP) -> dict:
    return with_receipt_keys(with_evidence(entry, endpoint))


def _measurements(entry: dict) -> Measurements:
    return Measurements.model_validate(entry["measurements"])


# --- pure: claims, reads, problems ------------------------------------------------------------------


def test_only_measured_sagemaker_artifacts_need_a_receipt(kokoro_entry):
    assert receipt_claims(_measurements(kokoro_entry)) == []  # reference figures
    claims = receipt_claims(_measurements(_measured(kokoro_entry)))
    assert [c.kind for c in claims] == ["qmax", "ttotal"] and all(c.bucket is None for c in claims)
    assert all(c.key == c.expected_key and c.key.endswith(c.artifact_sha256[7:] + ".json") for c in claims)


def test_measured_on_names_the_bucket_of_that_endpoints_receipts(kokoro_entry):
    m = _measurements(_measured(kokoro_entry, "staging-kokoro-82m"))
    staging = MeasuredOn(endpoint="staging-kokoro-82m", why="same image", receipt_bucket="staging-provenance")
    assert {c.bucket for c in receipt_claims(m, staging)} == {"staging-provenance"}
    # Without a bucket the stack's own is read; a measured_on endpoint the artifacts do not name changes nothing.
    assert {c.bucket for c in receipt_claims(m, staging.model_copy(update={"receipt_bucket": None}))} == {None}
    other = MeasuredOn(endpoint="other-kokoro-82m", why="x", receipt_bucket="other-provenance")
    assert {c.bucket for c in receipt_claims(m, other)} == {None}


def test_a_read_is_the_receipts_sha256_only_when_it_is_this_artifacts_receipt(kokoro_entry):
    entry = _measured(kokoro_entry)
    [qmax, _] = receipt_claims(_measurements(entry))
    body = receipts_of(entry)[qmax.key]
    assert read_receipt(body, qmax) == (qmax.artifact_sha256, None)
    assert read_receipt(None, qmax) == (NO_RECEIPT, None)
    value, why = read_receipt("{not json", qmax)
    assert value == NOT_A_RECEIPT and "not a receipt" in why
    other = Receipt.model_validate_json(body).model_copy(update={"endpoint": "prod-kokoro-82m", "artifact_kind": "ttotal"})
    value, why = read_receipt(other.model_dump_json(), qmax)
    assert value == NOT_A_RECEIPT
    assert why == f"it names artifact_kind 'ttotal' (artifact: 'qmax'), endpoint 'prod-kokoro-82m' (artifact: {EP!r})"


def test_receipt_problems_name_the_model_kind_key_sha_and_fix(kokoro_entry):
    entry = _measured(kokoro_entry)
    [qmax, ttotal] = receipt_claims(_measurements(entry))
    kw = dict(bucket="prov-bucket", stack="t", inputs=INPUTS)
    assert receipt_problem("kokoro-82m", qmax, qmax.artifact_sha256, **kw) is None
    missing = receipt_problem("kokoro-82m", qmax, NO_RECEIPT, **kw)
    assert missing.code == "receipt_missing"
    assert missing.message.startswith(f"models.kokoro-82m.measurements.qmax: no receipt at s3://prov-bucket/{qmax.key} "
                                      f"(expected one with artifact_sha256 {qmax.artifact_sha256})")
    assert (f"`python -m bench qmax --endpoint {EP} --region us-east-1 --slo-ms 3000 --receipt-bucket prov-bucket`, "
            "then `python -m bench plan --qmax <qmax-*.json> --ttotal <ttotal-*.json> --peak-rps 50 --trough-rps 10 "
            "--slo-ms 3000 --surge-ratio 1.25 --min-instances 1 --stack t`") in missing.message
    copied = receipt_problem("kokoro-82m", ttotal, qmax.artifact_sha256, **kw, max_instances=8)
    assert copied.code == "receipt_mismatch"
    assert f"is for artifact {qmax.artifact_sha256}, but the ttotal artifact in stack config hashes to " \
           f"{ttotal.artifact_sha256}" in copied.message
    assert f"python -m bench ttotal --endpoint {EP} --region us-east-1 --qmax <qmax-*.json> --receipt-bucket" \
           in copied.message and "--min-instances 1 --max-instances 8 --stack t`" in copied.message
    bad = receipt_problem("kokoro-82m", qmax, NOT_A_RECEIPT, **kw, why="it names endpoint 'x'")
    assert bad.code == "receipt_mismatch" and "is not this artifact's receipt (it names endpoint 'x')" in bad.message
    unrecorded = copy.deepcopy(entry)
    del unrecorded["measurements"]["qmax_receipt"]
    [qmax_no_key, _] = receipt_claims(_measurements(unrecorded))
    p = receipt_problem("kokoro-82m", qmax_no_key, qmax.artifact_sha256, **kw)
    assert p.code == "receipt_missing" and f"records no qmax_receipt (expected {qmax.key!r}" in p.message


def test_a_receipt_problem_turns_an_enabled_gate_off_and_keeps_an_earlier_reason(kokoro_entry):
    entry = _measured(kokoro_entry)
    [qmax, ttotal] = receipt_claims(_measurements(entry))
    kw = dict(bucket="b", stack="t", inputs=INPUTS)
    problems = [receipt_problem("kokoro-82m", c, NO_RECEIPT, **kw) for c in (qmax, ttotal)]
    on = GateDecision(True, "measured plan", "measured_plan")
    off = with_receipts(on, problems)
    assert not off.enabled and off.code == "receipt_missing"
    assert off.reason == problems[0].message + " (and 1 more receipt problem(s))"
    assert with_receipts(on, []) == on
    binding = GateDecision(False, "measured on another endpoint", "target_binding")
    assert with_receipts(binding, problems) == binding


# --- the program under mocks ---------------------------------------------------------------------------


def _gate(result):
    [g] = result.gates
    return g, result.outputs["scaling"]["kokoro-82m"]


def test_the_program_reads_the_receipts_of_a_measured_on_endpoint_from_its_bucket(kokoro_entry, write_stack):
    entry = _measured(kokoro_entry, "staging-kokoro-82m")
    entry["measured_on"] = {"endpoint": "staging-kokoro-82m", "why": "staging runs the release image",
                            "receipt_bucket": "staging-provenance"}
    result = run_preview(write_stack({"kokoro-82m": entry}), receipts=receipts_of(entry))
    buckets = {a["bucket"] for tok, a in result.invokes if tok.startswith("aws:s3/getObject")}
    assert buckets == {"staging-provenance"}
    gate, scaling = _gate(result)
    assert gate.enabled and scaling["reason_code"] == "measured_plan", gate.reason
    assert result.of_type("aws:appautoscaling/target:Target")


@pytest.mark.parametrize("error", [
    "reading S3 Bucket (staging-provenance): NoSuchBucket: The specified bucket does not exist",
    "listing S3 Bucket (staging-provenance) Objects: operation error S3: ListObjectsV2, https response error "
    "StatusCode: 403, api error AccessDenied: Access Denied",
    "listing S3 Bucket (staging-provenance) Objects: operation error S3: ListObjectsV2, https response error "
    "StatusCode: 301, api error PermanentRedirect: the bucket is in another region",
])
def test_an_unreadable_receipt_bucket_is_the_gates_reason_not_a_failed_preview(kokoro_entry, write_stack, error):
    entry = _measured(kokoro_entry, "staging-kokoro-82m")
    entry["measured_on"] = {"endpoint": "staging-kokoro-82m", "why": "staging runs the release image",
                            "receipt_bucket": "staging-provenance"}
    result = run_preview(write_stack({"kokoro-82m": entry}), receipts=receipts_of(entry),
                         bucket_errors={"staging-provenance": error})
    gate, scaling = _gate(result)
    assert not gate.enabled and scaling["reason_code"] == "receipt_missing"
    assert "could not be read in us-east-1" in gate.reason and error.split(": ")[-1] in gate.reason
    assert not result.of_type("aws:appautoscaling/target:Target")
    # The reads name the artifact's region, not the provider's default.
    regions = {a.get("region") for tok, a in result.invokes if tok.startswith("aws:s3/getObject")}
    assert regions == {entry["measurements"]["qmax"]["provenance"]["region"]} == {"us-east-1"}


def test_a_receipt_of_another_endpoint_keeps_scaling_off(kokoro_entry, write_stack):
    entry = _measured(kokoro_entry)
    bodies = receipts_of(entry)
    [qmax_key, _] = bodies
    bodies[qmax_key] = Receipt.model_validate_json(bodies[qmax_key]).model_copy(
        update={"endpoint": "prod-kokoro-82m"}).model_dump_json()
    result = run_preview(write_stack({"kokoro-82m": entry}), receipts=bodies)
    gate, scaling = _gate(result)
    assert not gate.enabled and scaling["reason_code"] == "receipt_mismatch"
    assert "is not this artifact's receipt (it names endpoint 'prod-kokoro-82m' (artifact: 't-kokoro-82m'))" in gate.reason
    assert not result.of_type("aws:appautoscaling/target:Target")
    assert any("no autoscaling: models.kokoro-82m.measurements.qmax" in w for w in result.warnings)
    tags = result.named("kokoro-82m-endpoint").inputs["tags"]
    assert tags[RECEIPT_TAGS["qmax"]] == NOT_A_RECEIPT
    assert tags[RECEIPT_TAGS["ttotal"]] == canonical_sha256(_measurements(entry).ttotal)


def test_receipts_are_read_only_for_a_gate_that_is_otherwise_on(kokoro_entry, write_stack):
    # Measured on another endpoint: the gate is off for that; the receipt tags are still written.
    entry = _measured(kokoro_entry, "prod-kokoro-82m")
    result = run_preview(write_stack({"kokoro-82m": entry}), receipts=receipts_of(entry))
    gate, scaling = _gate(result)
    assert not gate.enabled and scaling["reason_code"] == "target_binding"
    tags = result.named("kokoro-82m-endpoint").inputs["tags"]
    assert tags[RECEIPT_TAGS["qmax"]] == canonical_sha256(_measurements(entry).qmax)


@pytest.mark.parametrize("origin", ["reference", "local"])
def test_an_artifact_that_is_not_a_sagemaker_measurement_cannot_claim_a_receipt(kokoro_entry, write_stack, origin):
    entry = _measured(copy.deepcopy(kokoro_entry))
    key = entry["measurements"]["qmax_receipt"]
    entry = copy.deepcopy(kokoro_entry)
    if origin == "local":
        q = with_evidence(entry, EP)["measurements"]["qmax"]
        q["fingerprint"] = json.loads(Fingerprint.of("local", q["fingerprint"]["image_digest"]).model_dump_json())
        q["provenance"].update(target="local:http://127.0.0.1:8080", region=None)
        q["cloudwatch_ratio_source"], q["cloudwatch_ratio"] = "not_applicable", 1.0
        for lv in q["ladder"]:
            lv["cloudwatch_concurrency_max"] = None
    entry["measurements"]["qmax_receipt"] = key
    with pytest.raises(ConfigError, match="cannot claim a receipt .*only measurements of a SageMaker endpoint leave one"):
        run_preview(write_stack({"kokoro-82m": entry}))


def test_receipts_for_the_offline_preview_come_from_a_directory_copy(kokoro_entry, write_stack, tmp_path):
    entry = _measured(kokoro_entry)
    for key, body in receipts_of(entry).items():
        (tmp_path / "copy" / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "copy" / key).write_text(body)
    receipts = load_receipts(tmp_path / "copy")
    assert set(receipts) == set(receipts_of(entry))
    gate, _ = _gate(run_preview(write_stack({"kokoro-82m": entry}), receipts=receipts))
    assert gate.enabled, gate.reason
    with pytest.raises(ConfigError, match="--receipts .*no such directory; copy the receipts with `aws s3 sync"):
        load_receipts(tmp_path / "nowhere")


def test_speech_preview_cli_without_receipts_says_why_there_is_no_scaling(kokoro_entry, write_stack, capsys):
    from speech.commands.preview import main

    path = write_stack({"kokoro-82m": _measured(kokoro_entry)})
    assert main(["--stack", "t", "--stack-dir", str(path.parent)]) == 0
    out = capsys.readouterr().out
    assert "kokoro-82m: NO scaling: models.kokoro-82m.measurements.qmax: no receipt at s3://" in out
    assert "scaling off (receipt_missing)" in out
    assert main(["--stack", "t", "--stack-dir", str(path.parent), "--receipts", str(path.parent / "none")]) == 2
    assert "ConfigError: --receipts" in capsys.readouterr().err
