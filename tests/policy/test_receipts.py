"""Measurement receipts at preview (issue 19): bench writes them to the provenance bucket (moto),
the program reads them back with the S3 data sources under Pulumi's mocks, and both the gate and
the pack (over its analyzer protocol) compare them with the artifacts in stack config."""

from __future__ import annotations

import copy
import json

import pytest

from policy.check import main as check_main
from policy.check import preview_resources
from speech.infra.preview import load_receipts, run_preview
from speech.schema.artifacts import canonical_sha256
from speech.schema.config import Measurements
from speech.schema.receipts import RECEIPT_TAGS, receipt_key
from tests.policy.conftest import ROOT
from tests.policy.policy_edits import messages, named, with_evidence, with_receipt_keys
from tests.stack_files import embedded_config

# Each test here runs a tune, a preview or the pack on whole stacks (seconds apiece, the setup's fixture
# tens): make test runs them, make test-fast (the inner loop) leaves them out.
pytestmark = pytest.mark.slow

MODELS = "speech-endpoints:models"
EP = "dev-kokoro-82m"
BUCKET = "kokoro-82m-weights"
"""The model's provenance bucket as the mocks name it (the program's own bucket)."""
POLICY = "measured-artifacts-match-receipts"
T_TARGET = "aws:appautoscaling/target:Target"


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 and STS, with the bucket the program reads receipts from."""
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    from moto import mock_aws

    with mock_aws():
        import boto3

        sess = boto3.session.Session(region_name="us-east-1")
        sess.client("s3").create_bucket(Bucket=BUCKET)
        yield sess


def _entry() -> dict:
    entry = embedded_config(ROOT / "Pulumi.dev.yaml")[MODELS]["kokoro-82m"]
    return with_receipt_keys(with_evidence(entry, EP))


def _measurements(entry: dict) -> Measurements:
    return Measurements.model_validate(entry["measurements"])


def _stack(tmp_path, entry: dict):
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    config[MODELS]["kokoro-82m"] = entry
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(json.dumps({"config": config}))
    return path


def _bench_writes_receipts(sess, entry: dict) -> None:
    from bench.aws.receipts import write_receipt

    m = _measurements(entry)
    for art in (m.qmax, m.ttotal):
        write_receipt(sess, BUCKET, art)


def _scaling(result) -> dict:
    return result.outputs["scaling"]["kokoro-82m"]


def test_receipts_bench_wrote_let_measured_figures_scale(s3, tmp_path, pack):
    entry = _entry()
    _bench_writes_receipts(s3, entry)
    resources, result = preview_resources(_stack(tmp_path, entry), "dev", receipts=load_receipts(f"s3://{BUCKET}"))
    m = _measurements(entry)
    # The program asked the stack's own bucket for exactly the recorded keys ...
    listed = [a for tok, a in result.invokes if tok == "aws:s3/getObjects:getObjects"]
    assert sorted((a["bucket"], a["prefix"]) for a in listed) == sorted(
        [(BUCKET, m.qmax_receipt), (BUCKET, m.ttotal_receipt)])
    # ... tagged the endpoint with what it found, and scaled.
    tags = named(resources, "kokoro-82m-endpoint").props["tags"]
    assert tags[RECEIPT_TAGS["qmax"]] == canonical_sha256(m.qmax)
    assert tags[RECEIPT_TAGS["ttotal"]] == canonical_sha256(m.ttotal)
    assert _scaling(result)["enabled"] and _scaling(result)["reason_code"] == "measured_plan"
    assert [r for r in resources if r.type == T_TARGET]
    report = pack.check(resources)
    assert not report.mandatory, [d.message for d in report.mandatory]
    assert not report.of(POLICY)


def test_a_receipt_copied_to_edited_figures_blocks(s3, tmp_path, pack):
    original = _entry()
    _bench_writes_receipts(s3, original)
    # Hand-edit the measured qmax artifact and record the key of the edited one, then copy the
    # original run's receipt there: the key matches, the receipt's sha256 does not.
    edited = copy.deepcopy(original)
    edited["measurements"]["qmax"]["client_overhead"]["cpu_fraction"] = 0.05
    for kind in ("qmax", "ttotal"):
        edited["measurements"].pop(f"{kind}_receipt")
    edited = with_receipt_keys(edited)
    old, new = _measurements(original), _measurements(edited)
    assert new.qmax_receipt != old.qmax_receipt
    s3.client("s3").copy_object(Bucket=BUCKET, Key=new.qmax_receipt,
                                CopySource={"Bucket": BUCKET, "Key": old.qmax_receipt})

    resources, result = preview_resources(_stack(tmp_path, edited), "dev", receipts=load_receipts(f"s3://{BUCKET}"))
    assert not _scaling(result)["enabled"] and _scaling(result)["reason_code"] == "receipt_mismatch"
    assert not [r for r in resources if r.type == T_TARGET]
    [gate] = result.gates
    assert f"is for artifact {canonical_sha256(old.qmax)}" in gate.reason

    [msg] = messages(pack.check(resources), POLICY, "mandatory")
    assert msg.startswith("endpoint 'kokoro-82m-endpoint': models.kokoro-82m.measurements.qmax:")
    assert f"s3://{BUCKET}/{new.qmax_receipt}" in msg
    assert f"is for artifact {canonical_sha256(old.qmax)}" in msg and f"hashes to {canonical_sha256(new.qmax)}" in msg
    assert (f"`python -m bench qmax --endpoint {EP} --region us-east-1 --slo-ms 3000 --receipt-bucket {BUCKET}`"
            in msg)
    i = embedded_config(ROOT / "Pulumi.dev.yaml")[MODELS]["kokoro-82m"]["plan"]
    assert (f"`python -m bench plan --qmax <qmax-*.json> --ttotal <ttotal-*.json> --peak-rps {i['peak_rps']:g} "
            f"--trough-rps {i['trough_rps']:g} --slo-ms {i['slo_ms']:g} --surge-ratio {i['surge_ratio']:g} "
            "--min-instances 1 --stack dev`") in msg


@pytest.mark.slow
def test_no_receipt_blocks_with_the_command_that_fixes_it(tmp_path, capsys):
    path = _stack(tmp_path, _entry())
    result = run_preview(path, "dev")  # offline, no --receipts: nothing to read
    assert not _scaling(result)["enabled"] and _scaling(result)["reason_code"] == "receipt_missing"
    assert not result.of_type(T_TARGET)

    rc = check_main(["--stack", "dev", "--stack-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1, out
    m = _measurements(_entry())
    for kind, key in (("qmax", m.qmax_receipt), ("ttotal", m.ttotal_receipt)):
        assert f"[{POLICY}] kokoro-82m-endpoint: endpoint 'kokoro-82m-endpoint': models.kokoro-82m.measurements.{kind}: " \
               f"no receipt at s3://{BUCKET}/{key}" in out
        assert f"`python -m bench {kind} --endpoint {EP} --region us-east-1" in out
    assert "note: this offline check read no receipts (no --receipts)" in out
    assert "BLOCKED: mandatory violations" in out


def test_a_receipt_tag_edited_by_hand_is_compared_by_the_pack_itself(tmp_path, pack):
    entry = _entry()
    m = _measurements(entry)
    from speech.schema.receipts import receipt_for

    bodies = {receipt_key(a.model, a.kind, canonical_sha256(a)): receipt_for(
        a, caller_arn="arn:aws:iam::123456789012:user/bench", caller_account="123456789012").model_dump_json()
        for a in (m.qmax, m.ttotal)}
    resources, _ = preview_resources(_stack(tmp_path, entry), "dev", receipts=bodies)
    assert not pack.check(resources).mandatory
    endpoint = named(resources, "kokoro-82m-endpoint")
    endpoint.props["tags"][RECEIPT_TAGS["ttotal"]] = "sha256:" + "0" * 64
    [msg] = messages(pack.check(resources), POLICY, "mandatory")
    assert "measurements.ttotal: the receipt at" in msg and "is for artifact sha256:000000" in msg
    del endpoint.props["tags"][RECEIPT_TAGS["ttotal"]]
    [msg] = messages(pack.check(resources), POLICY, "mandatory")
    assert f"has no {RECEIPT_TAGS['ttotal']} tag" in msg and "nothing read its receipt" in msg


def test_first_preview_reads_receipts_at_up(tmp_path, pack):
    # The bucket is created in this update: the engine answers the data sources unknown, so the
    # program creates no scaling yet and the pack defers its check to `pulumi up`.
    resources, result = preview_resources(_stack(tmp_path, _entry()), "dev", first_preview=True)
    assert not [r for r in resources if r.type == T_TARGET]
    [gate] = result.gates
    assert not gate.enabled and gate.reason.startswith("decided at pulumi up")
    report = pack.check(resources)
    assert not report.mandatory, [d.message for d in report.mandatory]
    [deferred] = report.of(POLICY)
    assert deferred.level == "advisory" and "read from the bucket once it exists (pulumi up)" in deferred.message


def test_reference_figures_read_no_receipts(dev, pack):
    result = run_preview(ROOT / "Pulumi.dev.yaml", "dev")
    assert not [tok for tok, _ in result.invokes if tok.startswith("aws:s3/")]
    assert not any(k in result.named("kokoro-82m-endpoint").inputs["tags"] for k in RECEIPT_TAGS.values())
    assert _scaling(result)["enabled"] and _scaling(result)["reason_code"] == "measured_plan"
    assert not pack.check(dev).of(POLICY)
