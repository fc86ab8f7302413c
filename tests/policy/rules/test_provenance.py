"""The provenance rules (policy/rules/provenance.py): scaling-requires-measured-provenance and
deployment-matches-fingerprint, one realistic edit each (through the pack)."""
from __future__ import annotations

from tests.policy.policy_edits import messages, named, set_path


def test_provenance_target_tags_differing_from_endpoint(pack, dev):
    named(dev, "kokoro-82m-target").props["tags"]["speech:q-max"] = "64"
    report = pack.check(dev)
    [msg] = messages(report, "scaling-requires-measured-provenance", "mandatory")
    assert "scalable target 'kokoro-82m-target' carries provenance different from endpoint 'kokoro-82m-endpoint'" in msg
    assert "speech:q-max='64' (endpoint: '50')" in msg


def test_provenance_reference_blocked_when_config_forbids_it(pack, dev):
    report = pack.check(dev, {"scaling-requires-measured-provenance": {"allow-reference-artifacts": False}})
    [msg] = messages(report, "scaling-requires-measured-provenance", "mandatory")
    assert "from 'reference' figures" in msg and "allow-reference-artifacts is false" in msg and "bench qmax" in msg


def test_instance_type_differs_from_measured(pack, dev):
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.g5.2xlarge")
    [msg] = messages(pack.check(dev), "deployment-matches-fingerprint", "mandatory")
    assert "endpoint configuration 'kokoro-82m-config' deploys instance type 'ml.g5.2xlarge'" in msg
    assert "measured on 'ml.g5.xlarge' (g5xlarge-8b1b96bc)" in msg


def test_image_not_pinned_by_digest(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.image", "kokoro:latest")
    [msg] = messages(pack.check(dev), "deployment-matches-fingerprint", "mandatory")
    assert "'kokoro:latest' is not pinned by digest" in msg
