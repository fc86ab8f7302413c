"""bench drift after ``bench plan --hpa``: ``--stack`` compares the live HPA with the stack's rendering,
which now has the tuned scale-down; ``--hpa FILE`` still compares it with the tune artifact's own
fields, as before the stack could store them (against the stand-in API server)."""

from __future__ import annotations

import json

import pytest

from bench.cli.main import main
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact
from speech.sim.hpa_artifact import HpaTuneArtifact
from speech.stack.read import load_stack_file
from speech.stack.render import read_yaml, render_stack, to_yaml
from tests.bench.k8s.apiserver import NAME, NS, Cluster, StandIn
from tests.conftest import ROOT
from tests.stack_files import copy_stack

pytestmark = pytest.mark.slow  # a local HTTP server

QMAX = "artifacts/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = "artifacts/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


def test_drift_reads_the_stored_tuned_hpa_and_still_compares_hpa_files_with_the_artifact(tmp_path, capsys):
    path = copy_stack(ROOT / "examples/Pulumi.k8s-gpu.yaml", tmp_path / "stack", name="dev")
    d = path.parent
    assert main(["tune", "--platform", "kubernetes", "--qmax", str(d / QMAX), "--ttotal", str(d / TTOTAL), "--trace",
                 "diurnal:peak=500,trough=10,hours=2", "--draws", "2", "--holdout-days", "1", "--out", str(tmp_path / "tune"),
                 "--no-progress", "--jobs", "1"]) in (0, 1)
    tuned = tmp_path / "tune" / "hpa-kokoro-82m-diurnal.json"
    assert main(["plan", "--qmax", str(d / QMAX), "--ttotal", str(d / TTOTAL), "--peak-rps", "500", "--stack", "dev",
                 "--stack-dir", str(d), "--out", str(tmp_path / "out"), "--hpa", str(tuned)]) == 0
    [model] = render_stack(load_stack_file(path), "dev", tmp_path / "render")
    rendered = {o["kind"]: o for o in read_yaml(to_yaml(model.objects))}["HorizontalPodAutoscaler"]["spec"]
    art = load_artifact(tuned, HpaTuneArtifact)
    capsys.readouterr()

    c = Cluster(load_artifact(d / QMAX, QmaxArtifact).fingerprint.image_digest)
    # The live HPA is what pulumi up applied from the stack.
    c.objects["hpa"]["spec"].update({k: rendered[k] for k in ("minReplicas", "maxReplicas", "metrics", "behavior")})
    with StandIn(c, tmp_path) as kubeconfig:
        assert main(["drift", "--stack", "dev", "--stack-dir", str(d), "--kubeconfig", str(kubeconfig), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["endpoints"] == {f"{NS}/{NAME}": []}
        rc = main(["drift", "--kubernetes", f"{NS}/{NAME}", "--kubeconfig", str(kubeconfig), "--hpa", str(tuned), "--json"])
        issues = json.loads(capsys.readouterr().out)["autoscalers"][f"{NS}/{NAME}"]
    # Against the artifact: only what the plan rendered differently (its cap at the tuned target) is named.
    differs = rendered["maxReplicas"] != art.hpa["maxReplicas"]
    assert rc == (1 if differs else 0)
    assert len(issues) == int(differs) and all("maxReplicas" in i["message"] for i in issues)

