"""Each rule: the dev stack passes it, one realistic edit violates it (through the real pack)."""

from __future__ import annotations

import json

import pytest

from policy.harness import Resource
from tests.policy.policy_edits import messages, named, set_path


def _no_diag(report, policy):
    return [d.message for d in report.of(policy)] == []


def test_every_rule_passes_on_the_dev_stack(pack, dev):
    report = pack.check(dev)
    quiet = {d.policy for d in report.diagnostics}
    assert quiet == {"scaling-from-unmeasured-figures"}
    assert len(pack.policies) == 25


# --- scaling-requires-measured-provenance ------------------------------------------------------


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


# --- scaling-matches-plan ----------------------------------------------------------------------


@pytest.mark.parametrize("name,path,value,expect", [
    ("kokoro-82m-target", "maxCapacity", 400.0, "maxCapacity is 400, expected 293"),
    ("kokoro-82m-target", "minCapacity", 2.0, "minCapacity is 2, expected 1"),
    ("kokoro-82m-scale-out", "targetTrackingScalingPolicyConfiguration.scaleOutCooldown", 60.0, "scaleOutCooldown is 60, expected 30"),
    ("kokoro-82m-scale-in", "stepScalingPolicyConfiguration.cooldown", 1200.0, "cooldown is 1200, expected 960"),
    ("kokoro-82m-scale-in-alarm", "threshold", 30.0, "threshold is 30, expected 10.6602"),
    # A 60 s metric would add minutes the plan's reaction bound (10 s x 3) does not contain.
    ("kokoro-82m-scale-out", "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
     "SageMakerVariantInvocationsPerInstance",
     "is 'SageMakerVariantInvocationsPerInstance', expected 'SageMakerVariantConcurrentRequestsPerModelHighResolution'"),
])
def test_matches_plan_each_number(pack, dev, name, path, value, expect):
    set_path(named(dev, name), path, value)
    [msg] = messages(pack.check(dev), "scaling-matches-plan", "mandatory")
    assert f"'{name}'" in msg and expect in msg and "fix:" in msg


# The dev plan: Q_max 50, CloudWatch ratio 1, metric period 10 s, datapoints to alarm 3; target 15.99
# (the 99.5 % SLO share's occupancy); surge 1.25 x 50 / 15.99 = 3.909 -> +291 %, at least
# ceil(3 x 2.909) = 9 instances (smallest safe fleet 3).
@pytest.mark.parametrize("name,path,value,expect,why", [
    ("kokoro-82m-scale-in-alarm", "period", 60.0, "is 60, expected 10", "plan metric period"),
    ("kokoro-82m-scale-in-alarm", "evaluationPeriods", 3.0, "is 3, expected 30", "scale-in window"),
    ("kokoro-82m-scale-in-alarm", "datapointsToAlarm", 10.0, "is 10, expected 30", "must breach"),
    ("kokoro-82m-scale-in-alarm", "statistic", "Average", "is 'Average', expected 'Maximum'", "peak concurrency"),
    ("kokoro-82m-surge-alarm", "threshold", 60.0, "is 60, expected 50", "deployed Q_max = 50"),
    ("kokoro-82m-surge-alarm", "comparisonOperator", "GreaterThanThreshold",
     "is 'GreaterThanThreshold', expected 'GreaterThanOrEqualToThreshold'", "already rejects"),
    ("kokoro-82m-surge-alarm", "evaluationPeriods", 12.0, "is 12, expected 3", "reaction bound"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.stepAdjustments.0.scalingAdjustment", 10.0,
     "is 10, expected 291", "surge_adjustment"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.minAdjustmentMagnitude", 1.0,
     "is 1, expected 9", "smallest safe fleet (3)"),
    ("kokoro-82m-surge", "stepScalingPolicyConfiguration.adjustmentType", "ChangeInCapacity",
     "is 'ChangeInCapacity', expected 'PercentChangeInCapacity'", "fraction of its size"),
])
def test_matches_plan_alarms_and_surge_step(pack, dev, name, path, value, expect, why):
    set_path(named(dev, name), path, value)
    report = pack.check(dev)
    [msg] = messages(report, "scaling-matches-plan", "mandatory")
    assert f"'{name}' {path} {expect}" in msg and why in msg and "fix: remove the hand edit" in msg
    # The edit stays one scaling path: only the plan comparison may object.
    assert messages(report, "one-scaling-path-per-variant") == []


def test_surge_policy_with_an_extra_unplanned_step(pack, dev):
    steps = named(dev, "kokoro-82m-surge").props["stepScalingPolicyConfiguration"]["stepAdjustments"]
    steps[0]["metricIntervalUpperBound"] = "20"
    steps.append({"metricIntervalLowerBound": "20", "scalingAdjustment": 500.0})
    [msg] = messages(pack.check(dev), "scaling-matches-plan", "mandatory")
    assert "scaling policy 'kokoro-82m-surge' has 2 step adjustments, expected 1 (+291%" in msg and "fix:" in msg


# --- scaling-plan-feasible ---------------------------------------------------------------------


def test_scale_in_cooldown_below_planning_t_total(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-in"), "stepScalingPolicyConfiguration.cooldown", 120.0)
    [msg] = messages(pack.check(dev), "scaling-plan-feasible", "mandatory")
    assert "scaling policy 'kokoro-82m-scale-in' scale-in cooldown is 120 s, below the planning T_total 320.248 s" in msg
    assert "use the plan's 960 s" in msg


# --- deployment-matches-fingerprint ------------------------------------------------------------


def test_instance_type_differs_from_measured(pack, dev):
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.g5.2xlarge")
    [msg] = messages(pack.check(dev), "deployment-matches-fingerprint", "mandatory")
    assert "endpoint configuration 'kokoro-82m-config' deploys instance type 'ml.g5.2xlarge'" in msg
    assert "measured on 'ml.g5.xlarge' (g5xlarge-8b1b96bc)" in msg


def test_image_not_pinned_by_digest(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.image", "kokoro:latest")
    [msg] = messages(pack.check(dev), "deployment-matches-fingerprint", "mandatory")
    assert "'kokoro:latest' is not pinned by digest" in msg


# --- one-scaling-path-per-variant --------------------------------------------------------------


def test_competing_scale_out_policy(pack, dev):
    extra = json.loads(json.dumps(named(dev, "kokoro-82m-scale-out").props))
    dev.append(Resource(type="aws:appautoscaling/policy:Policy", name="hand-scale-out", props=extra))
    report = pack.check(dev)
    [msg] = messages(report, "one-scaling-path-per-variant", "mandatory")
    assert "has 2 target-tracking scale-out policies" in msg and "'hand-scale-out'" in msg and "expected exactly 1" in msg


def test_target_tracking_that_also_scales_in(pack, dev):
    set_path(named(dev, "kokoro-82m-scale-out"), "targetTrackingScalingPolicyConfiguration.disableScaleIn", False)
    [msg] = messages(pack.check(dev), "one-scaling-path-per-variant", "mandatory")
    assert "disableScaleIn is False, expected true" in msg


def test_missing_scale_in_path_and_orphan_policy(pack, dev):
    dev[:] = [r for r in dev if r.name not in ("kokoro-82m-scale-in", "kokoro-82m-scale-in-alarm")]
    orphan = json.loads(json.dumps(named(dev, "kokoro-82m-surge").props))
    orphan["resourceId"] = "endpoint/other/variant/AllTraffic"
    dev.append(Resource(type="aws:appautoscaling/policy:Policy", name="stray", props=orphan))
    msgs = messages(pack.check(dev), "one-scaling-path-per-variant", "mandatory")
    assert any("has 0 step scale-in policies (none), expected exactly 1" in m for m in msgs)
    assert any("scaling policy 'stray' scales 'endpoint/other/variant/AllTraffic', which has no scalable target" in m for m in msgs)


# --- daily-cost-ceiling ------------------------------------------------------------------------


def test_daily_cost_over_budget(pack, dev):
    report = pack.check(dev, {"daily-cost-ceiling": {"daily-budget-usd": 5000}})
    [d] = report.of("daily-cost-ceiling")
    assert d.level == "mandatory" and d.resource is None
    assert "$9,901/day" in d.message and "293 x ml.g5.xlarge x $1.408/h x 24" in d.message
    assert "daily budget $5,000" in d.message and "fix:" in d.message


def test_daily_cost_unknown_price(pack, dev):
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.p5.48xlarge")
    report = pack.check(dev, {"instance-type-allowed": {"allowed-instance-types": ["ml.p5.48xlarge"]}})
    [msg] = messages(report, "daily-cost-ceiling", "mandatory")
    assert "'ml.p5.48xlarge', which has no hourly price" in msg
    assert messages(report, "instance-type-allowed") == []


# --- instance-type-allowed ---------------------------------------------------------------------


def test_instance_type_not_allowed(pack, dev):
    report = pack.check(dev, {"instance-type-allowed": {"allowed-instance-types": ["ml.g6.xlarge"]}})
    [msg] = messages(report, "instance-type-allowed", "mandatory")
    assert "endpoint configuration 'kokoro-82m-config' productionVariants[0].instanceType is 'ml.g5.xlarge'" in msg
    assert "['ml.g6.xlarge']" in msg


# --- gpu-instance-runs-gpu-backend -------------------------------------------------------------


def test_gpu_instance_forced_to_the_cpu_backend_is_blocked_with_the_cost_ratio(pack, dev):
    # The hand edit a program of one's own could make: the dev stack's g5 model told to run onnx.
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    report = pack.check(dev)
    [d] = report.of("gpu-instance-runs-gpu-backend")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-model"
    assert "primaryContainer.environment.BACKEND is 'onnx', a CPU-only backend" in d.message
    # The price table: ml.g5.xlarge $1.408/h against ml.c6i.xlarge $0.204/h.
    assert "ml.g5.xlarge costs $1.408/h, 6.9x the $0.204/h of ml.c6i.xlarge" in d.message and "fix:" in d.message


def test_a_torch_variant_on_the_default_cuda_11_host_is_blocked(pack, dev):
    variant = named(dev, "kokoro-82m-config").props["productionVariants"][0]
    assert variant["inferenceAmiVersion"] == "al2-ami-sagemaker-inference-gpu-3-1"
    del variant["inferenceAmiVersion"]
    report = pack.check(dev)
    [d] = report.of("gpu-instance-runs-gpu-backend")
    assert d.level == "mandatory" and d.resource == "kokoro-82m-config"
    assert "driver 470 (CUDA 11.4)" in d.message and "inference_ami_version='al2-ami-sagemaker-inference-gpu-3-1'" in d.message


def test_the_cost_ratio_is_in_the_configured_prices(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    report = pack.check(dev, {"gpu-instance-runs-gpu-backend": {"hourly-prices-usd": {"ml.g5.xlarge": 2.0,
                                                                                        "ml.c7i.xlarge": 0.1}}})
    [msg] = messages(report, "gpu-instance-runs-gpu-backend", "mandatory")
    assert "ml.g5.xlarge costs $2.000/h, 20.0x the $0.100/h of ml.c7i.xlarge" in msg


def test_a_cpu_instance_may_run_the_cpu_backend(pack, dev):
    set_path(named(dev, "kokoro-82m-model"), "primaryContainer.environment.BACKEND", "onnx")
    set_path(named(dev, "kokoro-82m-config"), "productionVariants.0.instanceType", "ml.c7i.xlarge")
    report = pack.check(dev)
    assert messages(report, "gpu-instance-runs-gpu-backend") == []
    # ... while the measured fingerprint (ml.g5.xlarge) still tells the change apart.
    assert messages(report, "deployment-matches-fingerprint", "mandatory")


# --- security hygiene -------------------------------------------------------------------------


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
