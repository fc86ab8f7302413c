"""``bench simulate --tuned-plan``: bench tune's plan on the same trace beside the seed, and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.main import main
from speech.files import load_artifact, write_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import SEED_ROW, TUNED_ROW, SimulationArtifact, TuneArtifact
from speech.sim.policies import POLICY_NAMES
from tests.conftest import QMAX_REF, TTOTAL_REF

# Each test here runs a tune, a preview or the pack on whole stacks (seconds apiece, the setup's fixture
# tens): make test runs them, make test-fast (the inner loop) leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
TTOTAL_LOCAL = ROOT / "artifacts/local/ttotal-kokoro-82m-local-process-local-4ed3d00a.json"
TRACE = "diurnal:peak=200,trough=10,hours=1,seed=1"
INPUTS = ["--peak-rps", "200", "--trough-rps", "10"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The seed (bench plan) and the plan bench tune made from it, trained on TRACE alone (bench tune
    plans its seed with allow_config_mismatch, as the demo's bench plan does)."""
    d = tmp_path_factory.mktemp("pair")
    assert main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), *INPUTS, "--allow-config-mismatch",
                 "--out", str(d), "--json"]) in (0, 1)
    rc = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", TRACE, *INPUTS,
               "--train-days", "1", "--holdout-days", "1", "--out", str(d), "--no-progress", "--json"])
    assert rc in (0, 1)
    return d / "plan-kokoro-82m.json", d / "plan-kokoro-82m-tuned.json", d / "tune-kokoro-82m-diurnal.json"


def _simulate(out: Path, *extra: str) -> list[str]:
    return ["simulate", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", TRACE, "--out", str(out), *extra]


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_both_plans_side_by_side_and_the_promise_reproduced(pair, tmp_path, capsys):
    seed_path, tuned_path, tune_path = pair
    seed, tuned = load_artifact(seed_path, PlanArtifact), load_artifact(tuned_path, PlanArtifact)
    tune = load_artifact(tune_path, TuneArtifact)
    assert tune.seed_plan_sha256 == canonical_sha256(seed)  # the tuner started from bench plan's plan
    capsys.readouterr()
    assert main(_simulate(tmp_path / "pair", "--plan", str(seed_path), "--tuned-plan", str(tuned_path), "--json")) == 0
    art = SimulationArtifact.model_validate_json(capsys.readouterr().out)
    names = [r.policy for r in art.results]
    assert names == [SEED_ROW, TUNED_ROW, *[p for p in POLICY_NAMES if p != "plan"]]
    assert art.plan_sha256 == canonical_sha256(seed) and art.tuned_plan_sha256 == canonical_sha256(tuned)
    assert art == load_artifact(tmp_path / "pair" / "simulation-kokoro-82m-diurnal.json", SimulationArtifact)
    row, seed_row = art.result(TUNED_ROW), art.seed_result()
    assert row is not None and seed_row is not None
    # Trained on this very trace: the simulation reproduces the promise (one simulator, one model).
    assert tuned.promise is not None
    assert row.within_slo_share == pytest.approx(tuned.promise.slo_share, abs=1e-6)
    assert row.rejected_share == pytest.approx(tuned.promise.rejected_share, abs=1e-6)
    assert row.instance_hours == pytest.approx(tuned.promise.instance_hours, abs=1e-3)
    # On its training trace the search never pays more than a seed that keeps the share, and never
    # keeps less than one that does not.
    if seed_row.within_slo_share >= 0.995:
        assert row.instance_hours <= seed_row.instance_hours
    else:
        assert row.within_slo_share >= seed_row.within_slo_share
    # The seed's row is the plan's row of a run without --tuned-plan, renamed.
    assert main(_simulate(tmp_path / "alone", "--plan", str(seed_path), "--json")) == 0
    alone = SimulationArtifact.model_validate_json(capsys.readouterr().out)
    assert "tuned_plan_sha256" not in json.loads(alone.model_dump_json())
    assert alone.seed_result() == seed_row.model_copy(update={"policy": "plan"})


def test_the_table_names_both_rows_and_prints_the_promise(pair, tmp_path, capsys):
    seed_path, tuned_path, _ = pair
    assert main(_simulate(tmp_path, "--plan", str(seed_path), "--tuned-plan", str(tuned_path),
                          "--policies", "plan,floor")) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    rows = [ln.split("  ")[0] for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("policy"))) + 2:]]
    assert rows[:3] == [SEED_ROW, TUNED_ROW, "floor"]
    row = load_artifact(tmp_path / "simulation-kokoro-82m-diurnal.json", SimulationArtifact).result(TUNED_ROW)
    assert row is not None
    head = f"tuned plan: sized for 99.50% within the SLO; on this trace {100 * row.within_slo_share:.2f}%: "
    if row.within_slo_share >= 0.995:
        assert head + "keeps it" in out
    else:  # why (the refused and the late share) and what would keep it
        missed = 1 - row.within_slo_share
        assert (head + f"MISSES it: {100 * missed:.2f}% missed: {100 * row.rejected_share:.2f}% refused at the gate "
                "(Q_max 50 in flight per instance)") in out
        assert "what would keep 99.50%: " in out and "a queue in front" in out
    assert "  promise (bench tune, 1 h training trace " in out and "vs the seed plan: " in out
    # the promise's interval over the draws it was tuned on, and where this trace falls in it
    pr = load_artifact(tuned_path, PlanArtifact).promise
    assert pr is not None and pr.slo_share_low is not None
    assert (f"  promised interval over its draws: {100 * pr.slo_share_low:.2f}-{100 * pr.slo_share_high:.2f}% within the "
            f"SLO, {pr.instance_hours_low:.1f}-{pr.instance_hours_high:.1f} inst-h; this trace is ") in out
    # what is left to win: the tuned plan -> perfect-forecast -> floor, when both ran
    assert "tuned plan -> perfect-forecast" not in out and "perfect-forecast -> floor" not in out
    assert main(_simulate(tmp_path / "gaps", "--plan", str(seed_path), "--tuned-plan", str(tuned_path),
                          "--policies", "plan,perfect-forecast,floor")) == 0
    out = capsys.readouterr().out
    assert "tuned plan -> perfect-forecast: " in out and "perfect-forecast -> floor: " in out


def _write(tmp_path: Path, plan: PlanArtifact) -> Path:
    return write_artifact(tmp_path / "given" / "plan-kokoro-82m-tuned.json", plan)


@pytest.mark.parametrize("case, needle", [
    ("other-artifacts", "--tuned-plan {path} was planned from other artifacts than --qmax/--ttotal (sha256 differs)"),
    ("other-slo", "--tuned-plan {path} plans for an SLO of 2500 ms, the seed plan for 3000 ms"),
    ("not-a-plan", "is a 'qmax' artifact, expected 'plan'"),
])
def test_bad_tuned_plan_exits_2_with_one_line_and_writes_nothing(pair, tmp_path, capsys, case, needle):
    seed_path, _, _ = pair
    q = load_artifact(QMAX_REF, QmaxArtifact)
    if case == "other-artifacts":  # tuned from the local ttotal, simulated against the reference one
        other = build_plan(q, load_artifact(TTOTAL_LOCAL, TtotalArtifact), PlanInputs(peak_rps=200, trough_rps=10),
                           allow_config_mismatch=True)
        path = _write(tmp_path, other)
    elif case == "other-slo":
        path = _write(tmp_path, build_plan(q, load_artifact(TTOTAL_REF, TtotalArtifact),
                                           PlanInputs(slo_ms=2500, peak_rps=200, trough_rps=10)))
    else:
        path = QMAX_REF
    out = tmp_path / "o"
    capsys.readouterr()
    assert main(_simulate(out, "--plan", str(seed_path), "--tuned-plan", str(path))) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1
    assert needle.format(path=path) in cap.err and "Traceback" not in cap.err
    assert not out.exists()


def test_help_explains_the_flag(capsys):
    assert main(["simulate", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--tuned-plan FILE" in text and '"seed plan" and "tuned plan"' in text
