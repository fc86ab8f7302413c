"""bench ttotal, qmax's pause and drift on Kubernetes, through the official client, against the
stand-in API server (tests/bench/k8s/apiserver.py): the phases a scale-out's pod records, the
autoscaler (HPA or KEDA) restored on every way out (end, error, Ctrl-C, SIGTERM, a killed run's
state file), and the live autoscaler compared with the plan."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from bench.cli.main import main
from bench.errors import BenchError
from bench.k8s.client import connect
from bench.k8s.names import K8sTarget
from bench.k8s.pause import PAUSED_REPLICAS, Pause, restore_saved, state_file
from bench.k8s.phases import measure
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from tests.bench.k8s.apiserver import NAME, NS, Cluster, StandIn
from tests.conftest import QMAX_REF, TTOTAL_REF

pytestmark = pytest.mark.slow  # a local HTTP server

DIGEST = load_artifact(QMAX_REF, QmaxArtifact).fingerprint.image_digest
HPA = K8sTarget(NS, NAME, "hpa")
KEDA = K8sTarget(NS, NAME, "keda")


@pytest.fixture
def stand_in(tmp_path):
    def make(**kw):
        c = Cluster(DIGEST, **kw)
        return c, StandIn(c, tmp_path)
    return make


def _restored_hpa(c: Cluster) -> None:
    """The HPA's min/max and the Deployment's replicas as recorded, the last calls the restore."""
    assert c.objects["hpa"]["spec"]["minReplicas"] == 2 and c.objects["hpa"]["spec"]["maxReplicas"] == 12
    assert c.replicas == 2
    patches = [(p, b) for m, p, b in c.requests if m == "PATCH"]
    assert patches[-2][1] == {"spec": {"minReplicas": 2, "maxReplicas": 12}} and patches[-1][1] == {"spec": {"replicas": 2}}


def test_ttotal_on_kubernetes_writes_the_pods_phases(stand_in, tmp_path, capsys):
    c, server = stand_in()
    with server as kubeconfig:
        rc = main(["ttotal", "--qmax", str(QMAX_REF), "--kubernetes", f"{NS}/{NAME}", "--kubeconfig", str(kubeconfig),
                   "--instance-type", "ml.g5.xlarge", "--poll-s", "0.01", "--state-dir", str(tmp_path / "state"),
                   "--out", str(tmp_path / "out"), "--json"])
    assert rc == 0
    art = TtotalArtifact.model_validate(json.loads(capsys.readouterr().out))
    assert art.trigger == "kubernetes-scale" and art.provenance.target == f"kubernetes:{NS}/{NAME}"
    phases = {p.name: p for p in art.phases}
    # the stand-in's pod: created 1 s after the scale, scheduled at +41 s, started at +186 s, ready at +212 s;
    # the node added at +20 s, ready at +50 s; the image pulled at +170 s (offsets to the second)
    assert [p.name for p in art.phases] == ["desired_set", "pod_created", "node_created", "node_ready", "scheduled",
                                            "image_pulled", "container_started", "ready", "first_audio_byte"]
    # each phase at the time the API recorded (to the second), offset from this run's desired_set
    t0 = phases["desired_set"].at
    [scaled] = c.scale_ups
    pod, node = (scaled + timedelta(seconds=1)).replace(microsecond=0), (scaled + timedelta(seconds=20)).replace(microsecond=0)
    second = timedelta(seconds=1)
    expected = {"pod_created": pod, "scheduled": pod + 41 * second, "container_started": pod + 186 * second,
                "ready": pod + 212 * second, "node_created": node, "node_ready": node + 30 * second,
                "image_pulled": (scaled + 170 * second).replace(microsecond=0)}
    for name, at in expected.items():
        assert phases[name].applicable and phases[name].at == at, (name, phases[name])
        assert phases[name].offset_s == pytest.approx(max(0.0, (at - t0).total_seconds()), abs=1e-3)
    # first_audio_byte is this run's own clock: after desired_set, before the run returned
    assert t0 <= phases["first_audio_byte"].at <= datetime.now(UTC)
    assert art.measured_total_s == max(p.offset_s for p in art.phases if p.applicable)
    # the one request went through the API server's pod proxy
    assert any(m == "POST" and p.endswith(":8080/proxy/invocations") for m, p, _ in c.requests)
    _restored_hpa(c)
    assert not (tmp_path / "state" / f"k8s-{NS}-{NAME}.json").exists()
    assert list((tmp_path / "out").glob("ttotal-*.json"))


def test_ttotal_without_a_new_node_leaves_the_node_phases_out(stand_in, tmp_path):
    c, server = stand_in(new_node=False)
    with server as kubeconfig:
        phases = measure(connect(kubeconfig, None), HPA, port=8080, text="Hello.", state_dir=tmp_path, poll_s=0, sleep=lambda s: None)
    by = {p.name: p for p in phases}
    assert not by["node_created"].applicable and not by["node_ready"].applicable and by["ready"].applicable


def test_a_pod_that_never_gets_ready_fails_and_restores(stand_in, tmp_path):
    c, server = stand_in(ready_after_polls=-1)
    ticks = iter(range(1000))
    with server as kubeconfig, pytest.raises(BenchError, match="not Ready after 5 s; nothing written"):
        measure(connect(kubeconfig, None), HPA, port=8080, text="Hello.", state_dir=tmp_path, timeout_s=5, poll_s=1,
                sleep=lambda s: None, clock=lambda: float(next(ticks)))
    _restored_hpa(c)


def test_ctrl_c_during_the_scale_out_restores(stand_in, tmp_path):
    c, server = stand_in(ready_after_polls=10)

    def interrupt(_s):
        raise KeyboardInterrupt

    with server as kubeconfig, pytest.raises(KeyboardInterrupt):
        measure(connect(kubeconfig, None), HPA, port=8080, text="Hello.", state_dir=tmp_path, poll_s=1, sleep=interrupt)
    _restored_hpa(c)
    assert not state_file(tmp_path, HPA).exists()


def test_sigterm_during_the_ladder_restores(stand_in, tmp_path):
    """qmax's pause at one pod: a SIGTERM mid-ladder unwinds through the same restore."""
    c, server = stand_in()
    c.pods = c.pods[:1]  # one ready pod: the pin at 1 is satisfied at once
    with server as kubeconfig, pytest.raises(KeyboardInterrupt):
        with Pause(connect(kubeconfig, None), HPA, 1, tool="bench qmax", state_dir=tmp_path, poll_s=0, sleep=lambda s: None):
            assert c.objects["hpa"]["spec"]["minReplicas"] == c.objects["hpa"]["spec"]["maxReplicas"] == 1
            assert state_file(tmp_path, HPA).exists()  # written before anything changed
            os.kill(os.getpid(), signal.SIGTERM)
    assert c.objects["hpa"]["spec"]["minReplicas"] == 2 and c.replicas == 2
    assert not state_file(tmp_path, HPA).exists()


def test_keda_is_paused_by_annotation_and_given_back_as_found(stand_in, tmp_path):
    c, server = stand_in(hpa=False, keda=True)
    c.pods = c.pods[:1]
    c.objects["scaledobject"]["metadata"]["annotations"][PAUSED_REPLICAS] = "3"  # a team's own pause, kept
    with server as kubeconfig:
        cluster = connect(kubeconfig, None)
        with pytest.raises(RuntimeError, match="mid-ladder"):
            with Pause(cluster, KEDA, 1, tool="bench qmax", state_dir=tmp_path, poll_s=0, sleep=lambda s: None):
                assert c.objects["scaledobject"]["metadata"]["annotations"][PAUSED_REPLICAS] == "1"
                raise RuntimeError("mid-ladder")
        assert c.objects["scaledobject"]["metadata"]["annotations"][PAUSED_REPLICAS] == "3"
        del c.objects["scaledobject"]["metadata"]["annotations"][PAUSED_REPLICAS]
        with Pause(cluster, KEDA, 1, tool="bench qmax", state_dir=tmp_path, poll_s=0, sleep=lambda s: None):
            pass
        assert PAUSED_REPLICAS not in c.objects["scaledobject"]["metadata"]["annotations"]  # absent again
        assert c.replicas == 2


def test_a_killed_runs_state_is_refused_then_thawed(stand_in, tmp_path, capsys):
    c, server = stand_in()
    c.pods = c.pods[:1]
    with server as kubeconfig:
        cluster = connect(kubeconfig, None)
        p = Pause(cluster, HPA, 1, tool="bench qmax", state_dir=tmp_path, poll_s=0, sleep=lambda s: None)
        p.__enter__()  # the run is killed here: no __exit__
        assert c.objects["hpa"]["spec"]["maxReplicas"] == 1
        with pytest.raises(BenchError, match="python -m bench thaw --kubernetes speech/dev-kokoro-82m"):
            Pause(cluster, HPA, 1, tool="bench qmax", state_dir=tmp_path).__enter__()
        rc = main(["thaw", "--kubernetes", f"{NS}/{NAME}", "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path)])
        assert rc == 0
        p.state = None  # what thaw restored, the killed run never would
    assert c.objects["hpa"]["spec"]["minReplicas"] == 2 and c.objects["hpa"]["spec"]["maxReplicas"] == 12 and c.replicas == 2
    assert not state_file(tmp_path, HPA).exists()
    with pytest.raises(BenchError, match="not a pause state file"):
        bad = tmp_path / "bad.json"
        bad.write_text("{}")
        restore_saved(cluster, bad)


def _plan(tmp_path):
    from speech.files import write_artifact
    from speech.plan.realtime import build_plan
    from speech.schema.config import PlanInputs

    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=200, trough_rps=10, min_instances=2),
                      allow_config_mismatch=True)
    return plan, write_artifact(tmp_path / "plan.json", plan)


def test_drift_reads_the_live_hpa_and_names_each_difference(stand_in, tmp_path, capsys):
    from speech.sim.hpa_artifact import hpa_fields
    from speech.sim.kube import plan_hpa_spec
    from speech.sim.scaler import scaling_numbers

    plan, path = _plan(tmp_path)
    want = hpa_fields(plan_hpa_spec(plan, scaling_numbers(plan)))
    c, server = stand_in()
    c.objects["hpa"]["spec"].update({k: want[k] for k in ("minReplicas", "maxReplicas", "metrics", "behavior")})
    with server as kubeconfig:
        args = ["drift", "--kubernetes", f"{NS}/{NAME}", "--kubeconfig", str(kubeconfig), "--plan", str(path), "--json"]
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out) == {"ok": True, "autoscalers": {f"{NS}/{NAME}": []}}
        c.objects["hpa"]["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "40"
        c.objects["hpa"]["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 60
        c.objects["hpa"]["status"]["conditions"][1].update(status="False", reason="FailedGetPodsMetric")
        assert main(args) == 1
        issues = json.loads(capsys.readouterr().out)["autoscalers"][f"{NS}/{NAME}"]
        kinds = sorted(i["kind"] for i in issues)
        assert kinds == ["mismatch", "mismatch", "not_scaling"]
        assert any("averageValue is '40'" in i["message"] for i in issues)
        del c.objects["hpa"]
        assert main(args) == 1
        assert json.loads(capsys.readouterr().out)["autoscalers"][f"{NS}/{NAME}"][0]["kind"] == "missing"


def test_drift_on_keda_names_a_pause_left_behind(stand_in, tmp_path, capsys):
    plan, path = _plan(tmp_path)
    c, server = stand_in(hpa=False, keda=True)
    c.objects["scaledobject"]["metadata"]["annotations"][PAUSED_REPLICAS] = "1"
    with server as kubeconfig:
        rc = main(["drift", "--kubernetes", f"{NS}/{NAME}", "--autoscaler", "keda", "--kubeconfig", str(kubeconfig),
                   "--plan", str(path), "--json"])
    issues = json.loads(capsys.readouterr().out)["autoscalers"][f"{NS}/{NAME}"]
    assert rc == 1 and "paused" in {i["kind"] for i in issues}


def test_bad_kubernetes_input_is_exit_2(tmp_path, capsys):
    assert main(["drift", "--kubernetes", "Bad_Name", "--plan", "x.json"]) == 2
    assert "NAMESPACE/DEPLOYMENT" in capsys.readouterr().err
    assert main(["drift", "--kubernetes", "speech/x", "--kubeconfig", str(tmp_path / "none"), "--plan", "x.json"]) == 2
    assert main(["ttotal", "--qmax", str(QMAX_REF), "--kubernetes", "speech/x", "--url", "http://127.0.0.1:1"]) == 2


def test_drift_of_a_stack_reads_its_kubernetes_models_from_the_cluster(stand_in, tmp_path, capsys):
    """bench drift --stack: a hosting: kubernetes model is read from the cluster (no AWS call): its HPA
    against the plan as the stack renders it (1.35: with the per-direction tolerances), and the
    Deployment's image digest against the stack's."""
    from bench.operations.drift import load_stack
    from speech.plan.realtime import build_plan
    from speech.sim.hpa_artifact import hpa_fields
    from speech.sim.kube import plan_hpa_spec
    from speech.sim.scaler import scaling_numbers
    from tests.conftest import ROOT
    from tests.stack_files import copy_stack

    path = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path / "stack", name="dev")
    m = load_stack(path).models["kokoro-82m"]
    plan = build_plan(m.measurements.qmax, m.measurements.ttotal, m.plan, allow_config_mismatch=False)
    want = hpa_fields(plan_hpa_spec(plan, scaling_numbers(plan), "hpa", tolerance=True))
    assert "tolerance" in want["behavior"]["scaleDown"]
    c, server = stand_in()
    c.objects["hpa"]["spec"].update({k: want[k] for k in ("minReplicas", "maxReplicas", "metrics", "behavior")})
    with server as kubeconfig:
        args = ["drift", "--stack", "dev", "--stack-dir", str(path.parent), "--kubeconfig", str(kubeconfig), "--json"]
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out)["endpoints"] == {f"{NS}/{NAME}": []}
        del c.objects["hpa"]["spec"]["behavior"]["scaleDown"]["tolerance"]  # a 1.32 server drops the field
        c.objects["deployment"]["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/k@sha256:" + "0" * 64
        assert main(args) == 1
        issues = json.loads(capsys.readouterr().out)["endpoints"][f"{NS}/{NAME}"]
    messages = " ".join(i["message"] for i in issues)
    assert "scaleDown.tolerance is None" in messages and "the measurements describe other bytes" in messages


def test_qmax_on_kubernetes_pins_one_pod_and_gives_the_hpa_back(synthetic_40ms, stand_in, tmp_path, capsys):
    """bench qmax --kubernetes: the ladder through --url (a port-forward in real use; here a synthetic
    server) while the HPA is pinned at one pod; the artifact is the Deployment's (its image digest,
    the pods' hardware, a kubernetes: target) and the HPA and replicas are put back."""
    c, server = stand_in()
    c.pods = c.pods[:1]
    with server as kubeconfig:
        rc = main(["qmax", "--url", synthetic_40ms.url, "--kubernetes", f"{NS}/{NAME}", "--kubeconfig", str(kubeconfig),
                   "--instance-type", "ml.g5.xlarge", "--slo-ms", "340", "--levels", "1,2", "--no-refine", "--settle-s", "0",
                   "--measure-s", "0.5", "--state-dir", str(tmp_path / "state"), "--out", str(tmp_path / "out"), "--json"])
    assert rc == 0
    a = QmaxArtifact.model_validate(json.loads(capsys.readouterr().out))
    assert a.provenance.target == f"kubernetes:{NS}/{NAME}" and a.fingerprint == load_artifact(QMAX_REF, QmaxArtifact).fingerprint
    pins = [b for m, p, b in c.requests if m == "PATCH" and p.endswith("horizontalpodautoscalers/" + NAME)]
    assert pins[0] == {"spec": {"minReplicas": 1, "maxReplicas": 1}}
    assert c.objects["hpa"]["spec"]["minReplicas"] == 2 and c.objects["hpa"]["spec"]["maxReplicas"] == 12 and c.replicas == 2
