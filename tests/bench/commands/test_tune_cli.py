"""``bench tune`` end to end on a short trace, and its bad input."""

from __future__ import annotations

import json

import pytest

from bench.cli.main import main
from speech.files import load_artifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import TuneArtifact
from tests.conftest import QMAX_REF, TTOTAL_REF

TRACE = "diurnal:peak=600,hours=3,spikes=2,spike_s=120"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    rc = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--trace", TRACE,
               "--train-days", "1", "--holdout-days", "1", "--out", str(out), "--no-progress", "--json", "--jobs", "1"])
    return rc, out


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_tune_writes_plan_and_promise(tuned, capsys):
    rc, out = tuned
    assert rc in (0, 1)
    art = load_artifact(out / "tune-kokoro-82m-diurnal.json", TuneArtifact)
    plan = load_artifact(out / "plan-kokoro-82m-tuned.json", PlanArtifact)
    from speech.schema.artifacts import canonical_sha256

    assert art.tuned_plan_sha256 == canonical_sha256(plan)
    p, s = art.promise, art.seed
    assert p.trace == TRACE and p.seed == 1 and "speech.sim" in p.simulator_version
    # the artifact's JSON keeps its keys and the digest's prefix (speech.sim.artifact.TunePromise)
    written = json.loads((out / "tune-kokoro-82m-diurnal.json").read_text())["promise"]
    assert written["trace_sha256"] == "sha256:" + p.trace_sha256 and written["within_slo_share"] == p.slo_share
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
    assert pr is not None and pr == p.plan_promise() and pr.seed == 1 and pr.trace_hours == 3
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
    (["--jobs", "0"], "--jobs"),
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
    # bench.cli.main answers --help itself (exit 0) rather than letting argparse raise SystemExit.
    assert main(["tune", "--help"]) == 0
    text = capsys.readouterr().out
    assert "seed formulas" in text and "--slo-share" in text and json is not None


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_draws_judge_every_candidate_and_the_promise_records_the_interval(tmp_path):
    """--draws 3: the tuned plan keeps the share on its LOWEST draw (when the seed does), and the
    promise's low and high are the lowest and highest of its own runs on those draws (re-simulated
    here with the written plan)."""
    import numpy as np

    from bench.operations.tune import draw as _day
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.instance import build_instance
    from speech.sim.policies import AwsPolicy
    from speech.sim.scaler import scaling_numbers

    trace = "diurnal:peak=300,hours=1,spikes=1,spike_s=120"
    rc = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--trace", trace,
               "--draws", "3", "--holdout-days", "1", "--out", str(tmp_path), "--no-progress", "--json"])
    assert rc in (0, 1)
    art = load_artifact(tmp_path / "tune-kokoro-82m-diurnal.json", TuneArtifact)
    plan = load_artifact(tmp_path / "plan-kokoro-82m-tuned.json", PlanArtifact)
    p, pr = art.promise, plan.promise
    assert p.draws == 3 and pr is not None
    assert p.slo_share_low <= p.slo_share <= p.slo_share_high
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    model = build_instance(q, t, slo_ms=3000)
    s = scaling_numbers(plan)
    runs = [summarize(run_policy(model, _day(trace, seed), AwsPolicy(s, model.cloudwatch_ratio, model.q_max),
                                 warm_x_rps=s.x_target_rps), model, 3000, s.planning_total_s) for seed in (1, 2, 3)]
    shares, hours = [r.within_slo_share for r in runs], [r.instance_hours for r in runs]
    assert pr.slo_share_low == pytest.approx(min(shares), abs=1e-6) == p.slo_share_low
    assert pr.slo_share_high == pytest.approx(max(shares), abs=1e-6)
    assert pr.instance_hours_low == pytest.approx(min(hours), abs=1e-3)
    assert pr.instance_hours_high == pytest.approx(max(hours), abs=1e-3)
    assert pr.slo_share == pytest.approx(float(np.mean(shares)), abs=1e-6)
    # the promise records the bound for unseen draws the plan was chosen by, from these very runs
    from speech.sim.tune import unseen_share_bound

    bound = unseen_share_bound(shares, blocks=([r.block_requests for r in runs], [r.block_within for r in runs]))
    assert pr.slo_share_bound == pytest.approx(bound.bound, abs=1e-6) == p.slo_share_bound
    assert p.slo_share_bound_t == pytest.approx(bound.t, abs=1e-4) and p.slo_share_bound_sd == pytest.approx(bound.sd, abs=1e-6)
    assert pr.slo_share_bound <= pr.slo_share_low
    from bench.report.tune import render_tune as render

    text = render(art)  # the table prints the bound and how it was made
    assert f"{p.slo_share_bound:.3%}" in text and f"t {p.slo_share_bound_t:.2f} x sd" in text
    if art.seed.slo_share_bound is not None and art.seed.slo_share_bound >= 0.995:
        # the cheapest whose bound keeps the target, not its mean nor merely its lowest draw
        assert bound.bound >= 0.995 and min(shares) >= 0.995
    # the promise in the plan's JSON carries the five keys beside the existing ones
    on = json.loads(plan.model_dump_json())["promise"]
    assert {"slo_share_low", "slo_share_high", "slo_share_bound", "instance_hours_low", "instance_hours_high",
            "slo_share"} <= set(on)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_the_artifacts_do_not_depend_on_jobs(tuned, tmp_path):
    """--jobs 2 (two worker processes, draws run ahead) writes what the fixture's default run wrote,
    byte for byte but for the creation time."""
    rc, out = tuned
    again = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000", "--trace", TRACE,
                  "--train-days", "1", "--holdout-days", "1", "--out", str(tmp_path), "--no-progress", "--json",
                  "--jobs", "2"])
    assert again == rc
    for name in ("tune-kokoro-82m-diurnal.json", "plan-kokoro-82m-tuned.json"):
        a, b = (json.loads((d / name).read_text()) for d in (out, tmp_path))
        for d in (a, b):
            d.pop("created_at", None)
        assert a == b, name


def test_five_draws_by_default(capsys):
    from bench.cli.parsers.tune import DEFAULT_DRAWS

    assert main(["tune", "--help"]) == 0
    assert DEFAULT_DRAWS == 5 and "--draws" in capsys.readouterr().out


def test_the_moved_crowds_check_is_recorded_and_said(tuned):
    """A trace without a forecast history runs no crowd check: the artifact has no such key (older
    readers unaffected). With one, the text says what it judged and what it kept, and a kept plan
    whose bound there misses the target says so."""
    from bench.report.tune import render_tune
    from speech.sim.artifact import CrowdCheckRecord

    _, out = tuned
    art = load_artifact(out / "tune-kokoro-82m-diurnal.json", TuneArtifact)
    assert art.crowd_check is None and "crowd_check" not in art.model_dump(mode="json")
    rec = CrowdCheckRecord(crowds=15, moved_draws=15, winner_bound=0.99445,
                           tried=["busy headroom x1.1: below the target on a draw", "busy headroom x1.3: bound 99.689%"],
                           chosen="busy headroom x1.3", kept=True)
    text = render_tune(art.model_copy(update={"crowd_check": rec}))
    assert ("crowds: 15 in the training draws; the tuned row is judged on them and 15 copies with their crowds at other "
            "hours") in text
    assert "winner bounds 99.445% there; raised: busy headroom x1.1: below the target on a draw; busy headroom x1.3: " \
           "bound 99.689%; kept: busy headroom x1.3" in text
    missed = render_tune(art.model_copy(update={"crowd_check": rec.model_copy(update={"kept": False})}))
    assert "(its bound there is BELOW the target)" in missed
    assert TuneArtifact.model_validate_json(art.model_copy(update={"crowd_check": rec}).model_dump_json()).crowd_check == rec


def test_a_fixed_fleet_says_why_it_is_one(tmp_path):
    """azure-code's bursts are shorter than a start-up: the search settles on the fixed-peak fleet, and
    the floor's reason must say that (not the generic "the plan's floor let the share slip at the
    trough", which sends the user to the wrong hours)."""
    out = tmp_path / "o"
    rc = main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000",
               "--trace", "azure-code:peak=500", "--out", str(out), "--no-progress", "--json", "--jobs", "1"])
    assert rc in (0, 1)
    art = load_artifact(out / "tune-kokoro-82m-azure-code.json", TuneArtifact)
    floor = next(v for v in art.values if v.knob == "min_instances")
    assert floor.tuned != floor.seed and "fixed-peak fleet" in floor.reason and "start-up (213 s)" in floor.reason
    assert f"({floor.tuned} instances" in floor.reason
    plan = load_artifact(out / "plan-kokoro-82m-tuned.json", PlanArtifact)
    assert plan.inputs.min_instances == int(floor.tuned)


def test_a_floor_raised_short_of_the_fixed_fleet_keeps_the_generic_reason():
    from dataclasses import replace

    from speech.sim.knobs import REASONS, Knobs, knob_reasons

    seed = Knobs(surge_ratio=1.25, target_share=None, datapoints_to_alarm=3, min_instances=5, scale_in_step_share=None,
                 scale_in_window_s=None, scale_in_cooldown_s=None)
    seven = knob_reasons(seed, replace(seed, min_instances=7), fixed_peak_instances=28, startup_s=212.8)
    assert seven == {"min_instances": REASONS["min_instances"]}
    assert "fixed-peak" in knob_reasons(seed, replace(seed, min_instances=28), fixed_peak_instances=28,
                                        startup_s=212.8)["min_instances"]
    assert knob_reasons(seed, seed, fixed_peak_instances=28, startup_s=212.8) == {}
