"""`python -m bench capacity`: the evaluation from a fleet file, bad input, and a fleet read from an
inference-component endpoint. moto has no inference components, so the endpoint is a recorded
set of responses served by botocore's Stubber, which validates every request and response against
the real sagemaker and application-autoscaling service models."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

import bench.aws.client
from bench.aws.fleet_read import read_fleet
from bench.cli.main import main
from bench.errors import TargetError
from speech.plan.capacity import CapacityEvaluation, evaluate_capacity
from speech.plan.fleet import FleetState

T = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
ACCOUNT = "123456789012"
REGION = "eu-west-1"
ENDPOINT = "prod-kokoro"
ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}"

FLEET = {
    "kind": "fleet",
    "schema_version": 1,
    "instances": [
        {"name": "a", "instance_type": "ml.g5.12xlarge", "accelerator_memory_mib": 98304,
         "used_accelerator_memory_mib": 73728, "copies": {"kokoro-82m": 3}},
        {"name": "b", "instance_type": "ml.g5.12xlarge", "accelerator_memory_mib": 98304,
         "used_accelerator_memory_mib": 49152, "copies": {"kokoro-82m": 2}},
    ],
    "models": {"kokoro-82m": {"copy_memory_mib": 24576, "concurrency_per_copy": 37.5, "t_copy_s": 48.1,
                              "t_total_s": 320.2, "new_instance_type": "ml.g5.12xlarge",
                              "new_instance_accelerator_memory_mib": 98304}},
}  # fmt: skip


def write(tmp_path: Path, data: object, name: str = "fleet.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_human_report_shows_placement_serving_and_findings(tmp_path, capsys):
    fleet = write(tmp_path, FLEET)
    # 150 in flight = 4 copies: a has 1 device free, b has 2 -> a first (tightest), then b, b; 1 left
    assert main(["capacity", "--fleet", str(fleet), "--model", "kokoro-82m", "--delta-concurrency", "150"]) == 0
    out = capsys.readouterr().out
    for needle in ("4 copies of 24576 MiB", "hot-load", "new-instances", "48.1 s", "320.2 s", "WARN hot_load",
                   "1 new instance(s), 4 copies each", "verdict: warn"):
        assert needle in out, needle


def test_json_is_the_evaluation(tmp_path, capsys):
    fleet = write(tmp_path, FLEET)
    assert main(["capacity", "--fleet", str(fleet), "--model", "kokoro-82m", "--delta-concurrency", "150", "--json"]) == 0
    ev = CapacityEvaluation.model_validate_json(capsys.readouterr().out)
    assert [s.instance for s in ev.steps] == ["a", "b", "b"]
    assert (ev.hot_loadable, ev.copies_on_new_instances, ev.new_instances) == (3, 1, 1)


def test_copies_that_fit_nowhere_exit_1(tmp_path, capsys):
    data = json.loads(json.dumps(FLEET))
    data["models"]["kokoro-82m"]["copy_memory_mib"] = 200000
    fleet = write(tmp_path, data)
    assert main(["capacity", "--fleet", str(fleet), "--model", "kokoro-82m", "--delta-concurrency", "10", "--json"]) == 1
    assert CapacityEvaluation.model_validate_json(capsys.readouterr().out).unplaceable_copies == 1


@pytest.mark.parametrize(
    ("content", "argv_extra", "message"),
    [
        (None, [], "no such fleet file"),
        ('{"kind": "fleet",\n oops}', [], "invalid JSON at line 2"),
        ({"kind": "plan"}, [], "is a 'plan' file, expected a fleet file"),
        ({**FLEET, "instances": [{**FLEET["instances"][0], "used_accelerator_memory_mib": 1e6}]}, [],
         "exceeds its accelerator_memory_mib"),
        ({**FLEET, "models": {}}, [], "field models"),
        (FLEET, ["--model", "nope", "--delta-concurrency", "1"], "--model 'nope' is not in the fleet's models (kokoro-82m)"),
        (FLEET, ["--model", "kokoro-82m", "--delta-concurrency", "0"], "--delta-concurrency 0: outside the allowed range 0 < x"),
        (FLEET, ["--model", "kokoro-82m"], "pass both --model NAME and --delta-concurrency N"),
        (FLEET, ["--write-fleet", "x.json"], "--write-fleet and --copy-plan need --from-endpoint"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, argv_extra, message):
    path = tmp_path / "fleet.json" if content is None else write(tmp_path, content)
    argv = ["capacity", "--fleet", str(path), *argv_extra]
    if "--model" not in argv_extra and "--write-fleet" not in argv_extra:
        argv += ["--model", "kokoro-82m", "--delta-concurrency", "10"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_from_endpoint_needs_the_times(capsys):
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", "f.json"]) == 2
    assert "--from-endpoint needs --t-copy-s and --t-total-s" in capsys.readouterr().err


# --- reading an inference-component endpoint ------------------------------------------------------


class StubbedSession:
    """A boto3 session whose clients are real botocore clients with a Stubber attached."""

    def __init__(self) -> None:
        s = boto3.session.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
        self.clients = {name: s.client(name) for name in ("sagemaker", "application-autoscaling")}
        self.stubs = {name: Stubber(c) for name, c in self.clients.items()}
        for stub in self.stubs.values():
            stub.activate()

    def client(self, name: str):
        return self.clients[name]


def component(name: str, devices: float, copies: int) -> dict:
    return {
        "InferenceComponentName": name,
        "InferenceComponentArn": f"{ARN}:inference-component/{name}",
        "EndpointName": ENDPOINT,
        "EndpointArn": f"{ARN}:endpoint/{ENDPOINT}",
        "VariantName": "AllTraffic",
        "Specification": {
            "ModelName": f"{name}-model",
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": devices, "MinMemoryRequiredInMb": 2530, "NumberOfCpuCoresRequired": 1.25,
            },
        },
        "RuntimeConfig": {"DesiredCopyCount": copies, "CurrentCopyCount": copies},
        "CreationTime": T,
        "LastModifiedTime": T,
        "InferenceComponentStatus": "InService",
    }


def policy(name: str, target: float) -> dict:
    return {
        "PolicyARN": f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:scalingPolicy:x:resource/sagemaker/{name}",
        "PolicyName": f"{name}-copies",
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"inference-component/{name}",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": {
            "TargetValue": target,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"},
        },
        "CreationTime": T,
    }


def stub_endpoint(sess: StubbedSession, *, other_policy: bool = True, instances: int = 2) -> None:
    """The recorded responses of an endpoint with two g5.12xlarge instances hosting kokoro-82m (5 copies
    of 1 GPU) and another model (1 copy of 2 GPUs)."""
    sm, aas = sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]
    sm.add_response("describe_endpoint", {
        "EndpointName": ENDPOINT, "EndpointArn": f"{ARN}:endpoint/{ENDPOINT}", "EndpointConfigName": f"{ENDPOINT}-cfg",
        "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": instances, "DesiredInstanceCount": instances,
                                "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 4}}],
        "EndpointStatus": "InService", "CreationTime": T, "LastModifiedTime": T,
    }, {"EndpointName": ENDPOINT})
    sm.add_response("describe_endpoint_config", {
        "EndpointConfigName": f"{ENDPOINT}-cfg", "EndpointConfigArn": f"{ARN}:endpoint-config/{ENDPOINT}-cfg",
        "ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", "InitialInstanceCount": 1,
                                "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 4},
                                "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}],
        "CreationTime": T,
    }, {"EndpointConfigName": f"{ENDPOINT}-cfg"})
    summaries = [{k: c[k] for k in ("InferenceComponentName", "InferenceComponentArn", "EndpointName", "EndpointArn",
                                     "VariantName", "CreationTime", "LastModifiedTime", "InferenceComponentStatus")}
                 for c in (component("kokoro-82m", 1, 5), component("other", 2, 1))]
    sm.add_response("list_inference_components", {"InferenceComponents": summaries[:1], "NextToken": "p2"},
                    {"EndpointNameEquals": ENDPOINT})
    sm.add_response("list_inference_components", {"InferenceComponents": summaries[1:]},
                    {"EndpointNameEquals": ENDPOINT, "NextToken": "p2"})
    sm.add_response("describe_inference_component", component("kokoro-82m", 1, 5), {"InferenceComponentName": "kokoro-82m"})
    params = {"ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    aas.add_response("describe_scaling_policies", {"ScalingPolicies": [policy("kokoro-82m", 37.5)]},
                     {**params, "ResourceId": "inference-component/kokoro-82m"})
    sm.add_response("describe_inference_component", component("other", 2, 1), {"InferenceComponentName": "other"})
    aas.add_response("describe_scaling_policies", {"ScalingPolicies": [policy("other", 8.0)] if other_policy else []},
                     {**params, "ResourceId": "inference-component/other"})


def test_fleet_read_from_an_endpoint_places_copies_by_whole_devices():
    sess = StubbedSession()
    stub_endpoint(sess)
    fleet = read_fleet(sess, ENDPOINT, t_copy_s=48.1, t_total_s=320.2)
    for stub in sess.stubs.values():
        stub.assert_no_pending_responses()
    assert fleet.placement == "inferred" and fleet.source == f"sagemaker:{ENDPOINT}"
    # best-fit decreasing: the 2-GPU copy first on instance 1, then 1-GPU copies into the tightest room
    assert [(i.name, i.used_accelerator_memory_mib, i.copies) for i in fleet.instances] == [
        ("AllTraffic-1", 98304.0, {"other": 1, "kokoro-82m": 2}),
        ("AllTraffic-2", 73728.0, {"kokoro-82m": 3}),
    ]
    k = fleet.models["kokoro-82m"]
    assert (k.copy_memory_mib, k.concurrency_per_copy, k.new_instance_accelerator_memory_mib) == (24576, 37.5, 98304)
    assert fleet.models["other"].copy_memory_mib == 2 * 24576


def test_cli_writes_the_fleet_and_evaluates_it(tmp_path, capsys, monkeypatch):
    sess = StubbedSession()
    stub_endpoint(sess)
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    out = tmp_path / "fleet.json"
    rc = main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", str(out), "--t-copy-s", "48.1",
               "--t-total-s", "320.2", "--model", "kokoro-82m", "--delta-concurrency", "100", "--json"])
    assert rc == 0
    ev = CapacityEvaluation.model_validate_json(capsys.readouterr().out)
    assert (ev.copies_needed, ev.hot_loadable, ev.new_instances) == (3, 1, 1)
    assert ev.finding("placement_source").level == "warn"
    assert FleetState.model_validate_json(out.read_text()).instances[1].copies == {"kokoro-82m": 3}


def test_component_without_a_copy_policy_needs_the_flag():
    sess = StubbedSession()
    stub_endpoint(sess, other_policy=False)
    with pytest.raises(TargetError, match="inference component other has no target-tracking policy.*--concurrency-per-copy"):
        read_fleet(sess, ENDPOINT, t_copy_s=48.1, t_total_s=320.2)


def test_copies_that_do_not_fit_the_reported_instances_are_an_error():
    sess = StubbedSession()
    stub_endpoint(sess, instances=1)  # 5 + 2 GPUs on one 4-GPU instance: mid-deployment
    with pytest.raises(TargetError, match="6 current copies on variant AllTraffic do not fit its 1 instances"):
        read_fleet(sess, ENDPOINT, t_copy_s=48.1, t_total_s=320.2)


def test_unknown_endpoint_is_a_target_error(capsys, monkeypatch):
    sess = StubbedSession()
    sess.stubs["sagemaker"].add_client_error("describe_endpoint", service_error_code="ValidationException",
                                             service_message=f"Could not find endpoint \"{ENDPOINT}\".")
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", "x.json", "--t-copy-s", "1",
                 "--t-total-s", "2"]) == 2
    assert "Could not find endpoint" in capsys.readouterr().err


# --- CPU-only components, CPU instances, mixed fleets ---------------------------------------------


def stub_fleet(sess: StubbedSession, variants: list[tuple[str, str, int]],
               components: list[tuple[str, str, dict | None, int, float | None]], *, base: dict | None = None) -> None:
    """Recorded responses of an endpoint with ``variants`` (name, instance type, instances) and
    ``components`` (name, variant, ComputeResourceRequirements or None for an adapter, current
    copies, copy-scaling target or None for no policy)."""
    sm, aas = sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]
    sm.add_response("describe_endpoint", {
        "EndpointName": ENDPOINT, "EndpointArn": f"{ARN}:endpoint/{ENDPOINT}", "EndpointConfigName": f"{ENDPOINT}-cfg",
        "ProductionVariants": [{"VariantName": v, "CurrentInstanceCount": n, "DesiredInstanceCount": n,
                                "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 4}}
                               for v, _, n in variants],
        "EndpointStatus": "InService", "CreationTime": T, "LastModifiedTime": T,
    }, {"EndpointName": ENDPOINT})
    sm.add_response("describe_endpoint_config", {
        "EndpointConfigName": f"{ENDPOINT}-cfg", "EndpointConfigArn": f"{ARN}:endpoint-config/{ENDPOINT}-cfg",
        "ProductionVariants": [{"VariantName": v, "InstanceType": t, "InitialInstanceCount": 1,
                                "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}} for v, t, _ in variants],
        "CreationTime": T,
    }, {"EndpointConfigName": f"{ENDPOINT}-cfg"})
    described = []
    for name, variant, req, copies, _ in components:
        c = component(name, 1, copies)
        c["VariantName"] = variant
        c["Specification"] = ({"ModelName": f"{name}-model", "ComputeResourceRequirements": req} if req is not None
                              else {"BaseInferenceComponentName": "kokoro-gpu", "Container": {"ArtifactUrl": "s3://b/adapter"}})
        described.append(c)
    sm.add_response("list_inference_components", {"InferenceComponents": [
        {k: c[k] for k in ("InferenceComponentName", "InferenceComponentArn", "EndpointName", "EndpointArn", "VariantName",
                           "CreationTime", "LastModifiedTime", "InferenceComponentStatus")} for c in described]},
        {"EndpointNameEquals": ENDPOINT})
    params = {"ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    for c, (name, _, req, _, target) in sorted(zip(described, components, strict=True), key=lambda x: x[1][0]):
        sm.add_response("describe_inference_component", c, {"InferenceComponentName": name})
        if req is not None:
            aas.add_response("describe_scaling_policies",
                             {"ScalingPolicies": [policy(name, target)] if target is not None else []},
                             {**params, "ResourceId": f"inference-component/{name}"})


CPU_REQ = {"NumberOfCpuCoresRequired": 4.0, "MinMemoryRequiredInMb": 2530}
GPU_REQ = {"NumberOfAcceleratorDevicesRequired": 1.0, "NumberOfCpuCoresRequired": 1.25, "MinMemoryRequiredInMb": 2530}


def test_cpu_only_copies_on_cpu_instances_are_read_and_placed_by_cores(tmp_path, capsys, monkeypatch):
    sess = StubbedSession()
    stub_fleet(sess, [("AllTraffic", "ml.c7i.4xlarge", 2)], [("kokoro-82m", "AllTraffic", CPU_REQ, 5, 6.0)])
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    out = tmp_path / "fleet.json"
    rc = main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", str(out), "--t-copy-s", "20.5",
               "--t-total-s", "290", "--model", "kokoro-82m", "--delta-concurrency", "30", "--json"])
    assert rc == 0
    for stub in sess.stubs.values():
        stub.assert_no_pending_responses()
    fleet = FleetState.model_validate_json(out.read_text())
    # 16 vCPUs and 32 GiB per c7i.4xlarge; 5 copies of 4 cores inferred best-fit: 4 fill the first, 1 on the second
    assert [(i.cpu_cores, i.host_memory_mib, i.accelerator_memory_mib) for i in fleet.instances] == [(16, 32768, 0)] * 2
    assert [(i.used_cpu_cores, i.used_host_memory_mib, i.copies) for i in fleet.instances] == [
        (16.0, 4 * 2530.0, {"kokoro-82m": 4}), (4.0, 2530.0, {"kokoro-82m": 1})]
    k = fleet.models["kokoro-82m"]
    assert (k.copy_memory_mib, k.copy_cpu_cores, k.copy_host_memory_mib, k.concurrency_per_copy) == (0, 4, 2530, 6)
    assert (k.new_instance_cpu_cores, k.new_instance_host_memory_mib, k.variant) == (16, 32768, "AllTraffic")
    ev = CapacityEvaluation.model_validate_json(capsys.readouterr().out)
    # +30 in flight = 5 copies: 3 into the second instance's 12 free cores, 2 on one new c7i.4xlarge (4 per instance)
    assert [s.instance for s in ev.steps] == ["AllTraffic-2"] * 3 and {s.binding for s in ev.steps} == {"cpu_cores"}
    assert (ev.hot_loadable, ev.copies_on_new_instances, ev.new_instances) == (3, 2, 1)
    assert (ev.copies_per_new_instance, ev.new_instance_limited_by) == (4, "cpu_cores")
    assert ev.verdict == "warn"


def test_cpu_only_fleet_human_report(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at the terminal width
    sess = StubbedSession()
    stub_fleet(sess, [("AllTraffic", "ml.c7i.4xlarge", 2)], [("kokoro-82m", "AllTraffic", CPU_REQ, 5, 6.0)])
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--t-copy-s", "20.5", "--t-total-s", "290",
                 "--model", "kokoro-82m", "--delta-concurrency", "30"]) == 0
    out = capsys.readouterr().out
    for needle in ("5 copies of 4 CPU cores + 2530 MiB host memory", "cores free", "host MiB free", "12 -> 0",
                   "limited by CPU cores", "1 new instance(s), 4 copies each", "WARN placement_source", "verdict: warn"):
        assert needle in out, needle


def test_a_mixed_fleet_keeps_each_components_copies_on_its_variant():
    sess = StubbedSession()
    stub_fleet(sess, [("gpu", "ml.g5.12xlarge", 1), ("cpu", "ml.c7i.4xlarge", 1)], [
        ("kokoro-gpu", "gpu", GPU_REQ, 3, 37.5),
        ("kokoro-cpu", "cpu", CPU_REQ, 2, 6.0),
        ("sidecar", "gpu", {"NumberOfCpuCoresRequired": 2.0, "MinMemoryRequiredInMb": 1024}, 1, 4.0),  # CPU-only on a GPU host
        ("adapter", "gpu", None, 1, None),  # runs inside kokoro-gpu's copies: holds nothing
    ])
    fleet = read_fleet(sess, ENDPOINT, t_copy_s=20, t_total_s=300)
    for stub in sess.stubs.values():
        stub.assert_no_pending_responses()
    assert sorted(fleet.models) == ["kokoro-cpu", "kokoro-gpu", "sidecar"]
    gpu, cpu = fleet.instances
    assert (gpu.variant, gpu.used_accelerator_memory_mib, gpu.used_cpu_cores, gpu.used_host_memory_mib) == (
        "gpu", 3 * 24576.0, 3 * 1.25 + 2, 3 * 2530.0 + 1024)
    assert gpu.copies == {"kokoro-gpu": 3, "sidecar": 1} and cpu.copies == {"kokoro-cpu": 2}
    assert fleet.models["sidecar"].copy_memory_mib == 0 and fleet.models["kokoro-gpu"].copy_memory_mib == 24576
    # 5 more CPU copies: 2 fit the c7i's 8 free cores; the GPU host's 42 free cores are another variant's
    ev = evaluate_capacity(fleet, "kokoro-cpu", 30)
    assert {s.instance for s in ev.steps} == {"cpu-1"} and (ev.hot_loadable, ev.new_instances) == (2, 1)
    assert ev.copies_per_new_instance == 4
    # the CPU-only sidecar does use the GPU host's cores: 42 / 2 = 21 would fit; host memory allows more
    assert evaluate_capacity(fleet, "sidecar", 40).hot_loadable == 10


@pytest.mark.parametrize(
    ("variants", "req", "message"),
    [
        ([("AllTraffic", "ml.c7i.4xlarge", 1)], GPU_REQ,
         "requests 1 accelerator devices but variant AllTraffic runs ml.c7i.4xlarge, which has none"),
        ([("AllTraffic", "ml.g6e.12xlarge", 1)], {**GPU_REQ, "AcceleratorPartitionType": "mig-3g.40gb"},
         "runs on accelerator partition 'mig-3g.40gb' (MIG); bench capacity models whole devices only"),
    ],
)
def test_what_the_evaluation_does_not_model_is_a_target_error(tmp_path, capsys, monkeypatch, variants, req, message):
    sess = StubbedSession()
    stub_fleet(sess, variants, [("kokoro-82m", "AllTraffic", req, 1, 6.0)])
    monkeypatch.setattr(bench.aws.client, "session", lambda region=None: sess)
    out = tmp_path / "fleet.json"
    assert main(["capacity", "--from-endpoint", ENDPOINT, "--write-fleet", str(out), "--t-copy-s", "1",
                 "--t-total-s", "2"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("example", ["EXAMPLE_FLEET", "EXAMPLE_CPU_FLEET"])
def test_the_help_examples_are_valid_fleet_files(tmp_path, capsys, example):
    import bench.cli.parsers.capacity as cmd

    fleet = write(tmp_path, getattr(cmd, example))
    assert main(["capacity", "--fleet", str(fleet), "--model", "kokoro-82m", "--delta-concurrency", "30", "--json"]) == 0
    assert CapacityEvaluation.model_validate_json(capsys.readouterr().out).hot_loadable >= 1
