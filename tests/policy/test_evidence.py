"""A measured claim needs evidence and must name this stack's endpoint (issue 19), judged by the
pack over its analyzer protocol on what the program would deploy."""

from __future__ import annotations

import json

from policy.check import preview_resources
from speech.deploy import provenance as pv
from tests.policy.conftest import ROOT
from tests.policy.policy_edits import messages, named, receipts_of, set_path, with_evidence, with_receipt_keys
from tests.stack_files import embedded_config

MODELS = "speech-endpoints:models"


def _preview(tmp_path, entry: dict, stack: str = "dev"):
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    config[MODELS]["kokoro-82m"] = entry
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(json.dumps({"config": config}))
    # With the receipts bench would have left for the measured artifacts (tests/policy/test_receipts.py).
    resources, _ = preview_resources(path, stack, receipts=receipts_of(entry))
    return resources


def _entry() -> dict:
    return embedded_config(ROOT / "Pulumi.dev.yaml")[MODELS]["kokoro-82m"]


def test_measured_on_this_endpoint_passes_the_pack(tmp_path, pack):
    resources = _preview(tmp_path, with_receipt_keys(with_evidence(_entry(), "dev-kokoro-82m")))
    report = pack.check(resources)
    assert not report.mandatory, [d.message for d in report.mandatory]
    assert not messages(report, "scaling-requires-measured-provenance")


def test_pack_blocks_a_document_whose_measurements_name_another_endpoint(tmp_path, pack):
    entry = with_receipt_keys(with_evidence(_entry(), "staging-kokoro-82m"))
    entry["measured_on"] = {"endpoint": "staging-kokoro-82m", "why": "staging runs the same image"}
    resources = _preview(tmp_path, entry)
    assert not pack.check(resources).mandatory
    # A hand edit drops the justification from the document and re-tags consistently: the
    # artifacts now name an endpoint nothing in the stack vouches for.
    doc_res = named(resources, "kokoro-82m-provenance")
    doc = json.loads(doc_res.props["content"])
    doc["measured_on"] = None
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    set_path(doc_res, "content", text)
    for r in resources:
        tags = r.props.get("tags")
        if isinstance(tags, dict) and pv.TAG_DOC_SHA in tags:
            tags[pv.TAG_DOC_SHA] = pv.document_sha256(text)
    report = pack.check(resources)
    [msg] = messages(report, "scaling-requires-measured-provenance", "mandatory")
    assert "measured on 'sagemaker:staging-kokoro-82m', not on this stack's endpoint 'dev-kokoro-82m'" in msg
    assert "bench qmax --endpoint dev-kokoro-82m" in msg
