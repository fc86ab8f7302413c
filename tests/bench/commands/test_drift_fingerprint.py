"""``bench drift`` compares what the endpoint runs (instance type, image digest) with the stack
config and with the fingerprint of the measurements, against moto in-process."""

from __future__ import annotations

import json

import pytest

from bench.aws import client as aws
from bench.cli.main import main
from speech.schema.artifacts import Fingerprint
from speech.stack.write import write_model_entry

from ..conftest import DIGEST, ENDPOINT, IMAGE, INSTANCE, STACK

OTHER_DIGEST = "sha256:" + "cd" * 32
OTHER_IMAGE = IMAGE.replace(DIGEST, OTHER_DIGEST)


def _drift(tmp_path, capsys) -> tuple[int, list[dict]]:
    capsys.readouterr()
    rc = main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path), "--json"])
    return rc, json.loads(capsys.readouterr().out)["endpoints"][ENDPOINT]


def _swap_model(sess, image: str) -> None:
    """A new model with another image behind the same endpoint name (an image update made
    outside pulumi up). moto has no UpdateEndpoint: recreate the endpoint on the new config."""
    sm = sess.client("sagemaker")
    sm.create_model(ModelName=f"{ENDPOINT}-v2", ExecutionRoleArn="arn:aws:iam::123456789012:role/sm",
                    PrimaryContainer={"Image": image})
    sm.create_endpoint_config(
        EndpointConfigName=f"{ENDPOINT}-v2",
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": f"{ENDPOINT}-v2", "InitialInstanceCount": 1,
                             "InstanceType": INSTANCE, "InitialVariantWeight": 1.0}],
    )
    sm.delete_endpoint(EndpointName=ENDPOINT)
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-v2")


def test_same_fingerprint_everywhere_is_clean(deployed, tmp_path, capsys, model_config):
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    rc, issues = _drift(tmp_path, capsys)
    assert issues == [] and rc == 0


def test_deployed_image_differs_from_stack_config_and_measurements(deployed, tmp_path, capsys, model_config):
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    _swap_model(deployed, OTHER_IMAGE)
    rc, issues = _drift(tmp_path, capsys)
    msgs = [i["message"] for i in issues if i["kind"] == "fingerprint"]
    assert rc == 1 and len(msgs) == 3, msgs
    config_msg, qmax_msg, ttotal_msg = msgs
    assert f"model {ENDPOINT}-v2 runs image digest {OTHER_DIGEST}" in config_msg
    assert f"models.kokoro-82m.image says {DIGEST}" in config_msg and "fix: pulumi up" in config_msg
    deployed_slug = Fingerprint.of(INSTANCE, OTHER_DIGEST).slug
    for kind, msg in (("qmax", qmax_msg), ("ttotal", ttotal_msg)):
        assert f"models.kokoro-82m.measurements.{kind} was measured on m5large-abababab" in msg
        assert f"runs {deployed_slug} ({INSTANCE}, {OTHER_DIGEST})" in msg and "bench qmax" in msg


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_measurements_of_another_instance_type_are_drift(deployed, tmp_path, capsys, model_config):
    # The stack config matches what runs; the measurements describe the reference g5.xlarge.
    g5 = Fingerprint.of("ml.g5.xlarge", DIGEST)
    m = model_config.measurements
    entry = model_config.model_copy(update={"measurements": m.model_copy(update={
        "qmax": m.qmax.model_copy(update={"fingerprint": g5}), "ttotal": m.ttotal.model_copy(update={"fingerprint": g5})})})
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", entry)
    rc, issues = _drift(tmp_path, capsys)
    msgs = [i["message"] for i in issues if i["kind"] == "fingerprint"]
    assert rc == 1 and len(msgs) == 2 and all(f"was measured on {g5.slug} (ml.g5.xlarge" in x for x in msgs)
    assert all("m5large-abababab" in x for x in msgs)

    # The program plans anyway when the stack says so; drift then agrees with it.
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", entry, allow_config_mismatch=True)
    rc, issues = _drift(tmp_path, capsys)
    assert issues == [] and rc == 0


def test_deployed_instance_type_differs_from_stack_config(deployed, tmp_path, capsys, model_config):
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m",
                      model_config.model_copy(update={"instance_type": "ml.m5.xlarge"}))
    rc, issues = _drift(tmp_path, capsys)
    [msg] = [i["message"] for i in issues if i["kind"] == "fingerprint"]
    assert rc == 1
    assert (f"endpoint configuration {ENDPOINT} runs instance type '{INSTANCE}', stack config "
            "speech-endpoints:models.kokoro-82m.instance_type says 'ml.m5.xlarge'") in msg and "fix: pulumi up" in msg


def test_unpinned_deployed_image(deployed, tmp_path, capsys, model_config):
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    _swap_model(deployed, IMAGE.split("@")[0] + ":latest")
    rc, issues = _drift(tmp_path, capsys)
    [msg] = [i["message"] for i in issues if i["kind"] == "fingerprint"]
    assert rc == 1 and "not pinned by digest" in msg and ":latest'" in msg and DIGEST in msg


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_alarm_window_and_surge_size_edited_after_deploy(deployed, tmp_path, capsys, model_config, ref_plan):
    # Same figures as the policy pack checks before deploy: a 3-period scale-in window gives back an
    # instance after 30 s of calm instead of 5 min; a +10 % surge adds one instance, not the plan's.
    write_model_entry(tmp_path / f"Pulumi.{STACK}.yaml", "kokoro-82m", model_config)
    assert _drift(tmp_path, capsys) == (0, [])
    cw = deployed.client("cloudwatch")
    [alarm] = cw.describe_alarms(AlarmNames=[f"{ENDPOINT}-scale-in"])["MetricAlarms"]
    keep = ("AlarmName", "Namespace", "MetricName", "Statistic", "Dimensions", "Period", "Threshold",
            "ComparisonOperator", "TreatMissingData", "AlarmActions")
    cw.put_metric_alarm(**{k: alarm[k] for k in keep}, EvaluationPeriods=3, DatapointsToAlarm=3)
    aas = deployed.client("application-autoscaling")
    [surge] = [p for p in aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
               if p["PolicyName"] == f"{ENDPOINT}-surge"]
    cfg = dict(surge["StepScalingPolicyConfiguration"], StepAdjustments=[{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 10}])
    arn = aas.put_scaling_policy(PolicyName=surge["PolicyName"], ServiceNamespace="sagemaker", ResourceId=surge["ResourceId"],
                                 ScalableDimension=surge["ScalableDimension"], PolicyType="StepScaling",
                                 StepScalingPolicyConfiguration=cfg)["PolicyARN"]
    # AWS keeps a policy's ARN on update; moto issues a new one, so point the alarm at it again.
    [salarm] = cw.describe_alarms(AlarmNames=[f"{ENDPOINT}-surge"])["MetricAlarms"]
    cw.put_metric_alarm(**{k: salarm[k] for k in keep if k != "AlarmActions"}, EvaluationPeriods=salarm["EvaluationPeriods"],
                        DatapointsToAlarm=salarm["DatapointsToAlarm"], AlarmActions=[arn])
    rc, issues = _drift(tmp_path, capsys)
    msgs = [i["message"] for i in issues]
    want = ref_plan.alarms.scale_in_evaluation_periods
    assert rc == 1 and want == 30
    alarm = f"alarm {ENDPOINT}-scale-in (for {ENDPOINT}-scale-in)"
    assert any(m.startswith(f"{alarm} EvaluationPeriods is 3, plan says 30 (plan scale-in window") for m in msgs), msgs
    assert any(m.startswith(f"{alarm} DatapointsToAlarm is 3, plan says 30 (every one of the 30 periods must breach")
               for m in msgs), msgs
    assert any(f"{ENDPOINT}-surge adds PercentChangeInCapacity [10] (at least 9), plan says PercentChangeInCapacity [291]" in m
               for m in msgs), msgs
    assert len(msgs) == 3, msgs


def test_identity_reads_the_allTraffic_variant_not_the_first(deployed):
    # A second variant listed first (as during a manual canary) must not be taken for the deployed one.
    sm = deployed.client("sagemaker")
    sm.create_model(ModelName=f"{ENDPOINT}-canary", ExecutionRoleArn="arn:aws:iam::123456789012:role/sm",
                    PrimaryContainer={"Image": OTHER_IMAGE})
    model = sm.describe_endpoint_config(
        EndpointConfigName=sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"])["ProductionVariants"][0]["ModelName"]
    sm.create_endpoint_config(
        EndpointConfigName=f"{ENDPOINT}-two",
        ProductionVariants=[
            {"VariantName": "Canary", "ModelName": f"{ENDPOINT}-canary", "InitialInstanceCount": 1,
             "InstanceType": "ml.c5.xlarge", "InitialVariantWeight": 0.1},
            {"VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1,
             "InstanceType": INSTANCE, "InitialVariantWeight": 0.9},
        ],
    )
    sm.delete_endpoint(EndpointName=ENDPOINT)
    sm.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-two")
    ident = aws.endpoint_identity(deployed, ENDPOINT)
    assert (ident.instance_type, ident.digest, ident.model) == (INSTANCE, DIGEST, model)


def test_stack_file_goes_through_the_stack_parser(deployed, tmp_path, capsys, model_config):
    path = tmp_path / f"Pulumi.{STACK}.yaml"
    write_model_entry(path, "kokoro-82m", model_config)
    path.write_text(path.read_text() + "  speech-endpoints:allow_config_mismach: true\n")
    capsys.readouterr()
    rc = main(["drift", "--stack", STACK, "--stack-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    # The program's parser: a key it does not read is warned about (once, with the close match), not fatal.
    assert rc == 0 and len(err) == 1, err
    assert err[0] == ("warning: speech-endpoints:allow_config_mismach: not a key this project reads, ignored (if you "
                      "meant speech-endpoints:allow_config_mismatch, rename it)")
