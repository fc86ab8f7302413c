"""`bench demo --quick`: the reduced chain on the real container and model, end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ruamel.yaml import YAML

from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import ModelConfig
from speech.files import load_artifact
from speech.sim.policies import POLICY_NAMES
from speech.sim.artifact import SimulationArtifact

ROOT = Path(__file__).resolve().parents[2]


def _demo(tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench", "demo", "--quick", "--out", str(tmp_path / "out"),
         "--stack-dir", str(tmp_path), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def test_quick_demo_runs_the_whole_chain(tmp_path):
    proc = _demo(tmp_path)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    d = tmp_path / "out"
    [qp] = d.glob("qmax-kokoro-82m-stream-local-*.json")
    [tp] = d.glob("ttotal-kokoro-82m-local-process-local-*.json")
    q = load_artifact(qp, QmaxArtifact)
    t = load_artifact(tp, TtotalArtifact)
    plan = load_artifact(d / "plan-kokoro-82m.json", PlanArtifact)
    assert q.provenance.origin == "measured" and t.provenance.origin == "measured"
    assert [lv.concurrency for lv in q.ladder] == [1, 2]
    assert [p.name for p in t.phases if p.applicable][:2] == ["desired_set", "container_started"]
    # The plan's numbers follow from the ladder it printed.
    assert plan.q_max == q.q_max
    # At most the surge rule's 0.75 x Q_max; at a small Q_max the SLO share lowers it, and says so.
    assert plan.thresholds.c_scale_max <= 0.75 * q.q_max + 1e-9
    assert plan.finding("slo_share").level in ("ok", "warn") and plan.capacity.refused_share_at_peak <= 0.005
    assert plan.t_total.measured_s == pytest.approx(t.measured_total_s, abs=1e-3)
    assert f"Q_max {q.q_max}" in out
    # Stack config: the measured artifacts as structured config the program reads back.
    cfg = YAML(typ="safe").load((tmp_path / "Pulumi.local.yaml").read_text())["config"]
    entry = ModelConfig.model_validate(cfg["speech-endpoints:models"]["kokoro-82m"])
    assert entry.measurements.qmax == q and entry.instance_type == "ml.g5.xlarge"
    assert cfg["speech-endpoints:allow_config_mismatch"] is True
    # The preview planned scaling from these numbers and the pack said what it thinks of them.
    assert re.search(r"gate: kokoro-82m: scaling", out)
    assert "deployment-matches-fingerprint" in out
    # The plan simulated against every policy on an hour of diurnal traffic at the planned peak.
    [sp] = d.glob("simulation-kokoro-82m-diurnal.json")
    sim = load_artifact(sp, SimulationArtifact)
    assert sim.plan_sha256 == canonical_sha256(plan) and sim.qmax_sha256 == canonical_sha256(q)
    assert sim.trace.spec == "diurnal:peak=20,trough=1,hours=1,seed=1" and sim.trace.duration_s == 3600
    assert sim.trace.peak_rps == pytest.approx(20, rel=0.25)
    by = {r.policy: r for r in sim.results}
    assert list(by) == list(POLICY_NAMES) and by["oracle"].cost_vs_oracle == 1.0
    assert by["fixed-peak"].instance_hours > by["oracle"].instance_hours
    assert re.search(r"\npolicy +in SLO +rejected", out) and re.search(r"\nplan +\d+\.\d\d% ", out)
    assert len(list(d.glob("simulation-kokoro-82m-diurnal-*.png"))) == len(POLICY_NAMES) + 1
    report = (d / "report.html").read_text()
    assert "data:image/png;base64," in report and "deployment-matches-fingerprint" in report
    section = report[report.index("<h2>Simulation"):report.index("<h2>Findings")]
    assert sim.trace.spec in section
    for r in sim.results:  # every policy's row with its numbers, and its timeline
        assert f"{100 * r.within_slo_share:.2f}%" in section and f"<h3>{r.policy}</h3>" in section
    # ladder, waterfall, the cost-vs-SLO scatter and one timeline per policy, all embedded
    assert report.count("data:image/png;base64,") == 2 + 1 + len(POLICY_NAMES)
    assert list(d.glob("*.tmp")) == [] and list(d.glob(".*.tmp")) == []


def test_ctrl_c_stops_the_container_and_writes_nothing_half(tmp_path):
    proc = _demo(tmp_path)
    url = None
    deadline = time.monotonic() + 300
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        m = re.search(r"ready at (http://127\.0\.0\.1:\d+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "".join(lines)
    time.sleep(1.0)  # inside the qmax ladder now
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/ping", timeout=2)
    d = tmp_path / "out"
    leftovers = [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    for p in d.glob("*.json"):  # whatever exists is whole
        json.loads(p.read_text())
    assert not (tmp_path / "Pulumi.local.yaml").exists()
