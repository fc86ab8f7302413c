"""The program under Pulumi's mocks (``@pulumi.runtime.test``): resources and values of the dev
stack, equal to what ``bench plan`` computes from the same artifacts."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import pulumi
import pytest

from bench.cli.main import main as bench_main
from speech.deploy.provenance import TAG_DOC_SHA, TAG_MODEL, TAG_ORIGIN, document_sha256, parse_document
from speech.files import load_artifact
from speech.infra.preview import install_mocks, stack_config_values
from speech.infra.program import define_stack, main
from speech.infra.stack_config import load_stack_config
from speech.schema.artifacts import canonical_sha256
from speech.schema.plan_artifacts import PlanArtifact

ROOT = Path(__file__).resolve().parents[3]
DEV_STACK = ROOT / "Pulumi.dev.yaml"
QMAX_REF = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL_REF = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"

SM = "aws:sagemaker"


@pytest.fixture(scope="module")
def bench_plan(tmp_path_factory) -> PlanArtifact:
    """bench plan's own code path on the reference artifacts with the dev stack's inputs."""
    out = tmp_path_factory.mktemp("bench")
    rc = bench_main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "5000",
                     "--trough-rps", "10", "--slo-ms", "3000", "--surge-ratio", "1.25", "--out", str(out), "--json"])
    assert rc == 0
    return load_artifact(out / "plan-kokoro-82m.json", PlanArtifact)


@pytest.fixture(scope="module")
def dev_run():
    """Run the dev stack once under mocks; returns (mocks, resolved outputs)."""
    mocks, _ = install_mocks("dev", stack_config_values(DEV_STACK), region="us-east-1")
    seen: dict = {}

    @pulumi.runtime.test
    def program():
        outputs = define_stack(load_stack_config())
        # Checked inside apply: this only runs because the Output is returned.
        def check(out):
            seen.update(out)
            k = out["endpoints"]["kokoro-82m"]
            assert k["name"] == "dev-kokoro-82m"
            assert k["arn"].endswith("dev-kokoro-82m")
            assert out["scaling"]["kokoro-82m"]["enabled"] is True
        return pulumi.Output.all(**outputs).apply(check)

    program()
    assert seen, "outputs never resolved"
    return mocks, seen


def _one(mocks, type_: str, name: str | None = None) -> dict:
    hits = [(k, v) for k, v in mocks.registered.items() if k[0] == type_ and (name is None or k[1] == name)]
    assert len(hits) == 1, (type_, name, [k for k, _ in hits])
    return hits[0][1]


def test_reference_numbers_reach_the_resources(dev_run):
    mocks, _ = dev_run
    target = _one(mocks, "aws:appautoscaling/target:Target")
    assert target["resourceId"] == "endpoint/dev-kokoro-82m/variant/AllTraffic"
    assert target["serviceNamespace"] == "sagemaker"
    assert target["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["minCapacity"], target["maxCapacity"]) == (1, 293)  # 5000 rps / 17.08 (the 99.5 % SLO-share rate)

    out = _one(mocks, "aws:appautoscaling/policy:Policy", "kokoro-82m-scale-out")
    tt = out["targetTrackingScalingPolicyConfiguration"]
    assert out["policyType"] == "TargetTrackingScaling"
    assert tt["targetValue"] == 15.9904 and tt["disableScaleIn"] is True and tt["scaleOutCooldown"] == 30
    # The high-resolution (10 s) predefined metric: the reaction bound assumes a 10 s period.
    assert tt["predefinedMetricSpecification"]["predefinedMetricType"] == "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    assert "customizedMetricSpecification" not in tt

    scale_in = _one(mocks, "aws:appautoscaling/policy:Policy", "kokoro-82m-scale-in")["stepScalingPolicyConfiguration"]
    assert scale_in["cooldown"] == 960
    # A sixth of the fleet per step (PercentChangeInCapacity), at least one instance.
    assert [s["scalingAdjustment"] for s in scale_in["stepAdjustments"]] == [-16]
    assert scale_in["adjustmentType"] == "PercentChangeInCapacity" and scale_in["minAdjustmentMagnitude"] == 1
    alarm = _one(mocks, "aws:cloudwatch/metricAlarm:MetricAlarm", "kokoro-82m-scale-in-alarm")
    assert alarm["threshold"] == 10.6602 and alarm["comparisonOperator"] == "LessThanOrEqualToThreshold"
    assert alarm["period"] == 10 and alarm["evaluationPeriods"] == 30

    surge = _one(mocks, "aws:appautoscaling/policy:Policy", "kokoro-82m-surge")["stepScalingPolicyConfiguration"]
    assert surge["adjustmentType"] == "PercentChangeInCapacity"
    assert surge["stepAdjustments"][0]["scalingAdjustment"] == 291  # 1.25 x 50 / 15.9904 = 3.909
    assert surge["minAdjustmentMagnitude"] >= 2
    assert _one(mocks, "aws:cloudwatch/metricAlarm:MetricAlarm", "kokoro-82m-surge-alarm")["threshold"] == 50.0

    model = _one(mocks, f"{SM}/model:Model")["primaryContainer"]
    assert model["environment"]["QUEUE_MAX_DEPTH"] == "50" and model["environment"]["SLO_MS"] == "3000"
    assert model["image"].endswith("@sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced")
    assert re.fullmatch(r"s3://kokoro-82m-weights/weights/kokoro-82m/[0-9a-f]{12}/",
                        model["modelDataSource"]["s3DataSources"][0]["s3Uri"])
    # The weights layout decides the backend, never the image's default: the upstream checkpoint, torch.
    assert model["environment"]["BACKEND"] == "torch" and model["environment"]["MODEL_DIR"] == "/opt/ml/model"
    assert model["environment"]["IMAGE_DIGEST"] == "sha256:8b1b96bc4dc0b30ddd84d8fe37af7c490937333c44a9f8f7d77b918c3d7eaced"
    variant = _one(mocks, f"{SM}/endpointConfiguration:EndpointConfiguration")["productionVariants"][0]
    assert (variant["variantName"], variant["instanceType"], variant["initialInstanceCount"]) == ("AllTraffic", "ml.g5.xlarge", 1)
    assert variant["routingConfigs"] == [{"routingStrategy": "LEAST_OUTSTANDING_REQUESTS"}]
    # Reference start-up (container_started -> ready) 7.535 s: 3 x 7.535 + 60 = 82.6 -> 83 s.
    assert variant["containerStartupHealthCheckTimeoutInSeconds"] == 83
    endpoint = _one(mocks, f"{SM}/endpoint:Endpoint")
    assert endpoint["name"] == "dev-kokoro-82m"
    bg = endpoint["deploymentConfig"]["blueGreenUpdatePolicy"]["trafficRoutingConfiguration"]
    assert bg["type"] == "CANARY"
    assert len(endpoint["deploymentConfig"]["autoRollbackConfiguration"]["alarms"]) == 2

    # The slowdown alarm: service time above the measured uncontended p95 65.4 ms + 50 %.
    slow = _one(mocks, "aws:cloudwatch/metricAlarm:MetricAlarm", "kokoro-82m-obs-slowdown")
    assert slow["threshold"] == 98.1 and slow["metricName"] == "ServiceTimep95"


def test_program_numbers_equal_bench_plan(dev_run, bench_plan):
    mocks, outputs = dev_run
    k = outputs["scaling"]["kokoro-82m"]
    assert (k["target"], k["scale_in_threshold"]) == (bench_plan.thresholds.scaling_target_value,
                                                      bench_plan.thresholds.scale_in_threshold)
    assert k["cooldowns"] == bench_plan.cooldowns.model_dump(include={"scale_out_s", "scale_in_s"})
    assert (k["min"], k["max"]) == (bench_plan.fleet.min_instances, bench_plan.fleet.max_instances)
    assert k["q_max"] == bench_plan.q_max
    assert k["verdict"] == bench_plan.verdict == "warn"
    assert k["plan_sha256"] == canonical_sha256(bench_plan)
    target = _one(mocks, "aws:appautoscaling/target:Target")
    assert target["maxCapacity"] == bench_plan.fleet.max_instances
    tt = _one(mocks, "aws:appautoscaling/policy:Policy", "kokoro-82m-scale-out")["targetTrackingScalingPolicyConfiguration"]
    assert tt["targetValue"] == bench_plan.thresholds.scaling_target_value
    alarm = _one(mocks, "aws:cloudwatch/metricAlarm:MetricAlarm", "kokoro-82m-scale-in-alarm")
    assert alarm["threshold"] == bench_plan.thresholds.scale_in_threshold
    assert alarm["evaluationPeriods"] == bench_plan.alarms.scale_in_evaluation_periods


def test_provenance_tags_and_document(dev_run, bench_plan):
    mocks, _ = dev_run
    doc = _one(mocks, "aws:s3/bucketObjectv2:BucketObjectv2", "kokoro-82m-provenance")
    assert doc["key"] == "provenance/kokoro-82m/g5xlarge-8b1b96bc.json"
    parsed = parse_document(doc["content"], "provenance object")
    assert parsed.model == "kokoro-82m" and parsed.measurements.qmax.q_max == 50
    for type_ in (f"{SM}/endpoint:Endpoint", "aws:appautoscaling/target:Target", f"{SM}/model:Model"):
        tags = _one(mocks, type_)["tags"]
        assert tags[TAG_MODEL] == "kokoro-82m" and tags[TAG_ORIGIN] == "reference"
        assert tags[TAG_DOC_SHA] == document_sha256(doc["content"])
        assert all(len(v) <= 256 for v in tags.values())


def test_foundation_is_locked_down(dev_run):
    mocks, _ = dev_run
    pab = _one(mocks, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    sse = _one(mocks, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    assert _one(mocks, "aws:s3/bucketVersioning:BucketVersioning")["versioningConfiguration"]["status"] == "Enabled"
    # The dev stack names an existing image: no repository of its own, pull rights on that one only.
    assert not [k for k in mocks.registered if k[0] == "aws:ecr/repository:Repository"]
    assert _one(mocks, "aws:s3/bucket:Bucket")["forceDestroy"] is True
    policy = json.loads(_one(mocks, "aws:iam/rolePolicy:RolePolicy", "kokoro-82m-execution-policy")["policy"])
    reads = next(s for s in policy["Statement"] if s["Sid"] == "ReadOwnWeights")
    assert reads["Resource"] == ["arn:aws:s3:::kokoro-82m-weights/weights/kokoro-82m/*"]
    pull = next(s for s in policy["Statement"] if s["Sid"] == "PullOwnImage")
    assert pull["Resource"] == ["arn:aws:ecr:us-east-1:123456789012:repository/kokoro-82m"]


def test_weight_cache_runs_the_shipped_script_before_the_model(dev_run):
    mocks, _ = dev_run
    project = _one(mocks, "aws:codebuild/project:Project")
    spec = json.loads(project["source"]["buildspec"])
    cmds = spec["phases"]["build"]["commands"]
    assert cmds[0] == "sh weight_cache.sh" and cmds[1].startswith("aws s3 sync weights ")
    # The dev stack's upstream checkpoint: huggingface_hub in the build, the pinned commit and digests.
    assert spec["env"]["variables"]["WEIGHTS_KIND"] == "hf"
    assert "huggingface_hub==2.4.0" in spec["env"]["variables"]["WEIGHTS_PACKAGES"].split()
    assert spec["env"]["variables"]["HF_REVISION"] == "f3ff3571791e39611d31c381e3a41a3af07b4987"
    env = {v["name"]: v["value"] for v in project["environment"]["environmentVariables"]}
    model_uri = _one(mocks, f"{SM}/model:Model")["primaryContainer"]["modelDataSource"]["s3DataSources"][0]["s3Uri"]
    # The build syncs to exactly the prefix the Model reads.
    assert model_uri == f"s3://{env['WEIGHTS_BUCKET']}/{env['WEIGHTS_PREFIX']}/"
    source = _one(mocks, "aws:s3/bucketObjectv2:BucketObjectv2", "kokoro-82m-cache-source")
    assert project["source"]["type"] == "S3" and project["source"]["location"] == f"kokoro-82m-weights/{source['key']}"
    # The object is the archive's exact bytes (what `speech rehearse` unpacks), its sha256 beside it.
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(source["contentBase64"]))) as zf:
        assert set(zf.namelist()) >= {"weight_cache.sh", "weight_fetch.py", "container/cli.py", "container/backends/onnx.py",
                                       "container/voices.py"}
        assert zf.read("weight_cache.sh") == (ROOT / "speech/deploy/weight_cache.sh").read_bytes()
    assert source["metadata"]["sha256"] == hashlib.sha256(base64.b64decode(source["contentBase64"])).hexdigest()
    run = _one(mocks, "aws:lambda/invocation:Invocation", "kokoro-82m-cache-run")
    assert run["triggers"]["cache_key"] in env["WEIGHTS_PREFIX"]


def test_config_error_ends_the_program_cleanly(kokoro_entry, write_stack):
    kokoro_entry["plan"]["surge_ratio"] = 1.7
    path = write_stack({"kokoro-82m": kokoro_entry})
    install_mocks("t", stack_config_values(path))

    @pulumi.runtime.test
    def program():
        main()

    with pytest.raises(pulumi.RunError) as err:
        program()
    assert str(err.value).startswith("ConfigError: speech-endpoints:models.kokoro-82m.plan.surge_ratio: ")


def test_dashboard_shows_thresholds_slo_and_pressure(dev_run):
    mocks, _ = dev_run
    body = json.loads(_one(mocks, "aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])
    widgets = {w["properties"]["title"]: w["properties"] for w in body["widgets"]}
    lines = {a["value"] for a in widgets["ConcurrentRequestsPerModel vs target and scale-in threshold"]["annotations"]["horizontal"]}
    assert {15.9904, 10.6602, 50.0} <= lines
    assert widgets["TTFAB p95 vs SLO (ms)"]["annotations"]["horizontal"][0]["value"] == 3000.0
    metrics = json.dumps([w["metrics"] for w in widgets.values()])
    assert "SpeechEndpoints/Container" in metrics and "PressureIndex" in metrics and "Invocation5XXErrors" in metrics
    assert "GPUUtilization" in metrics and "GPUMemoryUtilization" in metrics and "ServiceTimep95" in metrics
    assert all(w["region"] == "us-east-1" for w in widgets.values())


def test_alarm_topic_key_admits_cloudwatch(dev_run):
    """CloudWatch publishes to an SSE-KMS topic only with kms:Decrypt + kms:GenerateDataKey* on its
    key; the AWS-managed alias/aws/sns cannot grant that, so the topic has its own key."""
    mocks, _ = dev_run
    topic = _one(mocks, "aws:sns/topic:Topic", "alarms-topic")
    key = _one(mocks, "aws:kms/key:Key", "alarms-key")
    assert topic["kmsMasterKeyId"] != "alias/aws/sns" and topic["kmsMasterKeyId"].startswith("arn:aws:kms:")
    assert key["enableKeyRotation"] is True
    statements = json.loads(key["policy"])["Statement"]
    cw = [s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert len(cw) == 1 and set(cw[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    # ... and the account keeps administering its key (without it no one could).
    assert any(s["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"} for s in statements)


def test_rollback_alarm_does_not_count_the_designed_503(dev_run):
    """A surge during an update answers 503 queue_saturated by design; the rollback alarm counts
    Invocation5XXErrors less those rejections (both summed per minute)."""
    from container import telemetry

    mocks, _ = dev_run
    alarm = _one(mocks, "aws:cloudwatch/metricAlarm:MetricAlarm", "kokoro-82m-obs-errors-5xx")
    queries = {q["id"]: q for q in alarm["metricQueries"]}
    assert queries["e5"]["metric"]["metricName"] == "Invocation5XXErrors"
    assert queries["rej"]["metric"]["metricName"] == telemetry.REJECTED
    assert queries["rej"]["metric"]["namespace"] == telemetry.NAMESPACE
    assert queries["failed"]["returnData"] is True and "FILL(e5, 0) - FILL(rej, 0)" in queries["failed"]["expression"]


def test_every_model_has_a_metrics_read_policy_for_the_promql_endpoint():
    """Issue 46 item 8: SageMaker's detailed observability scrapes the container's /metrics (port 8080,
    every 60 s) into CloudWatch, queried through its PromQL endpoint, which needs
    cloudwatch:QueryMetrics besides GetMetricData and ListMetrics. Each model gets a policy with
    exactly those, which the pack's wildcard rule accepts (CloudWatch scopes none by resource)."""
    import json as _json

    from speech.deploy.iam_check import wildcard_findings
    from speech.infra.preview import run_preview

    dev = run_preview(ROOT / "Pulumi.dev.yaml", "dev")
    policy = dev.named("kokoro-82m-obs-metrics-read")
    assert policy.inputs["name"] == "dev-kokoro-82m-metrics-read"
    doc = _json.loads(policy.inputs["policy"])
    [statement] = doc["Statement"]
    assert sorted(statement["Action"]) == ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:QueryMetrics"]
    assert statement["Resource"] == "*" and wildcard_findings(doc) == []


def test_detailed_observability_is_left_to_the_services_default_only_while_pulumi_aws_cannot_set_it():
    """The stack cannot set MetricsConfig.EnableDetailedObservability explicitly: pulumi-aws's
    EndpointConfiguration has no metrics config (pulumi-aws-native's has, but moving the
    configuration to that type replaces it: a second fleet on every stack). Every configuration the
    program makes is new, and new ones default to True (botocore's sagemaker model, MetricsConfig).
    When an upgrade of pulumi-aws adds the field this fails: set it explicitly then."""
    import inspect

    import botocore.session
    import pulumi_aws as aws

    assert "metrics_config" not in inspect.signature(aws.sagemaker.EndpointConfigurationArgs.__init__).parameters
    doc = botocore.session.get_session().get_service_model("sagemaker").shape_for("MetricsConfig").members[
        "EnableDetailedObservability"].documentation
    assert "The default value for new endpoint configurations is <code>True</code>" in doc
    assert "/metrics</code> on port <code>8080</code>" in doc
