"""bench simulate and bench replay through the real CLI, and the simulator checked against a real
server: a trace replayed open-loop against bench.load.synthetic agrees with the simulation of the same
trace on that server's own measured ladder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.cli.main import main
from bench.load.synthetic import SyntheticServer
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact
from speech.sim.artifact import SimulationArtifact
from speech.sim.fleet import run_policy, summarize
from speech.sim.instance import build_instance
from speech.sim.peers import FixedPolicy
from speech.sim.policies import POLICY_NAMES
from tests.conftest import QMAX_REF, TTOTAL_REF

QMAX = str(QMAX_REF)
TTOTAL = str(TTOTAL_REF)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_simulate_cli_on_the_reference_prints_every_policy(tmp_path, capsys):
    rc = main(["simulate", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "5000", "--trough-rps", "10",
               "--trace", "diurnal:peak=5000,hours=6,spikes=1", "--price-per-hour", "1.5", "--out", str(tmp_path),
               "--plot"])
    out = capsys.readouterr().out
    assert rc == 0
    for name in POLICY_NAMES:
        assert f"\n{name} " in out
    art = SimulationArtifact.model_validate_json((tmp_path / "simulation-kokoro-82m-diurnal.json").read_text())
    by = {r.policy: r for r in art.results}
    assert art.kind == "simulation" and art.trace.seed == 1 and art.qmax_sha256.startswith("sha256:")
    assert by["floor"].cost_vs_floor == 1.0 and by["fixed-peak"].cost_vs_floor > by["plan"].cost_vs_floor
    assert by["reference"].peak_instances == 9 and by["reference"].rejected_share > 0.5
    assert by["plan"].cost_usd == pytest.approx(by["plan"].instance_hours * 1.5, abs=0.01)
    # One timeline with every policy overlaid, and the cost-vs-SLO scatter.
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["simulation-kokoro-82m-diurnal-cost-vs-slo.png",
                                                             "simulation-kokoro-82m-diurnal-timeline.png"]


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_simulate_json_with_a_plan_file_and_a_shipped_trace(tmp_path, capsys):
    assert main(["plan", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "300", "--trough-rps", "20", "--out",
                 str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    rc = main(["simulate", "--qmax", QMAX, "--ttotal", TTOTAL, "--plan", str(tmp_path / "plan-kokoro-82m.json"),
               "--trace", "azure-conv:peak=300", "--policies", "plan,floor", "--out", str(tmp_path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["policy"] for r in data["results"]] == ["plan", "floor"]
    assert data["trace"]["attribution"].startswith("Azure LLM inference trace 2023, Microsoft Azure")
    assert data["trace"]["source_sha256"].startswith("sha256:") and data["trace"]["peak_rps"] == pytest.approx(300)


@pytest.mark.parametrize("extra, needle", [
    (["--trace", "diurnal"], "needs peak"),
    (["--trace", "csv:/nonexistent.csv"], "no such file"),
    (["--trace", "steady:rps=5", "--policies", "plan,magic"], "unknown magic"),
    (["--trace", "steady:rps=5", "--price-per-hour", "0"], "--price-per-hour"),
    (["--trace", "steady:rps=5", "--plan", QMAX], "'qmax' artifact"),
])
def test_simulate_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, extra, needle):
    rc = main(["simulate", "--qmax", QMAX, "--ttotal", TTOTAL, "--out", str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


SERVICE_MS = 20.0
SLO_MS = 130.0  # floor(130 / 20) = 6


@pytest.mark.slow
def test_replay_against_synthetic_and_the_simulation_of_what_it_sent(tmp_path, capsys):
    """Measure the server with a short real ladder, replay a step to 3.2x its capacity open-loop
    against it with its gate at that Q_max, simulate the same arrivals on the measured ladder.

    Only what holds on a busy machine: the ladder's Q_max at most what 20 ms of deterministic
    service allows within 130 ms (load only lowers it), every request sent and answered or
    refused, and the overload refused in both the replay and the simulation. How closely the two
    agree is a measurement (benchmarks/replay_synthetic.py prints it against its tolerances): on a
    2-core machine at load 7 the client sent late (p99 251 ms) and the numbers moved with it."""
    with SyntheticServer(service_ms=SERVICE_MS) as s:
        assert main(["qmax", "--url", s.url, "--slo-ms", str(SLO_MS), "--levels", "1,2,4,6,8", "--settle-s", "0.2",
                     "--measure-s", "0.6", "--out", str(tmp_path), "--json"]) == 0
    qmax = load_artifact(next(tmp_path.glob("qmax-*.json")), QmaxArtifact)
    assert 1 <= qmax.q_max <= 7
    capsys.readouterr()
    spec = "step:base=20,factor=4,at=3,duration=8,seed=3"  # 60 before the step, 400 after: 460
    with SyntheticServer(service_ms=SERVICE_MS, queue_max=qmax.q_max) as s:
        rc = main(["replay", "--trace", spec, "--url", s.url, "--slo-ms", str(SLO_MS), "--out", str(tmp_path), "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    replay = json.loads((tmp_path / "replay-step.json").read_text())
    reqs = replay["per_request"]
    assert summary["requests"] == len(reqs) > 300 and summary["errors"] == 0
    assert summary["send_late_p99_ms"] >= 0 and all(r["late_ms"] >= 0 for r in reqs)
    real_rej = summary["rejected"] / summary["requests"]
    assert real_rej > 0.2  # the overload phase really overloaded the server

    arrivals = np.bincount(np.floor([r["due_s"] for r in reqs]).astype(int), minlength=8).astype(float)
    model = build_instance(qmax, None)
    sim = summarize(run_policy(model, arrivals, FixedPolicy("one", 1)), model, SLO_MS, planning_total_s=60)
    assert sim.rejected_share > 0.2  # the simulation of the same arrivals refuses the overload too
