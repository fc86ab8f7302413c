"""hosting: components under Pulumi's mocks: the endpoint with managed instance scaling, the model as
an aws-native inference component sized by the copy plan, copy scaling from the copy plan (and the
scale-from-zero step only where the copy floor is 0), the gate, config errors, outputs, and the AWS
names checked against botocore's service models."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import botocore.session
import pytest

from speech.commands.preview import main as preview_main
from speech.deploy import scaling
from speech.deploy.provenance import parse_document
from speech.errors import ConfigError
from speech.infra.preview import run_preview
from speech.stack.read import parse_stack_config
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "Pulumi.components.yaml"
MODELS = "speech-endpoints:models"
T_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
T_IC = "aws-native:sagemaker:InferenceComponent"
T_TARGET = "aws:appautoscaling/target:Target"
T_POLICY = "aws:appautoscaling/policy:Policy"
T_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
OTHER_DIGEST = "sha256:" + "1" * 64


def example_entry() -> dict:
    return copy.deepcopy(embedded_config(EXAMPLE)[MODELS]["kokoro-82m"])


def copy_plan_of(entry: dict, stack: str = "t"):
    from speech.deploy.gate import copy_plan_of as plan_of

    cfg = parse_stack_config({"models": {"kokoro-82m": entry}})
    return plan_of("kokoro-82m", cfg.models["kokoro-82m"])


@pytest.fixture(scope="module")
def example():
    return run_preview(EXAMPLE)


def test_example_deploys_endpoint_with_managed_instance_scaling_and_no_model_on_the_variant(example):
    plan = copy_plan_of(example_entry())
    (cfg,) = example.of_type(T_CONFIG)
    (variant,) = cfg.inputs["productionVariants"]
    assert "modelName" not in variant
    assert cfg.inputs["executionRoleArn"].endswith(":role/kokoro-82m-execution")
    assert variant["managedInstanceScaling"] == {"status": "ENABLED", "minInstanceCount": plan.instances.min_instances,
                                                 "maxInstanceCount": plan.instances.max_instances}
    assert plan.instances.min_instances == 0  # min_copies 0: instances may go to zero too
    assert variant["initialInstanceCount"] == 1  # SageMaker requires at least one to start
    assert variant["routingConfigs"] == [{"routingStrategy": "LEAST_OUTSTANDING_REQUESTS"}]
    (endpoint,) = example.of_type("aws:sagemaker/endpoint:Endpoint")
    assert "deploymentConfig" not in endpoint.inputs  # the component's rolling update owns rollouts
    # No variant scaling and no guard for it on a components endpoint.
    assert not [t for t in example.of_type(T_TARGET) if t.inputs["scalableDimension"] == scaling.SCALABLE_DIMENSION]
    assert not [r for r in example.resources if "scaling-guard" in r.name]


def test_example_inference_component_is_sized_by_the_copy_plan(example):
    plan = copy_plan_of(example_entry())
    (ic,) = example.of_type(T_IC)
    spec = ic.inputs["specification"]
    assert ic.inputs["inferenceComponentName"] == ic.inputs["endpointName"] == "components-kokoro-82m"
    assert ic.inputs["variantName"] == "AllTraffic"
    model = example.named("kokoro-82m-model")
    assert spec["modelName"] == "kokoro-82m-model" and model.inputs["primaryContainer"]["environment"][
        "QUEUE_MAX_DEPTH"] == str(plan.queue_max_depth)
    # Footprint 1536 MiB accelerator / 3072 MiB host / 1 core, + 10 %: one whole A10G, 3380 MiB, 1.25 cores.
    assert spec["computeResourceRequirements"] == {"numberOfAcceleratorDevicesRequired": 1.0,
                                                   "minMemoryRequiredInMb": 3380, "numberOfCpuCoresRequired": 1.25}
    assert spec["computeResourceRequirements"]["minMemoryRequiredInMb"] == plan.compute.min_memory_required_in_mb
    assert ic.inputs["runtimeConfig"] == {"copyCount": 1}
    assert ic.delete_before_replace  # a fixed name: the old component goes before the new one comes
    assert spec["startupParameters"]["modelDataDownloadTimeoutInSeconds"] == 600
    rollout = ic.inputs["deploymentConfig"]
    assert rollout["rollingUpdatePolicy"]["maximumBatchSize"] == {"type": "CAPACITY_PERCENT", "value": 50}
    assert {a["alarmName"] for a in rollout["autoRollbackConfiguration"]["alarms"]} == {
        "components-kokoro-82m-5xx", "components-kokoro-82m-ttfab-slo"}
    tags = {t["key"]: t["value"] for t in ic.inputs["tags"]}
    assert tags["speech:model"] == "kokoro-82m" and tags["speech:origin"] == "reference"
    # The aws-native provider is explicit and in pulumi-aws's region.
    (provider,) = example.of_type("pulumi:providers:aws-native")
    assert provider.inputs["region"] == "us-east-1"


def test_example_copy_scaling_equals_the_copy_plan(example):
    plan = copy_plan_of(example_entry())
    (target,) = [t for t in example.of_type(T_TARGET) if t.inputs["scalableDimension"] == scaling.COMPONENT_SCALABLE_DIMENSION]
    assert target.inputs["resourceId"] == "inference-component/components-kokoro-82m"
    assert target.inputs["serviceNamespace"] == "sagemaker"
    assert (target.inputs["minCapacity"], target.inputs["maxCapacity"]) == (0, plan.copies.max_copies)
    policies = {p.name: p.inputs for p in example.of_type(T_POLICY)}
    out = policies["kokoro-82m-copies-scale-out"]["targetTrackingScalingPolicyConfiguration"]
    assert out["predefinedMetricSpecification"] == {
        "predefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}
    assert out["targetValue"] == plan.scaling.target_value == 15.9904  # sized for the SLO share (docs/plan.md)
    assert (out["scaleOutCooldown"], out["scaleInCooldown"]) == (plan.scaling.scale_out_cooldown_s,
                                                                 plan.scaling.scale_in_cooldown_s)
    assert out["disableScaleIn"] is True
    scale_in = policies["kokoro-82m-copies-scale-in"]["stepScalingPolicyConfiguration"]
    assert scale_in["cooldown"] == plan.scaling.scale_in_cooldown_s
    alarms = {a.name: a.inputs for a in example.of_type(T_ALARM)}
    low = alarms["kokoro-82m-copies-scale-in-alarm"]
    # Copy floor 0: metric math, so a minute with a refused request (a pending wake) never reads as idle.
    dims = {"InferenceComponentName": "components-kokoro-82m"}
    assert low["threshold"] == plan.scaling.scale_in_threshold and "metricName" not in low
    assert low["metricQueries"] == [
        {"id": "low", "returnData": False, "metric": {"namespace": "AWS/SageMaker", "metricName": "ConcurrentRequestsPerCopy",
                                                      "dimensions": dims, "stat": "Maximum", "period": 60}},
        *[{"id": qid, "returnData": False, "metric": {"namespace": "AWS/SageMaker", "metricName": metric,
                                                       "dimensions": dims, "stat": "Sum", "period": 60}}
          for qid, metric in (("inv", "Invocations"), ("ipc", "InvocationsPerCopy"),
                              ("nocap", "NoCapacityInvocationFailures"))],
        {"id": "guarded", "returnData": True, "expression": scaling.GUARD_EXPRESSION.format(value=f"{plan.q_max_per_copy:g}")}]
    # Missing data breaches (an idle range removes the copy, never INSUFFICIENT_DATA); the window is
    # the plan's 5 minutes plus the woken copy's start (261 s: 5 minutes).
    assert (low["treatMissingData"], low["evaluationPeriods"], low["datapointsToAlarm"]) == ("breaching", 10, 10)
    # Scale to zero: the documented step policy on NoCapacityInvocationFailures, cooldown = the
    # measured instance start (from zero instances a copy waits for one), not the guide's 60 s.
    wake = policies["kokoro-82m-copies-wake"]["stepScalingPolicyConfiguration"]
    assert wake["adjustmentType"] == "ChangeInCapacity" and wake["cooldown"] == 261
    assert wake["stepAdjustments"] == [{"metricIntervalLowerBound": "0", "scalingAdjustment": 1}]
    alarm = alarms["kokoro-82m-copies-wake-alarm"]
    assert (alarm["metricName"], alarm["statistic"], alarm["period"], alarm["threshold"]) == (
        "NoCapacityInvocationFailures", "Sum", 60, 1.0)
    (action,) = alarm["alarmActions"]
    assert action.endswith(":policy/components-kokoro-82m-wake")


def test_example_outputs_name_the_component_and_count_copies(example):
    ep = example.outputs["endpoints"]["kokoro-82m"]
    assert ep["hosting"] == "components" and ep["inference_component"] == "components-kokoro-82m"
    sc = example.outputs["scaling"]["kokoro-82m"]
    plan = copy_plan_of(example_entry())
    assert sc["dimension"] == scaling.COMPONENT_SCALABLE_DIMENSION
    assert (sc["min"], sc["max"], sc["target"], sc["q_max"]) == (0, plan.copies.max_copies, 15.9904, 50)
    assert sc["instances"] == {"min": 0, "max": plan.instances.max_instances}


def test_preview_cli_shows_the_component_and_its_copy_scaling(capsys):
    assert preview_main(["--stack-dir", str(EXAMPLE.parent), "--stack", "components"]) == 0
    out = capsys.readouterr().out
    assert "aws-native:sagemaker:InferenceComponent" in out and "managedInstanceScaling=" in out
    assert "inference component components-kokoro-82m: Q_max 50 per copy" in out
    assert "copies 0..293, instances 0..293 (managed instance scaling)" in out


def test_copy_floor_one_has_no_wake_policy(write_stack):
    entry = example_entry()
    entry["components"]["min_copies"] = 1
    result = run_preview(write_stack({"kokoro-82m": entry}))
    names = {p.name for p in result.of_type(T_POLICY)} | {a.name for a in result.of_type(T_ALARM)}
    assert "kokoro-82m-copies-scale-out" in names and not [n for n in names if "wake" in n]
    (target,) = [t for t in result.of_type(T_TARGET)]
    assert target.inputs["minCapacity"] == 1
    (cfg,) = result.of_type(T_CONFIG)
    assert cfg.inputs["productionVariants"][0]["managedInstanceScaling"]["minInstanceCount"] == 1


def test_gate_closes_on_a_copy_measured_on_another_image(write_stack):
    entry = example_entry()
    fp = entry["measurements"]["tcopy"]["fingerprint"]
    fp["image_digest"], fp["slug"] = OTHER_DIGEST, "g5xlarge-11111111"
    result = run_preview(write_stack({"kokoro-82m": entry}))
    assert result.outputs["scaling"]["kokoro-82m"]["reason_code"] == "copy_fingerprint_mismatch"
    assert not result.of_type(T_TARGET) and not result.of_type(T_POLICY)
    # Without scaling the instances stay at one (min == max), the component at its start.
    (cfg,) = result.of_type(T_CONFIG)
    mis = cfg.inputs["productionVariants"][0]["managedInstanceScaling"]
    assert (mis["minInstanceCount"], mis["maxInstanceCount"]) == (1, 1)
    assert any("no copy scaling" in w and "bench tcopy" in w for w in result.warnings)


def test_provenance_document_carries_the_copy_inputs(example):
    doc = parse_document(example.named("kokoro-82m-provenance").inputs["content"], "doc")
    assert doc.hosting == "components" and doc.components is not None and doc.components.min_copies == 0
    assert doc.measurements.tcopy is not None and doc.measurements.tcopy.provenance.origin == "assumption"


@pytest.mark.parametrize("mutate, key, words", [
    (lambda e: e["measurements"].pop("tcopy"), "speech-endpoints:models.kokoro-82m", "bench tcopy"),
    (lambda e: e.update(hosting="realtime"), "speech-endpoints:models.kokoro-82m", "hosting: components"),
    (lambda e: e["components"].update(min_copies=-1), "speech-endpoints:models.kokoro-82m.components.min_copies",
     "greater than or equal to 0"),
    (lambda e: e.update(instance_type="ml.g4dn.4xlarge"), "speech-endpoints:models.kokoro-82m", "not in the instance table"),
    # Not a type SageMaker hosts at all: refused by the config before anything is planned.
    (lambda e: e.update(instance_type="ml.g5.9xlarge"), "speech-endpoints:models.kokoro-82m.instance_type",
     "not an instance type a SageMaker endpoint runs"),
    # A GPU copy on a CPU instance: not even the first copy could be placed.
    (lambda e: e.update(instance_type="ml.c6i.xlarge"), "speech-endpoints:models.kokoro-82m.instance_type",
     "has no accelerator"),
])
def test_config_mistakes_are_one_error_naming_the_key(mutate, key, words):
    entry = example_entry()
    mutate(entry)
    with pytest.raises(ConfigError) as err:
        from speech.deploy.gate import plan_model

        cfg = parse_stack_config({"models": {"kokoro-82m": entry}})
        plan_model("kokoro-82m", cfg.models["kokoro-82m"], endpoint="t-kokoro-82m", allow_config_mismatch=True)
    assert str(err.value).startswith(key) and words in str(err.value)


def test_aws_names_are_the_service_models():
    session = botocore.session.get_session()
    aas = session.get_service_model("application-autoscaling")
    assert scaling.COMPONENT_SCALABLE_DIMENSION in aas.shape_for("ScalableDimension").enum
    assert scaling.COMPONENT_SCALE_OUT_METRIC_TYPE in aas.shape_for("MetricType").enum
    doc = aas.operation_model("RegisterScalableTarget").input_shape.members["ResourceId"].documentation
    assert "inference-component/my-inference-component" in doc
    assert scaling.component_resource_id("my-inference-component") == "inference-component/my-inference-component"
    sm = session.get_service_model("sagemaker")
    assert scaling.INSTANCE_SCALING_ENABLED in sm.shape_for("ManagedInstanceScalingStatus").enum
    assert sm.shape_for("ManagedInstanceScalingMinInstanceCount").metadata["min"] == 0


def test_component_args_exist_in_the_installed_aws_native():
    import inspect

    import pulumi_aws_native.sagemaker as sm

    def params(cls):
        return set(inspect.signature(cls.__init__).parameters)

    assert {"inference_component_name", "endpoint_name", "variant_name", "specification", "runtime_config",
            "deployment_config", "tags"} <= params(sm.InferenceComponentArgs)
    assert {"model_name", "compute_resource_requirements", "startup_parameters"} <= params(
        sm.InferenceComponentSpecificationArgs)
    assert {"min_memory_required_in_mb", "number_of_accelerator_devices_required",
            "number_of_cpu_cores_required"} <= params(sm.InferenceComponentComputeResourceRequirementsArgs)
    assert json.dumps(sm.InferenceComponentCapacitySizeType.CAPACITY_PERCENT) == '"CAPACITY_PERCENT"'


def test_each_copy_is_told_the_cores_its_component_reserves(example):
    """The container reads its usable cores from CPU_CORES: the component's NumberOfCpuCoresRequired,
    not the host's count that every packed copy would otherwise use."""
    (ic,) = example.of_type(T_IC)
    reserved = ic.inputs["specification"]["computeResourceRequirements"]["numberOfCpuCoresRequired"]
    env = example.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]
    assert env["CPU_CORES"] == f"{reserved:g}" == "1.25"


def test_a_variant_leaves_its_cores_to_the_instance():
    dev = run_preview(ROOT / "Pulumi.dev.yaml", "dev")
    assert "CPU_CORES" not in dev.named("kokoro-82m-model").inputs["primaryContainer"]["environment"]


def _log_resources(result) -> list[str]:
    (policy,) = [r for r in result.resources if r.name == "kokoro-82m-execution-policy"]
    (logs,) = [s for s in json.loads(policy.inputs["policy"])["Statement"] if s["Sid"] == "OwnLogs"]
    return logs["Resource"]


def test_the_execution_role_may_write_the_component_log_group(example):
    """A component's containers log to /aws/sagemaker/InferenceComponents/<component>: without that
    grant they log nothing, so their EMF metrics (TTFAB, service time, rejections) never exist."""
    group = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/InferenceComponents/components-kokoro-82m"
    assert {group, f"{group}:*"} <= set(_log_resources(example))
    assert example.outputs["endpoints"]["kokoro-82m"]["inference_component"] == "components-kokoro-82m"
    # Only a components stack gets it: the real-time dev stack writes its endpoint's group alone.
    dev = run_preview(ROOT / "Pulumi.dev.yaml")
    assert not any("InferenceComponents" in r for r in _log_resources(dev))


def test_alarms_on_container_metrics_name_the_log_group_they_depend_on(example):
    by_name = {a.name: a.inputs for a in example.of_type(T_ALARM)}
    from container.telemetry import NAMESPACE

    emf = sorted(n for n, a in by_name.items() if NAMESPACE in json.dumps({k: a.get(k) for k in ("namespace", "metricQueries")}))
    assert emf == ["kokoro-82m-obs-errors-5xx", "kokoro-82m-obs-queue-saturated-rate", "kokoro-82m-obs-slowdown",
                   "kokoro-82m-obs-ttfab-slo"]
    for name in emf:
        assert "/aws/sagemaker/InferenceComponents/components-kokoro-82m" in by_name[name]["alarmDescription"], name
    for name, a in by_name.items():
        assert len(a["alarmDescription"]) <= 1024, name  # PutMetricAlarm's AlarmDescription limit
