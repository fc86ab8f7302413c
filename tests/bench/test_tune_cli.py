"""``bench tune`` end to end on a short trace, and its bad input."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from speech.files import load_artifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import TuneArtifact
from tests.conftest import QMAX_REF, TTOTAL_REF

TRACE = "diurnal:peak=600,hours=3,spikes=2,spike_s=120"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    rc = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--trace", TRACE,
               "--train-days", "1", "--holdout-days", "1", "--out", str(out), "--no-progress", "--json"])
    return rc, out


def test_tune_writes_plan_and_promise(tuned, capsys):
    rc, out = tuned
    assert rc in (0, 1)
    art = load_artifact(out / "tune-kokoro-82m-diurnal.json", TuneArtifact)
    plan = load_artifact(out / "plan-kokoro-82m-tuned.json", PlanArtifact)
    from speech.schema.artifacts import canonical_sha256

    assert art.tuned_plan_sha256 == canonical_sha256(plan)
    p, s = art.promise, art.seed
    assert p.trace == TRACE and p.trace_sha256.startswith("sha256:") and p.seed == 1 and "speech.sim" in p.simulator_version
    # the search only accepts what keeps the share (when the seed does), and never pays more than the seed
    if s.within_slo_share_worst_day >= 0.995:
        assert p.within_slo_share_worst_day >= 0.995 and p.instance_hours <= s.instance_hours
    assert p.cost_vs_floor > 0
    from speech.sim.tune import KNOBS

    assert [v.knob for v in art.values] == list(KNOBS)
    for v in art.values:
        assert v.reason and (v.seed != v.tuned or v.reason == "the seed formula kept")
    # the written plan carries the tuned inputs, their reasons and the promise
    pr = plan.promise
    assert pr is not None and pr.trace_sha256 == p.trace_sha256.removeprefix("sha256:") and pr.seed == 1
    assert pr.slo_share == pytest.approx(p.within_slo_share) and pr.cost_vs_floor == pytest.approx(p.cost_vs_floor)
    assert {v.name for v in plan.tuning} <= set(KNOBS)
    assert [c.day for c in art.checks] == ["held-out seed 2", "spikes x1.25", "shifted 0.125 h"]
    assert art.held == (rc == 0)


def test_tuned_values_stay_inside_their_bounds(tuned):
    _, out = tuned
    plan = load_artifact(out / "plan-kokoro-82m-tuned.json", PlanArtifact)
    from speech.sim.scaler import scaling_numbers

    s = scaling_numbers(plan)
    assert s.scale_in_cooldown_s >= plan.t_total.planning_s
    assert s.scale_in_cooldown_s >= s.scale_in_periods * s.metric_period_s
    if s.scale_in_percent is not None:
        th = plan.thresholds
        assert -s.scale_in_percent / 100 <= 1 - th.scale_in_threshold / th.scaling_target_value + 0.01


@pytest.mark.parametrize("flags, needle", [
    (["--slo-share", "1.5"], "--slo-share"),
    (["--draws", "0"], "--draws"),
    (["--trace", "diurnal"], "needs peak"),
    (["--surge-ratio", "2"], "--surge-ratio"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, flags, needle):
    args = ["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", TRACE, "--out", str(tmp_path / "o"),
            "--no-progress"]
    for i in range(0, len(flags), 2):
        if flags[i] in args:
            args[args.index(flags[i]) + 1] = flags[i + 1]
        else:
            args += flags[i : i + 2]
    assert main(args) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_help_explains(capsys):
    # bench.cli answers --help itself (exit 0) rather than letting argparse raise SystemExit.
    assert main(["tune", "--help"]) == 0
    text = capsys.readouterr().out
    assert "seed formulas" in text and "--slo-share" in text and json is not None
