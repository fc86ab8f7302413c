"""bench tcopy: a second model copy's start time and footprint, on the real local container."""
from __future__ import annotations

import json
import os
import sys

import pytest

from bench.cli.main import build_parser, main
from bench.commands import tcopy as tcopy_cmd
from bench.errors import BenchError, CopyNotReady
from bench.load.targets import HttpTarget, local_fingerprint
from bench.operations import tcopy as tcopy_ops
from speech.files import load_artifact
from speech.plan.copies import COPY_SCALABLE_DIMENSION, copy_resource_id
from speech.schema.artifacts import CopyArtifact
from tests.container.conftest import ServerProc

from ..conftest import DIGEST, ENDPOINT, INSTANCE, ROOT
from .test_qmax_component import COMPONENT, StubbedSession, component_response, config_response, endpoint_response


def test_local_fingerprint_ignores_the_footprint():
    """/ping's footprint moves from ping to ping; the fingerprint names the build, not the moment."""
    base = {"status": "ok", "backend": "onnx", "weights_sha256": "sha256:" + "a" * 64}
    a = local_fingerprint("local:x", {**base, "footprint": {"rss_bytes": 1}}, None, None)
    b = local_fingerprint("local:x", {**base, "footprint": {"rss_bytes": 2}}, None, None)
    c = local_fingerprint("local:x", {**base, "backend": "torch"}, None, None)
    assert a == b != c


# --- the command on real local containers -----------------------------------------------------

SERVE = f"env BACKEND={{backend}} WARMUP=1 {sys.executable} -m container serve"


@pytest.fixture(scope="module")
def sine_first():
    srv = ServerProc({"BACKEND": "sine"})
    try:
        srv.wait_ready(timeout=60)
        yield srv
    finally:
        srv.stop()


def _children() -> set[int]:
    from container.footprint import process_tree

    return set(process_tree()) - {os.getpid()}


@pytest.mark.slow
def test_tcopy_times_real_copies_and_reads_their_footprint(sine_first, tmp_path, capsys):
    before = _children()
    rc = main(["tcopy", "--url", sine_first.url, "--serve-cmd", SERVE.format(backend="sine"), "--starts", "2",
               "--load-concurrency", "1", "--out", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    [path] = tmp_path.glob("copy-kokoro-82m-local-*.json")
    a = load_artifact(path, CopyArtifact)
    assert json.loads(out)["t_copy_s"] == a.t_copy_s
    assert len(a.starts) == 2 and a.t_copy_s == a.t_copy_max_s == max(s.ready_s for s in a.starts)
    for s in a.starts:
        # The markers were seen (the source says so) and precede the first /ping 200.
        assert s.framework_init_s is not None and "stage markers" in s.source
        assert 0 < s.framework_init_s <= s.weights_ready_s <= s.ready_s < 60
    assert a.footprint.device == "cpu" and a.footprint.accelerator_memory_mib is None
    assert 20 < a.footprint.host_memory_mib < 4096  # a Python server's resident set, MiB
    p = a.provenance
    assert p.origin == "measured" and p.tool == "bench tcopy" and p.target == f"local:{sine_first.url}"
    assert p.measured_at <= p.ended_at and "served on the first copy" in p.source
    assert a.fingerprint == load_fingerprint(sine_first.url)
    assert _children() <= before  # every copy process was stopped


def load_fingerprint(url: str):
    t = HttpTarget(url)
    t.check()
    return t.fingerprint()


@pytest.mark.slow
def test_tcopy_refuses_a_copy_of_another_model(sine_first, tmp_path, capsys):
    """The first copy serves sine; a --serve-cmd starting onnx is not a copy of it (exit 2, nothing written)."""
    rc = main(["tcopy", "--url", sine_first.url, "--serve-cmd", SERVE.format(backend="onnx"), "--starts", "1",
               "--load-concurrency", "0", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "another model" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_tcopy_copy_that_dies_is_exit_1(sine_first, tmp_path, capsys):
    rc = main(["tcopy", "--url", sine_first.url, "--serve-cmd", f"{sys.executable} -c 'import sys; sys.exit(3)' {{port}}",
               "--starts", "1", "--load-concurrency", "0", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1 and "exited with 3" in err and "nothing written" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, needle", [
    (["--starts", "0"], "--starts 0"),
    (["--load-concurrency", "-1"], "--load-concurrency -1"),
    (["--timeout-s", "0"], "--timeout-s 0"),
])
@pytest.mark.slow
def test_tcopy_bad_flags_are_exit_2(sine_first, tmp_path, capsys, argv, needle):
    rc = main(["tcopy", "--url", sine_first.url, "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_tcopy_unreachable_first_copy_is_exit_2(tmp_path, capsys):
    from bench.load.synthetic import free_port

    rc = main(["tcopy", "--url", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot connect" in err


@pytest.mark.slow
def test_tcopy_on_the_real_onnx_model(onnx_server, tmp_path, capsys):
    """One start of the int8 ONNX Kokoro-82M beside a running one (the session's, which tcopy only
    reads: its /ping, to check the copy is of the same model): markers, /ping 200, footprint."""
    rc = main(["tcopy", "--url", onnx_server.url, "--serve-cmd", SERVE.format(backend="onnx"), "--starts", "1",
               "--load-concurrency", "0", "--out", str(tmp_path), "--json"])
    assert rc == 0, capsys.readouterr().err
    [path] = tmp_path.glob("copy-*.json")
    a = load_artifact(path, CopyArtifact)
    [s] = a.starts
    # Loading the model and warming it up takes real time after the framework is imported.
    assert s.framework_init_s < s.weights_ready_s < s.ready_s
    assert a.footprint.host_memory_mib > 80  # the int8 model, onnxruntime and espeak


# --- SageMaker: a copy-count increase timed to InService (botocore's Stubber, real service models) ---




LOCAL_COPY = ROOT / "artifacts" / "local" / "copy-kokoro-82m-local-4ed3d00a.json"


class Clock:
    """Time for the run: each sleep moves it on by the poll interval."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _ic(status: str, current: int, desired: int) -> dict:
    return component_response(current=current, desired=desired, status=status)


def _stub_run(sess: StubbedSession, polls_to_ready: list[int], base: int = 2, fail_at: int | None = None,
              scaling: dict | None = None) -> None:
    """The calls one run makes, in order, with what AWS would answer."""
    sm, aas = sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]
    name = {"InferenceComponentName": COMPONENT}
    sm.add_response("describe_inference_component", _ic("InService", base, base), name)
    aas.add_response("describe_scalable_targets", {"ScalableTargets": [scaling] if scaling else []},
                     {"ServiceNamespace": "sagemaker", "ResourceIds": [copy_resource_id(COMPONENT)],
                      "ScalableDimension": COPY_SCALABLE_DIMENSION})
    if scaling and not all(scaling["SuspendedState"].values()):
        return
    for i, polls in enumerate(polls_to_ready):
        sm.add_response("update_inference_component_runtime_config", {"InferenceComponentArn": "arn:aws:sagemaker:us-east-1:1:ic/x"},
                        {**name, "DesiredRuntimeConfig": {"CopyCount": base + 1}})
        for _ in range(polls):
            sm.add_response("describe_inference_component", _ic("Updating", base, base + 1), name)
        if fail_at == i:
            failed = {**_ic("Failed", base, base + 1), "FailureReason": "out of accelerator memory"}
            sm.add_response("describe_inference_component", failed, name)
            sm.add_response("describe_inference_component", failed, name)  # the put-back reads the desired count
            sm.add_response("update_inference_component_runtime_config", {"InferenceComponentArn": "arn:aws:sagemaker:us-east-1:1:ic/x"},
                            {**name, "DesiredRuntimeConfig": {"CopyCount": base}})
            return
        sm.add_response("describe_inference_component", _ic("InService", base + 1, base + 1), name)
        sm.add_response("update_inference_component_runtime_config", {"InferenceComponentArn": "arn:aws:sagemaker:us-east-1:1:ic/x"},
                        {**name, "DesiredRuntimeConfig": {"CopyCount": base}})
        sm.add_response("describe_inference_component", _ic("Updating", base + 1, base), name)
        sm.add_response("describe_inference_component", _ic("InService", base, base), name)
    sm.add_response("describe_endpoint", endpoint_response(), {"EndpointName": ENDPOINT})
    sm.add_response("describe_endpoint_config", config_response(), {"EndpointConfigName": ENDPOINT})


def _args(tmp_path, *extra):
    return build_parser().parse_args(["tcopy", "--inference-component", COMPONENT, "--footprint-from", str(LOCAL_COPY),
                                      "--poll-s", "5", "--out", str(tmp_path), "--json", *extra])


def test_sagemaker_copy_count_increase_timed_to_in_service(tmp_path, capsys):
    sess, clock = StubbedSession(), Clock()
    _stub_run(sess, polls_to_ready=[3, 5])
    with sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]:
        rc = tcopy_cmd.run(_args(tmp_path, "--starts", "2"), session=sess, clock=clock, sleep=clock.sleep)
        sess.stubs["sagemaker"].assert_no_pending_responses()
    assert rc == 0, capsys.readouterr().err
    [path] = tmp_path.glob("copy-*.json")
    a = load_artifact(path, CopyArtifact)
    # InService seen on the 4th and 6th poll, 5 s apart.
    assert [s.ready_s for s in a.starts] == [15.0, 25.0] and a.t_copy_s == 25.0
    assert all("CopyCount 2 -> 3" in s.source for s in a.starts)
    assert a.fingerprint.instance_type == INSTANCE and a.fingerprint.image_digest == DIGEST
    local = load_artifact(LOCAL_COPY, CopyArtifact)
    assert a.footprint == local.footprint and LOCAL_COPY.name in a.provenance.source
    assert a.provenance.target == f"sagemaker:{ENDPOINT}" and a.provenance.region == "us-east-1"


def test_sagemaker_failed_copy_is_exit_1_and_the_count_goes_back(tmp_path, capsys):
    sess, clock = StubbedSession(), Clock()
    _stub_run(sess, polls_to_ready=[2], fail_at=0)
    with sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]:
        with pytest.raises(CopyNotReady, match="out of accelerator memory") as exc:
            tcopy_cmd.run(_args(tmp_path, "--starts", "1"), session=sess, clock=clock, sleep=clock.sleep)
        sess.stubs["sagemaker"].assert_no_pending_responses()  # the give-back call was made
    assert exc.value.exit_code == 1
    assert not list(tmp_path.glob("copy-*.json"))


def test_sagemaker_active_copy_scaling_is_refused(tmp_path):
    sess, clock = StubbedSession(), Clock()
    scaling = {"ServiceNamespace": "sagemaker", "ResourceId": copy_resource_id(COMPONENT),
               "ScalableDimension": COPY_SCALABLE_DIMENSION, "MinCapacity": 1, "MaxCapacity": 8,
               "RoleARN": "arn:aws:iam::123456789012:role/aas", "CreationTime": "2026-11-30T00:00:00Z",
               "SuspendedState": {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False,
                                  "ScheduledScalingSuspended": False}}
    _stub_run(sess, polls_to_ready=[], scaling=scaling)
    from bench.errors import UsageError

    with sess.stubs["sagemaker"], sess.stubs["application-autoscaling"]:
        with pytest.raises(UsageError, match="copy scaling of inference component .* is active"):
            tcopy_cmd.run(_args(tmp_path, "--starts", "1"), session=sess, clock=clock, sleep=clock.sleep)
        sess.stubs["sagemaker"].assert_no_pending_responses()  # no update was made
    assert not list(tmp_path.glob("copy-*.json"))


def test_sagemaker_needs_a_footprint_source(tmp_path, capsys):
    rc = main(["tcopy", "--inference-component", COMPONENT, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "--footprint-from" in err and not (tmp_path / "out").exists()


def test_copy_footprint_takes_the_largest_start_in_mib():
    gib = 2**30
    starts = [{"device": "cuda", "processes": 3, "rss_bytes": 2 * gib, "rss_peak_bytes": 3 * gib, "accelerator_bytes": 5 * gib,
               "accelerator_source": "nvml", "accelerator_name": "NVIDIA A10G", "accelerator_total_bytes": 23 * gib},
              {"device": "cuda", "processes": 3, "rss_bytes": 2 * gib, "rss_peak_bytes": 2 * gib, "accelerator_bytes": 6 * gib,
               "accelerator_source": "nvml", "accelerator_name": "NVIDIA A10G", "accelerator_total_bytes": 23 * gib}]
    fp = tcopy_ops.copy_footprint(starts)
    assert fp.accelerator_memory_mib == 6144.0 and fp.host_memory_mib == 3072.0
    assert fp.accelerator_name == "NVIDIA A10G" and fp.accelerator_memory_total_mib == 23552.0
    with pytest.raises(BenchError, match="none reported accelerator memory"):
        tcopy_ops.copy_footprint([{**starts[0], "accelerator_bytes": None, "accelerator_source": None}])
    with pytest.raises(BenchError, match="different devices"):
        tcopy_ops.copy_footprint([starts[0], {**starts[1], "device": "cpu"}])
