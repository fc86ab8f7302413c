"""``bench plan --stack`` on a ``hosting: kubernetes`` entry keeps the kubernetes block (a re-plan
changes the plan inputs, never where and how the model runs)."""

from __future__ import annotations

from pathlib import Path

from bench.cli.main import main
from speech.stack.read import load_stack_file
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]


def test_a_replan_keeps_the_kubernetes_block(tmp_path, monkeypatch):
    stack = copy_stack(ROOT / "examples/Pulumi.k8s-keda.yaml", tmp_path)
    before = load_stack_file(stack).models["kokoro-82m"]
    monkeypatch.chdir(tmp_path)
    code = main(["plan", "--qmax", "artifacts/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json",
                 "--ttotal", "artifacts/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json",
                 "--peak-rps", "600", "--stack", "k8s-keda", "--out", str(tmp_path / "out")])
    assert code == 0
    after = load_stack_file(stack).models["kokoro-82m"]
    assert after.plan.peak_rps == 600
    assert after.hosting == "kubernetes" and after.kubernetes == before.kubernetes
    assert after.plan.schedule == before.plan.schedule
