"""Account hygiene (policy/rules/hygiene.py): allowed instance types, buckets, IAM, ECR and the alarm
topic's key, one realistic edit each (through the pack)."""
from __future__ import annotations

import json

from tests.policy.policy_edits import messages, named, set_path


def test_instance_type_not_allowed(pack, dev):
    report = pack.check(dev, {"instance-type-allowed": {"allowed-instance-types": ["ml.g6.xlarge"]}})
    [msg] = messages(report, "instance-type-allowed", "mandatory")
    assert "endpoint configuration 'kokoro-82m-config' productionVariants[0].instanceType is 'ml.g5.xlarge'" in msg
    assert "['ml.g6.xlarge']" in msg


def test_bucket_without_encryption_is_advisory(pack, dev):
    dev[:] = [r for r in dev if r.name != "kokoro-82m-weights-encryption"]
    report = pack.check(dev)
    [d] = report.of("s3-encrypted")
    assert d.level == "advisory" and "bucket 'kokoro-82m-weights' has no server-side encryption" in d.message
    assert report.mandatory == []


def test_bucket_without_public_access_block(pack, dev):
    dev[:] = [r for r in dev if r.name != "kokoro-82m-weights-public-access"]
    [msg] = messages(pack.check(dev), "s3-no-public-access", "mandatory")
    assert "bucket 'kokoro-82m-weights' has no public access block" in msg


def test_wildcard_iam_action(pack, dev):
    rp = named(dev, "kokoro-82m-execution-policy")
    doc = json.loads(rp.props["policy"])
    doc["Statement"].append({"Effect": "Allow", "Action": "s3:*", "Resource": "*"})
    rp.props["policy"] = json.dumps(doc)
    [d] = pack.check(dev).of("iam-no-wildcard-actions")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-execution-policy"
    assert "allows wildcard actions ['s3:*']" in d.message and "fix:" in d.message


def test_iam_action_on_any_resource(pack, dev):
    # The same rule the program's own documents are held to (speech.deploy.iam_check): an explicit action
    # on Resource "*" is still a wildcard grant, unless AWS has no resource-level permission for it.
    rp = named(dev, "kokoro-82m-execution-policy")
    doc = json.loads(rp.props["policy"])
    doc["Statement"].append({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"})
    rp.props["policy"] = json.dumps(doc)
    [d] = pack.check(dev).of("iam-no-wildcard-actions")
    assert d.level == "mandatory" and "allows ['s3:GetObject'] on Resource '*'" in d.message and "fix:" in d.message


def test_ecr_mutable_tags_is_advisory(pack, built):
    assert pack.check(built).mandatory == []
    set_path(named(built, "kokoro-82m-images"), "imageTagMutability", "MUTABLE")
    [d] = pack.check(built).of("ecr-immutable-scanned")
    assert d.level == "advisory" and "imageTagMutability is 'MUTABLE', expected 'IMMUTABLE'" in d.message


def test_alarm_topic_on_the_aws_managed_key_is_blocked(pack, dev):
    assert not pack.check(dev).of("alarm-topic-key-usable")
    set_path(named(dev, "alarms-topic"), "kmsMasterKeyId", "alias/aws/sns")
    [d] = pack.check(dev).of("alarm-topic-key-usable")
    assert d.level == "mandatory" and "CloudWatch alarms cannot publish" in d.message and "cloudwatch.amazonaws.com" in d.message
