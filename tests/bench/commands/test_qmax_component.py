"""bench qmax against ONE copy of an inference component.

moto has neither inference components nor response streaming, so the control plane is botocore's
own Stubber on real clients (every call validated against the installed service model), and the
invocation goes through botocore's real serializer and event-stream parser: the HTTP request is
caught at ``before-send`` and answered with event-stream bytes encoded here.
"""

from __future__ import annotations

import asyncio
import binascii
import struct

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from bench.cli.main import build_parser
from bench.commands import qmax as qmax_cmd
from bench.load.targets import HttpTarget, SageMakerTarget
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact

from ..conftest import DIGEST, ENDPOINT, IMAGE, INSTANCE

COMPONENT = "test-kokoro-82m-ic"


def _session() -> boto3.session.Session:
    return boto3.session.Session(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


class StubbedSession:
    """One real client per service, shared like boto3 clients are; ``stubs`` are their Stubbers."""

    region_name = "us-east-1"

    def __init__(self) -> None:
        s = _session()
        self.clients = {"sagemaker": s.client("sagemaker"), "application-autoscaling": s.client("application-autoscaling")}
        self.stubs = {k: Stubber(c) for k, c in self.clients.items()}
        self.runtime = s.client("sagemaker-runtime")

    def client(self, name: str, config=None):
        return self.runtime if name == "sagemaker-runtime" else self.clients[name]


def endpoint_response(status: str = "InService") -> dict:
    return {"EndpointName": ENDPOINT, "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}",
            "EndpointConfigName": ENDPOINT, "EndpointStatus": status, "CreationTime": "2026-11-30T00:00:00Z",
            "LastModifiedTime": "2026-11-30T00:00:00Z",
            "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 2, "DesiredInstanceCount": 2,
                                    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1,
                                                               "MaxInstanceCount": 4}}]}


def component_response(current: int = 1, desired: int = 1, endpoint: str = ENDPOINT, status: str = "InService") -> dict:
    return {"InferenceComponentName": COMPONENT,
            "InferenceComponentArn": f"arn:aws:sagemaker:us-east-1:123456789012:inference-component/{COMPONENT}",
            "EndpointName": endpoint, "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{endpoint}",
            "VariantName": "AllTraffic", "InferenceComponentStatus": status,
            "CreationTime": "2026-11-30T00:00:00Z", "LastModifiedTime": "2026-11-30T00:00:00Z",
            "Specification": {"Container": {"DeployedImage": {"SpecifiedImage": IMAGE, "ResolvedImage": IMAGE}},
                              "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1,
                                                              "MinMemoryRequiredInMb": 2048}},
            "RuntimeConfig": {"DesiredCopyCount": desired, "CurrentCopyCount": current}}


def config_response() -> dict:
    return {"EndpointConfigName": ENDPOINT,
            "EndpointConfigArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/{ENDPOINT}",
            "CreationTime": "2026-11-30T00:00:00Z",
            "ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": INSTANCE,
                                    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1,
                                                               "MaxInstanceCount": 4},
                                    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}]}


def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack("!B", len(n)) + n + struct.pack("!BH", 7, len(v)) + v


def event_message(payload: bytes, event_type: str = "PayloadPart") -> bytes:
    """One AWS event-stream message (prelude, CRC, headers, payload, CRC) as the service sends it."""
    headers = (_header(":event-type", event_type) + _header(":message-type", "event")
               + _header(":content-type", "application/octet-stream"))
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + headers + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **kw):
        yield self.data


def catch_invocations(client, sent: list) -> None:
    """Answer InvokeEndpointWithResponseStream at the HTTP layer with two PCM parts."""

    def answer(request, **kw):
        sent.append(request)
        raw = event_message(b"\x00\x01" * 8) + event_message(b"\x02\x03" * 8)
        return AWSResponse(request.url, 200, {"Content-Type": "application/vnd.amazon.eventstream",
                                              "X-Amzn-SageMaker-Content-Type": "audio/pcm"}, _Raw(raw))

    client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpointWithResponseStream", answer)


def test_invocations_name_the_component_on_the_wire():
    sess = StubbedSession()
    sm = sess.stubs["sagemaker"]
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_response("describe_inference_component", component_response(), {"InferenceComponentName": COMPONENT})
    sm.add_response("describe_endpoint_config", config_response(), {"EndpointConfigName": ENDPOINT})
    sent: list = []
    t = SageMakerTarget(ENDPOINT, session=sess, inference_component=COMPONENT)
    with sm:
        t.check()
        fp = t.fingerprint()
        sm.assert_no_pending_responses()

    async def one():
        await t.open(1)
        sess.runtime = t._runtime  # the target made its own client (pool size); catch that one
        catch_invocations(sess.runtime, sent)
        try:
            return await t.invoke("Hello.")
        finally:
            await t.close()

    out = asyncio.run(one())
    assert out.ok and out.nbytes == 32 and out.ttfab_s is not None
    [req] = sent
    header = req.headers["X-Amzn-SageMaker-Inference-Component"]
    assert (header.decode() if isinstance(header, bytes) else header) == COMPONENT
    assert req.url.endswith(f"/endpoints/{ENDPOINT}/invocations-response-stream")
    # The instance type of the endpoint's variant, the digest SageMaker resolved for the component.
    assert fp.instance_type == INSTANCE and fp.image_digest == DIGEST


def test_without_a_component_no_header_is_sent():
    sess = StubbedSession()
    t = SageMakerTarget(ENDPOINT, session=sess)
    sent: list = []

    async def one():
        await t.open(1)
        catch_invocations(t._runtime, sent)
        try:
            return await t.invoke("Hello.")
        finally:
            await t.close()

    assert asyncio.run(one()).ok
    assert "X-Amzn-SageMaker-Inference-Component" not in sent[0].headers


@pytest.mark.parametrize("ic, needle", [
    (component_response(current=2, desired=2), "runs 2 copies"),
    (component_response(current=1, desired=3), "runs 1 copies (desired 3)"),
    (component_response(endpoint="other"), "hosted on endpoint 'other'"),
    (component_response(status="Updating"), "is Updating, not InService"),
])
def test_a_component_that_is_not_one_serving_copy_is_refused(ic, needle, tmp_path, capsys):
    sess = StubbedSession()
    sm = sess.stubs["sagemaker"]
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_response("describe_inference_component", ic, {"InferenceComponentName": COMPONENT})
    args = build_parser().parse_args(["qmax", "--endpoint", ENDPOINT, "--inference-component", COMPONENT,
                                      "--levels", "1,2", "--settle-s", "0", "--measure-s", "0.5", "--out", str(tmp_path / "out")])
    from speech.errors import SpeechError

    with sm, pytest.raises(SpeechError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        qmax_cmd.run(args, session=sess)
    assert not (tmp_path / "out").exists()


def test_unknown_component_is_a_clean_error():
    sess = StubbedSession()
    sm = sess.stubs["sagemaker"]
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_client_error("describe_inference_component", "ValidationException",
                        f"Could not find inference component \"{COMPONENT}\".")
    from bench.errors import TargetError

    with sm, pytest.raises(TargetError, match=f"inference component '{COMPONENT}': Could not find"):
        SageMakerTarget(ENDPOINT, session=sess, inference_component=COMPONENT).check()


def test_component_flag_needs_an_endpoint(tmp_path, capsys):
    from bench.cli.main import main

    rc = main(["qmax", "--url", "http://127.0.0.1:9", "--inference-component", COMPONENT, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "only with --endpoint" in err


def test_qmax_of_one_copy_end_to_end(synthetic_40ms, tmp_path):
    """The whole command: control plane stubbed (one copy before and after, no instance pinning,
    no CloudWatch reads: any other call fails the Stubber), the ladder's load on a real server."""
    sess = StubbedSession()
    sm = sess.stubs["sagemaker"]
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_response("describe_inference_component", component_response(), {"InferenceComponentName": COMPONENT})
    sm.add_response("describe_endpoint_config", config_response(), {"EndpointConfigName": ENDPOINT})
    sm.add_response("describe_inference_component", component_response(), {"InferenceComponentName": COMPONENT})
    local = HttpTarget(synthetic_40ms.url)
    local.check()
    args = build_parser().parse_args(["qmax", "--endpoint", ENDPOINT, "--inference-component", COMPONENT,
                                      "--levels", "1,2", "--no-refine", "--settle-s", "0.2", "--measure-s", "0.8",
                                      "--slo-ms", "5000", "--out", str(tmp_path), "--json"])
    with sm:
        rc = qmax_cmd.run(args, session=sess, load_target=local)
        sm.assert_no_pending_responses()
    assert rc == 0
    [path] = tmp_path.glob("qmax-*.json")
    a = load_artifact(path, QmaxArtifact)
    assert a.fingerprint.instance_type == INSTANCE and a.fingerprint.image_digest == DIGEST
    assert a.provenance.source.startswith(f"one copy of inference component {COMPONENT}")
    assert a.provenance.target == f"sagemaker:{ENDPOINT}"
    assert a.cloudwatch_ratio_source == "assumed" and all(lv.cloudwatch_concurrency_max is None for lv in a.ladder)


def test_a_copy_added_during_the_ladder_writes_nothing(synthetic_40ms, tmp_path):
    sess = StubbedSession()
    sm = sess.stubs["sagemaker"]
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_response("describe_inference_component", component_response(), {"InferenceComponentName": COMPONENT})
    sm.add_response("describe_endpoint_config", config_response(), {"EndpointConfigName": ENDPOINT})
    sm.add_response("describe_inference_component", component_response(current=2, desired=2),
                    {"InferenceComponentName": COMPONENT})
    local = HttpTarget(synthetic_40ms.url)
    local.check()
    args = build_parser().parse_args(["qmax", "--endpoint", ENDPOINT, "--inference-component", COMPONENT,
                                      "--levels", "1", "--no-refine", "--settle-s", "0", "--measure-s", "0.5",
                                      "--slo-ms", "5000", "--out", str(tmp_path / "out"), "--json"])
    from bench.errors import BenchError

    with sm, pytest.raises(BenchError, match="ran 2 copies by the end of the ladder"):
        qmax_cmd.run(args, session=sess, load_target=local)
    assert not (tmp_path / "out").exists()
