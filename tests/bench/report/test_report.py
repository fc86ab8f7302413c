"""The report answers first (bench.report.html.answer) and the ladder plot says why a level failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report.html import PolicyViolation, answer, render_report, usd_per_day
from bench.report.plots import qmax_figure, why_level_failed
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.artifact import PolicyResult, SimulationArtifact, TraceRecord

ROOT = Path(__file__).resolve().parents[3]
REF = ROOT / "artifacts/reference"


@pytest.fixture(scope="module")
def ref():
    q = load_artifact(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json", QmaxArtifact)
    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    return q, t, build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10))


def _result(policy: str, within: float, rejected: float, peak: int, inst_h: float = 10.0) -> PolicyResult:
    return PolicyResult(policy=policy, within_slo_share=within, rejected_share=rejected, ttfab_p95_ms=900.0,
                        ttfab_p99_ms=2000.0, violation_minutes=0, instance_hours=inst_h, cost_usd=None, cost_vs_floor=1.0,
                        scale_out_actions=3, scale_in_actions=2, flaps=0, peak_instances=peak)


def _sim(plan, *results: PolicyResult) -> SimulationArtifact:
    return SimulationArtifact(model="kokoro-82m", slo_ms=3000, qmax_sha256="sha256:" + "0" * 64,
                              ttotal_sha256="sha256:" + "0" * 64, plan_sha256="sha256:" + "0" * 64,
                              trace=TraceRecord(spec="diurnal:peak=200", name="diurnal", duration_s=7200,
                                                requests=1e6, peak_rps=201.0),
                              startup_s=212.8, planning_total_s=plan.t_total.planning_s, results=list(results))


BLOCK = PolicyViolation("mandatory", "deployment-matches-fingerprint", "kokoro-82m-model", "deploys another image; fix: ...")


def test_blocked_stack_answers_with_the_one_reason_fleet_shares_and_dollars(ref):
    q, t, plan = ref
    sim = _sim(plan, _result("plan", 0.99, 0.01, plan.fleet.max_instances, inst_h=20.0), _result("floor", 0.997, 0.003, 11))
    a = answer(plan, [PolicyViolation("advisory", "x", "r", "m"), BLOCK], True, sim)
    assert a.blocked is True and a.deploy == "BLOCKED: cannot deploy (deployment-matches-fingerprint)"
    assert a.deploy_reason == "kokoro-82m-model: deploys another image; fix: ..."
    assert a.fleet.startswith(f"{plan.fleet.min_instances}-{plan.fleet.max_instances} x ml.g5.xlarge")
    assert a.simulated == "99.00% within the SLO (3000 ms p95 TTFAB), 1.00% rejected"
    # At its ceiling: the reason is the fleet maximum, and the floor says part of it is capacity.
    assert f"the fleet reached its maximum of {plan.fleet.max_instances} instances" in a.simulated_reason
    assert "floor (the fewest instances that keep the share, clairvoyant, no start-up) rejects 0.30%" in a.simulated_reason
    # Dollars at the price table's figure: floor, maximum and the simulated mean (20 inst-h over 2 h = 10).
    price = 1.408
    assert a.cost == (f"${usd_per_day(plan.fleet.min_instances, price):,.2f} - "
                      f"${usd_per_day(plan.fleet.max_instances, price):,.2f} per day (floor - maximum); "
                      f"${10 * price * 24:,.2f} per day at the simulated mean fleet")
    html = render_report(plan=plan, qmax=q, ttotal=t, violations=[BLOCK], policy_ran=True, simulation=sim)
    # The answer comes before everything else on the page, the policy table before the ladder.
    assert html.index("id='answer'") < html.index("<h2>Policy pack") < html.index("<h2>Q_max")


def test_rejections_below_the_ceiling_are_blamed_on_start_up_time(ref):
    _, _, plan = ref
    sim = _sim(plan, _result("plan", 0.98, 0.02, plan.fleet.max_instances - 1), _result("floor", 1.0, 0.0, 11))
    a = answer(plan, [], True, sim)
    assert a.blocked is False and a.deploy == "CAN DEPLOY"
    assert f"a scale-out serves only after T_total {plan.t_total.planning_s:.0f} s" in a.simulated_reason
    assert "start-up time is the cause" in a.simulated_reason


def test_unpriced_instance_and_no_pack_say_so(ref):
    _, _, plan = ref
    other = plan.model_copy(update={"fingerprint": plan.fingerprint.model_copy(update={"instance_type": "ml.x9.huge"})})
    a = answer(other, None, False, None)
    assert (a.blocked, a.deploy, a.cost, a.simulated) == (None, "not checked", "no price", "not simulated")
    assert "ml.x9.huge is not in the price table" in a.cost_reason
    assert answer(other, None, False, None, prices={"ml.x9.huge": 2.0}).cost.startswith("$")
    # Priced as what the stack deploys when that is not what was measured (the demo: local -> ml.g5.xlarge).
    assert answer(other, None, False, None, instance_type="ml.g5.xlarge").cost.startswith("$")


def test_a_plan_that_stops_says_so_instead_of_a_fleet(ref):
    q, t, _ = ref
    plan = build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10), max_instances_cap=2)
    assert plan.verdict == "stop"
    a = answer(plan, [], True, None)
    assert a.fleet.startswith("no scaling: the plan stops (fleet_capacity: ") and a.cost == "no fleet planned"


def test_ladder_plot_starts_at_zero_on_integer_concurrency_and_says_why_levels_failed(ref):
    q, _, _ = ref
    ladder = list(q.ladder)
    # A level under the SLO that failed on rejections (the gate answered 503), next to one over it.
    ladder[-2] = ladder[-2].model_copy(update={"rejected": 7, "meets_slo": False})
    a = q.model_copy(update={"ladder": ladder, "q_max": ladder[-3].concurrency})
    assert why_level_failed(ladder[-2], a.slo.ttfab_p95_ms) == "7 rejected (503)"
    assert why_level_failed(ladder[-1], a.slo.ttfab_p95_ms) == "p95 3375 ms > SLO"
    fig = qmax_figure(a)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    assert all(float(x).is_integer() for x in ax.get_xticks())
    notes = [t.get_text() for t in ax.texts]
    assert notes == ["7 rejected (503)", "p95 3375 ms > SLO"]
    labels = ax.get_legend_handles_labels()[1]
    assert "failed: rejections/errors under the SLO" in labels and "failed: p95 over the SLO" in labels


# --- the tuned plan beside the seed (bench.report.tuned) ------------------------------------------

TRACE = "diurnal:peak=200,trough=10,hours=1,seed=1"


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory):
    """bench plan, bench tune on TRACE from the same inputs, bench simulate with both: the real files."""
    from bench.cli.main import main
    from speech.sim.artifact import TuneArtifact

    d = tmp_path_factory.mktemp("tuned")
    common = ["--qmax", str(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"),
              "--ttotal", str(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json")]
    inputs = ["--peak-rps", "200", "--trough-rps", "10"]
    assert main(["plan", *common, *inputs, "--allow-config-mismatch", "--out", str(d), "--json"]) in (0, 1)
    assert main(["tune", *common, *inputs, "--trace", TRACE, "--train-days", "1", "--holdout-days", "1", "--out", str(d),
                 "--no-progress", "--json"]) in (0, 1)
    assert main(["simulate", *common, "--plan", str(d / "plan-kokoro-82m.json"), "--tuned-plan",
                 str(d / "plan-kokoro-82m-tuned.json"), "--trace", TRACE, "--out", str(d), "--json"]) == 0
    from speech.schema.plan_artifacts import PlanArtifact

    return (load_artifact(d / "plan-kokoro-82m.json", PlanArtifact), load_artifact(d / "plan-kokoro-82m-tuned.json", PlanArtifact),
            load_artifact(d / "tune-kokoro-82m-diurnal.json", TuneArtifact),
            load_artifact(d / "simulation-kokoro-82m-diurnal.json", SimulationArtifact))


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_report_shows_the_tuned_inputs_beside_the_seed_and_the_promise_against_the_simulation(ref, tuned_run):
    import html as h

    from bench.report.tuned import promise_check
    from speech.sim.artifact import SEED_ROW, TUNED_ROW

    q, t, _ = ref
    seed, tuned, tune, sim = tuned_run
    page = render_report(plan=seed, qmax=q, ttotal=t, simulation=sim, tuned_plan=tuned, tune=tune)
    section = page[page.index("<h2>The tuned plan"):page.index("<h2>Simulation: the seed and tuned plans")]
    assert "its seed is the plan above (the same sha256)" in section
    for v in tune.values:
        assert f"<td>{v.knob}</td><td>{h.escape(v.seed)}</td><td>{h.escape(v.tuned)}</td><td>{h.escape(v.reason)}</td>" in section
    assert (f"<td>fleet (min-max)</td><td>{seed.fleet.min_instances}-{seed.fleet.max_instances}</td>"
            f"<td>{tuned.fleet.min_instances}-{tuned.fleet.max_instances}</td>") in section
    pr = tuned.promise
    assert pr is not None and f"{100 * pr.slo_share:.2f}% within the SLO, {100 * pr.rejected_share:.2f}% refused" in section
    row = sim.result(TUNED_ROW)
    for r in (sim.result(SEED_ROW), row):  # both simulated rows
        assert f"<td>{r.policy}</td><td class=\"num\">{100 * r.within_slo_share:.2f}%</td>" in section
    c = promise_check(tuned, sim)
    assert c is not None and c.simulated_share == row.within_slo_share and c.matches_promise  # trained on TRACE itself
    assert c.kept == (row.within_slo_share >= 0.995)
    for k in tune.checks:
        assert f"<td>{h.escape(k.day)}</td>" in section
    # the tuned plan's own findings, its promise among them
    assert f"<td>promise</td><td>{h.escape(tuned.finding('promise').message)}</td>" in section


def _pair(plan, tuned, seed_share: float, tuned_share: float, tuned_rejected: float):
    from speech.schema.artifacts import canonical_sha256

    sim = _sim(plan, _result("seed plan", seed_share, 0.002, 12, inst_h=20.0),
               _result("tuned plan", tuned_share, tuned_rejected, 12, inst_h=16.0), _result("floor", 0.999, 0.001, 11))
    return sim.model_copy(update={"tuned_plan_sha256": canonical_sha256(tuned)})


def _tuned_with_promise(q, t, share: float, rejected: float):
    from speech.schema.config import Promise

    promise = Promise(slo_share=share, rejected_share=rejected, instance_hours=16.0, cost_vs_floor=1.4,
                      trace_sha256="b" * 64, seed=1, simulator_version="sim-2")
    return build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10, min_instances=2, promise=promise))


def test_a_tuned_plan_that_misses_its_share_says_why_and_what_would_in_the_report_and_its_findings(ref):
    from bench.report.tuned import promise_check

    q, t, plan = ref
    tuned = _tuned_with_promise(q, t, 0.99, 0.008)
    sim = _pair(plan, tuned, 0.992, 0.99, 0.008)
    c = promise_check(tuned, sim)
    assert c is not None and not c.kept and c.matches_promise
    # 1% missed, 0.8% of it refused at the gate: the floor first, then the levers no fleet size replaces
    assert c.why == ("1.00% missed: 0.80% refused at the gate (Q_max 50 in flight per instance) and 0.20% answered after "
                     "the SLO; what would keep 99.50%: more floor (min_instances: instances already serving when traffic "
                     "rises, not one that serves a T_total later), a looser SLO (Q_max grows with it: re-run bench qmax "
                     "--slo-ms), a queue in front (a client that retries 503 with backoff absorbs the refused share), or a "
                     "batch route (priority: batch, hosting: async) for requests that can wait")
    f = tuned.finding("promise")  # the plan's own finding says the same
    assert f.level == "warn" and c.why in f.message
    a = answer(plan, [], True, sim, tuned_plan=tuned)
    assert a.tuned == "99.00% within the SLO, 16.0 instance-hours (-20.0% vs the seed plan's 20.0): MISSES 99.50%"
    page = render_report(plan=plan, qmax=q, ttotal=t, simulation=sim, tuned_plan=tuned)
    verdict = page[page.index("id='promise-check'"):]
    assert "MISSES the SLO share it is sized for: 99.00% within the SLO (&lt; 99.50%); 1.00% missed" in verdict
    # without a tune artifact each knob as the two plans deploy it, the reasons the plan artifact kept
    assert (f"<td>min_instances</td><td>{plan.fleet.min_instances}</td><td>{tuned.fleet.min_instances}</td>"
            "<td>no reason in the plan artifact (bench tune&#x27;s tune-*.json has it)</td>") in page
    assert "<td>surge_ratio</td><td>1.25</td><td>1.25</td><td>the seed formula kept</td>" in page


def test_a_tuned_plan_that_keeps_its_share_off_its_training_trace_says_by_how_much(ref):
    from bench.report.tuned import promise_check, verdict_line

    q, t, plan = ref
    tuned = _tuned_with_promise(q, t, 0.998, 0.001)
    c = promise_check(tuned, _pair(plan, tuned, 0.997, 0.996, 0.003))
    assert c is not None and c.kept and c.matches_promise is False and c.why is None
    assert verdict_line(c) == ("The tuned plan keeps the SLO share it is sized for: 99.60% within the SLO (>= 99.50%); the "
                               "promise was 99.80% (the mean of its draws), this trace -0.20 points.")


def test_a_simulation_of_another_tuned_plan_is_not_checked_against_this_one(ref):
    from bench.report.tuned import promise_check

    q, t, plan = ref
    tuned = _tuned_with_promise(q, t, 0.998, 0.001)
    other = _pair(plan, plan, 0.997, 0.996, 0.003)  # its tuned row is of another plan
    assert promise_check(tuned, other) is None and answer(plan, [], True, other, tuned_plan=tuned).tuned is None
    page = render_report(plan=plan, qmax=q, ttotal=t, simulation=other, tuned_plan=tuned)
    assert "The simulation below did not run this tuned plan." in page


def test_the_cost_row_prices_the_tuned_plan_it_recommends_next_to_the_seed(ref):
    """Issue 36: the tuned plan's USD/day at its simulated mean fleet and at its cap, then the seed's."""
    q, t, plan = ref
    tuned = _tuned_with_promise(q, t, 0.998, 0.001)
    a = answer(plan, [], True, _pair(plan, tuned, 0.997, 0.996, 0.003), tuned_plan=tuned)
    price = 1.408
    first, seed = a.costs
    assert (first.plan, seed.plan) == ("tuned plan", "seed plan")
    # 16 and 20 instance-hours over the 2 h trace: mean fleets of 8 and 10
    assert first.mean_instances == pytest.approx(8.0) and seed.mean_instances == pytest.approx(10.0)
    assert first.usd_per_day_mean == pytest.approx(usd_per_day(8, price))
    assert first.usd_per_day_cap == pytest.approx(usd_per_day(tuned.fleet.max_instances, price))
    assert a.cost.startswith(f"tuned plan ${usd_per_day(8, price):,.2f} per day at its simulated mean fleet, "
                             f"${usd_per_day(tuned.fleet.max_instances, price):,.2f} at its cap of {tuned.fleet.max_instances}")
    assert f"seed plan ${usd_per_day(10, price):,.2f}" in a.cost
    page = render_report(plan=plan, qmax=q, ttotal=t, simulation=_pair(plan, tuned, 0.997, 0.996, 0.003), tuned_plan=tuned)
    costs = page[page.index("<div id='costs'>"):]
    assert costs.index("tuned plan") < costs.index("seed plan") < costs.index("</div>")


# --- issue 36: the plots' target, labels, styles and legend ----------------------------------------

def test_cost_vs_slo_targets_the_plans_own_share_and_no_label_overlaps(ref):
    from bench.report.plots import cost_vs_slo_figure

    _, _, plan = ref
    # floor and target-floor on the same spot, the plans next to each other: the labels must not collide
    sim = _sim(plan, _result("seed plan", 0.999, 0.0, 12, inst_h=20.0), _result("tuned plan", 0.998, 0.001, 12, inst_h=19.5),
               _result("floor", 1.0, 0.0, 11, inst_h=10.0), _result("target-floor", 1.0, 0.0, 11, inst_h=10.0),
               _result("reference", 0.2, 0.7, 1, inst_h=2.0))
    fig = cost_vs_slo_figure(sim, plan)
    ax = fig.axes[0]
    [target] = [ln for ln in ax.get_lines() if ln.get_label().startswith("target")]
    assert target.get_ydata()[0] == pytest.approx(100 * plan.inputs.slo_share)
    assert f"{100 * plan.inputs.slo_share:g}%" in target.get_label()
    renderer = fig.canvas.get_renderer()
    boxes = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(boxes) == {"seed plan", "tuned plan", "floor", "target-floor", "reference"}
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
        assert ax.get_window_extent(renderer).contains(boxes[a].x0, boxes[a].y1), a  # inside the axes


def test_every_policy_has_its_own_style():
    from bench.report.plots import OTHER_STYLES, policy_style
    from speech.sim.policies import POLICY_NAMES

    names = ["seed plan", "tuned plan", *[p for p in POLICY_NAMES if p != "plan"]]
    others = [n for n in names if n not in ("seed plan", "tuned plan")]
    # Every other policy (floor, perfect-forecast, hpa-v2, keda, predictive included) has a style of its
    # own: a policy added without one would share the first one's (the index wraps).
    assert len(others) <= len(OTHER_STYLES), (others, len(OTHER_STYLES))
    styles = [policy_style(n, others.index(n) if n in others else 0) for n in names]
    keys = {(s["color"], str(s.get("ls")), s.get("marker")) for s in styles}
    assert len(keys) == len(names) and len({s["color"] for s in styles}) == len(names)


def test_waterfall_legend_names_only_the_bars_it_drew(ref):
    from bench.report.plots import ttotal_figure

    _, t, _ = ref
    labels = [x.get_text() for x in ttotal_figure(t).legends[0].get_texts()]
    assert any("bounded" in x for x in labels) and "dominant phase" in labels
    measured_only = t.model_copy(update={"phases": [p.model_copy(update={"bounded": False}) for p in t.phases]})
    labels = [x.get_text() for x in ttotal_figure(measured_only).legends[0].get_texts()]
    assert not any("bounded" in x for x in labels) and any("measured" in x for x in labels)


def test_the_report_shows_the_promises_interval_and_says_when_a_trace_falls_below_it(ref):
    from bench.report.tuned import promise_check, verdict_line
    from speech.schema.config import Promise

    q, t, plan = ref
    promise = Promise(slo_share=0.998, rejected_share=0.001, instance_hours=16.0, cost_vs_floor=1.2, trace_sha256="b" * 64,
                      seed=1, simulator_version="sim-3", slo_share_low=0.9975, slo_share_high=0.9985,
                      instance_hours_low=15.0, instance_hours_high=17.0)
    tuned = build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10, min_instances=2, promise=promise))
    sim = _pair(plan, tuned, 0.997, 0.996, 0.003)
    c = promise_check(tuned, sim)
    assert c is not None and c.kept and c.below_low
    assert verdict_line(c).endswith("over its draws the promise spans 99.75-99.85%, and this trace is BELOW its low end.")
    page = render_report(plan=plan, qmax=q, ttotal=t, simulation=sim, tuned_plan=tuned)
    assert "(over its draws: 99.75-99.85% within the SLO, 15.0-17.0 instance-hours)" in page
    assert "<td class=\"num\">99.75% - 99.85%</td>" in page
    inside = promise_check(tuned, _pair(plan, tuned, 0.997, 0.998, 0.001))
    assert inside is not None and not inside.below_low and verdict_line(inside).endswith("and this trace is within it.")


def test_below_the_draws_lowest_is_not_a_broken_promise_below_the_bound_is(ref):
    """The promise for a draw the tuner did not see is its bound (slo_share_bound): one unseen draw
    in n + 1 lands below the lowest of n training draws (issue 45: 2 of 5 below the low end), so
    only the bound says the promise broke."""
    from bench.report.tuned import promise_check, verdict_line
    from speech.schema.config import Promise

    q, t, plan = ref
    promise = Promise(slo_share=0.998, rejected_share=0.001, instance_hours=16.0, cost_vs_floor=1.2, trace_sha256="b" * 64,
                      seed=1, simulator_version="sim-3", slo_share_low=0.9975, slo_share_high=0.9985,
                      slo_share_bound=0.9965, instance_hours_low=15.0, instance_hours_high=17.0)
    tuned = build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10, min_instances=2, promise=promise))
    low = promise_check(tuned, _pair(plan, tuned, 0.997, 0.997, 0.003))
    assert low is not None and low.below_low and not low.below_bound
    assert verdict_line(low).endswith("it promised 99.65% for a draw it did not see, and this trace keeps that (below the "
                                      "lowest training draw, as about one draw in n + 1 is).")
    broken = promise_check(tuned, _pair(plan, tuned, 0.997, 0.996, 0.004))
    assert broken is not None and broken.below_bound
    assert verdict_line(broken).endswith("it promised 99.65% for a draw it did not see, and this trace is BELOW that promise.")

