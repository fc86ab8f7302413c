"""``bench plan --stack NAME --hpa FILE``: the HPA ``bench tune --platform kubernetes`` found reaches the
stack file, so ``python -m speech render`` (and the Pulumi component, built from the same objects)
deploys it and the policy pack passes it; an artifact tuned for other measurements, another model or
the other autoscaler is refused with the stack file unchanged; a re-plan keeps what was stored."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest

from bench.cli.main import main
from policy.check import preview_resources
from policy.inprocess import InProcessPack
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.sim.hpa_artifact import HpaTuneArtifact
from speech.stack.read import load_stack_file
from speech.stack.render import read_yaml, render_stack, to_yaml
from tests.stack_files import copy_stack

# Each test here runs a tune, a preview or the pack on whole stacks (seconds apiece, the setup's fixture
# tens): make test runs them, make test-fast (the inner loop) leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
QMAX = "artifacts/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = "artifacts/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
# The example stacks' own peak and trough, two hours: a short day the tuner moves knobs on.
TRACE = "diurnal:peak=500,trough=10,hours=2"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """A real ``bench tune --platform kubernetes`` artifact for the example stacks' measurements."""
    out = tmp_path_factory.mktemp("tune")
    rc = main(["tune", "--platform", "kubernetes", "--qmax", str(ROOT / "examples" / QMAX), "--ttotal",
               str(ROOT / "examples" / TTOTAL), "--trace", TRACE, "--draws", "2", "--holdout-days", "1",
               "--out", str(out), "--no-progress", "--jobs", "1"])
    assert rc in (0, 1)  # 1: the promise missed a check; the artifact is written either way
    return out / "hpa-kokoro-82m-diurnal.json"


def _plan(stack: str, directory: Path, *extra: str, peak: str = "500") -> int:
    return main(["plan", "--qmax", str(directory / QMAX), "--ttotal", str(directory / TTOTAL), "--peak-rps", peak,
                 "--stack", stack, "--stack-dir", str(directory), "--out", str(directory / "out"), *extra])


def _rendered_autoscaler(stack_file: Path, stack: str, out: Path) -> dict:
    [model] = render_stack(load_stack_file(stack_file), stack, out)
    objects = {o["kind"]: o for o in read_yaml(to_yaml(model.objects))}
    return objects["HorizontalPodAutoscaler"]["spec"]


def _target(spec: dict) -> Decimal:
    value = str(spec["metrics"][0]["pods"]["target"]["averageValue"])
    return Decimal(value[:-1]) / 1000 if value.endswith("m") else Decimal(value)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_render_after_storing_deploys_the_tuned_hpa_and_the_pack_passes(tuned, tmp_path, capsys):
    stack_file = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path)
    before = _rendered_autoscaler(stack_file, "k8s-gpu", tmp_path / "before")
    assert _plan("k8s-gpu", tmp_path, "--hpa", str(tuned)) == 0
    printed = capsys.readouterr().out
    art = load_artifact(tuned, HpaTuneArtifact)
    want = art.hpa
    got = _rendered_autoscaler(stack_file, "k8s-gpu", tmp_path / "after")
    # The tuned knobs, read from the YAML render writes and from the artifact bench tune wrote.
    assert _target(got) == _target(want)
    assert got["minReplicas"] == want["minReplicas"]
    assert got["behavior"]["scaleDown"] == want["behavior"]["scaleDown"]  # window, policies, selectPolicy, tolerance
    assert got["behavior"]["scaleUp"] == want["behavior"]["scaleUp"]
    assert got["behavior"]["scaleDown"] != before["behavior"]["scaleDown"]  # else the test could not fail
    # maxReplicas is the plan's cap at the stored target (the tuner kept the seed's); said when they differ.
    m = load_stack_file(stack_file).models["kokoro-82m"]
    plan = build_plan(m.measurements.qmax, m.measurements.ttotal, m.plan)
    assert got["maxReplicas"] == plan.fleet.max_instances >= want["maxReplicas"]
    assert ("maxReplicas" in printed) == (got["maxReplicas"] != want["maxReplicas"])
    # Provenance: the artifact by the sha256 of its bytes, its promise, the reason on each plan input.
    block = m.kubernetes.scale_down
    assert block.tuned_from.sha256.removeprefix("sha256:") == hashlib.sha256(tuned.read_bytes()).hexdigest()
    assert (block.tuned_from.held, block.tuned_from.trace) == (art.held, TRACE)
    assert "bench tune --platform kubernetes" in m.plan.reasons["target_share"]
    # The policy pack recomputes the plan from the provenance the program stores: no mandatory finding.
    resources, _ = preview_resources(stack_file, "k8s-gpu")
    # The Pulumi component (the program under Pulumi's mocks) registers the same tuned scale-down.
    [hpa] = [r for r in resources if r.name == "kokoro-82m-horizontalpodautoscaler"]
    as_floats = lambda v: json.loads(json.dumps(v), parse_int=float)  # noqa: E731 - the engine sends doubles
    assert as_floats(hpa.props["spec"]["behavior"]["scaleDown"]) == as_floats(want["behavior"]["scaleDown"])
    report = InProcessPack(stack="dev").check(resources)
    assert [d for d in report.diagnostics if d.level == "mandatory"] == []


def test_a_replan_keeps_the_stored_hpa(tuned, tmp_path):
    stack_file = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path)
    assert _plan("k8s-gpu", tmp_path, "--hpa", str(tuned)) == 0
    stored = load_stack_file(stack_file).models["kokoro-82m"]
    assert _plan("k8s-gpu", tmp_path, peak="600") == 0  # no --hpa: a new peak only
    after = load_stack_file(stack_file).models["kokoro-82m"]
    assert after.plan.peak_rps == 600
    assert after.kubernetes.scale_down == stored.kubernetes.scale_down is not None
    assert (after.plan.target_share, after.plan.min_instances) == (stored.plan.target_share, stored.plan.min_instances)
    got = _rendered_autoscaler(stack_file, "k8s-gpu", tmp_path / "r")
    assert got["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == stored.kubernetes.scale_down.window_s


def _edited(tuned: Path, tmp_path: Path, **changes) -> Path:
    data = json.loads(tuned.read_text())
    for key, value in changes.items():
        if key == "scheduledFloors":  # a field of the tuned spec itself
            data["hpa"][key] = value
        elif value is None:
            data.pop(key)
        else:
            data[key] = value
    path = tmp_path / "edited-hpa.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("stack, changes, needle", [
    ("k8s-gpu", {"model": "other-model"}, "tuned for model 'other-model'"),
    ("k8s-gpu", {"autoscaler": "keda"}, "kubernetes.autoscaler is hpa"),
    ("k8s-keda", {}, "kubernetes.autoscaler is keda"),
    ("k8s-gpu", {"qmax_sha256": "sha256:" + "0" * 64}, "tuned on a qmax artifact of sha256:0000000000"),
    ("k8s-gpu", {"ttotal_sha256": "sha256:" + "1" * 64}, "tuned on a ttotal artifact"),
    ("k8s-gpu", {"qmax_sha256": None}, "does not record which qmax file"),
    ("gpu", {}, "no hosting: kubernetes entry"),
    ("k8s-keda", {"autoscaler": "keda", "scheduledFloors": {"06:00": 4}}, "has scheduled floors"),
])
@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_an_artifact_of_another_entry_is_refused_and_nothing_is_written(tuned, tmp_path, capsys, stack, changes, needle):
    stack_file = copy_stack(ROOT / f"examples/Pulumi.{stack}.yaml", tmp_path)
    for name in (QMAX, TTOTAL):  # the gpu example references other files: give it the tuned measurements' too
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / "examples" / name).read_bytes())
    before = stack_file.read_bytes()
    art = _edited(tuned, tmp_path, **changes) if changes else tuned
    assert _plan(stack, tmp_path, "--hpa", str(art)) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert stack_file.read_bytes() == before
    assert not (tmp_path / "out").exists()


def test_a_flag_that_contradicts_the_tuned_hpa_is_refused(tuned, tmp_path, capsys):
    stack_file = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path)
    before = stack_file.read_bytes()
    assert _plan("k8s-gpu", tmp_path, "--hpa", str(tuned), "--min-instances", "7") == 2
    assert "--min-instances 7 and --hpa" in capsys.readouterr().err
    assert stack_file.read_bytes() == before


def test_hpa_needs_a_stack(tuned, tmp_path, capsys):
    rc = main(["plan", "--qmax", str(ROOT / "examples" / QMAX), "--ttotal", str(ROOT / "examples" / TTOTAL),
               "--peak-rps", "500", "--out", str(tmp_path), "--hpa", str(tuned)])
    assert rc == 2 and "pass --stack NAME" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_stack_and_the_artifact_alone_take_the_entrys_measurements_and_peak(tuned, tmp_path):
    """``bench plan --stack NAME --hpa FILE``: the entry's referenced measurements (their sha256s checked)
    and stored peak, the same entry as with the three flags."""
    short = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path / "short")
    assert main(["plan", "--stack", "k8s-gpu", "--stack-dir", str(short.parent), "--hpa", str(tuned),
                 "--out", str(tmp_path / "out-short")]) == 0
    full = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path / "full")
    assert _plan("k8s-gpu", full.parent, "--hpa", str(tuned)) == 0
    assert load_stack_file(short).models == load_stack_file(full).models
    assert load_stack_file(short).models["kokoro-82m"].kubernetes.scale_down is not None


def test_the_short_form_refuses_a_measurement_file_changed_since_it_was_stored(tuned, tmp_path, capsys):
    stack_file = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path)
    (tmp_path / QMAX).write_text((tmp_path / QMAX).read_text() + "\n")  # other bytes than the entry's sha256
    before = stack_file.read_bytes()
    rc = main(["plan", "--stack", "k8s-gpu", "--stack-dir", str(tmp_path), "--hpa", str(tuned), "--out", str(tmp_path / "out")])
    assert rc == 2 and "sha256" in capsys.readouterr().err
    assert stack_file.read_bytes() == before and not (tmp_path / "out").exists()


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_a_keda_artifact_reaches_the_scaled_object(tmp_path, capsys):
    """``--autoscaler keda``: the tuned scale-down in the ScaledObject's advanced behavior, the target as
    its threshold, minReplicas as minReplicaCount; the stack's scheduled floors stay, and bench says the
    tuner simulated without them."""
    stack_file = copy_stack(ROOT / "examples/Pulumi.k8s-keda.yaml", tmp_path)
    assert main(["tune", "--platform", "kubernetes", "--autoscaler", "keda", "--qmax", str(tmp_path / QMAX), "--ttotal",
                 str(tmp_path / TTOTAL), "--trace", TRACE, "--draws", "2", "--holdout-days", "1", "--out", str(tmp_path / "tune"),
                 "--no-progress", "--jobs", "1"]) in (0, 1)
    art = load_artifact(tmp_path / "tune/keda-kokoro-82m-diurnal.json", HpaTuneArtifact)
    # The draws are seeded: on this short day the learned floors do not pay, so the artifact has none
    # (one with floors is refused: test_an_artifact_of_another_entry_is_refused_and_nothing_is_written).
    assert not art.hpa.get("scheduledFloors")
    capsys.readouterr()
    assert main(["plan", "--stack", "k8s-keda", "--stack-dir", str(tmp_path), "--hpa", str(tmp_path / "tune/keda-kokoro-82m-diurnal.json"),
                 "--out", str(tmp_path / "out")]) == 0
    assert "plan.schedule's" in capsys.readouterr().out
    [model] = render_stack(load_stack_file(stack_file), "k8s-keda", tmp_path / "r")
    so = {o["kind"]: o for o in read_yaml(to_yaml(model.objects))}["ScaledObject"]["spec"]
    assert so["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"] == art.hpa["behavior"]["scaleDown"]
    assert Decimal(so["triggers"][0]["metadata"]["threshold"]) == _target(art.hpa)
    assert so["minReplicaCount"] == art.hpa["minReplicas"]
    assert any(t["type"] == "cron" for t in so["triggers"])
