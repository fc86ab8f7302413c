"""The report answers first (bench.html_report.answer) and the ladder plot says why a level failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.html_report import PolicyViolation, answer, render_report, usd_per_day
from bench.plots import qmax_figure, why_level_failed
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.artifact import PolicyResult, SimulationArtifact, TraceRecord

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "artifacts/reference"


@pytest.fixture(scope="module")
def ref():
    q = load_artifact(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json", QmaxArtifact)
    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    return q, t, build_plan(q, t, PlanInputs(peak_rps=200, trough_rps=10))


def _result(policy: str, within: float, rejected: float, peak: int, inst_h: float = 10.0) -> PolicyResult:
    return PolicyResult(policy=policy, within_slo_share=within, rejected_share=rejected, ttfab_p95_ms=900.0,
                        ttfab_p99_ms=2000.0, violation_minutes=0, instance_hours=inst_h, cost_usd=None, cost_vs_oracle=1.0,
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
    sim = _sim(plan, _result("plan", 0.99, 0.01, plan.fleet.max_instances, inst_h=20.0), _result("oracle", 0.997, 0.003, 11))
    a = answer(plan, [PolicyViolation("advisory", "x", "r", "m"), BLOCK], True, sim)
    assert a.blocked is True and a.deploy == "BLOCKED: cannot deploy (deployment-matches-fingerprint)"
    assert a.deploy_reason == "kokoro-82m-model: deploys another image; fix: ..."
    assert a.fleet.startswith(f"{plan.fleet.min_instances}-{plan.fleet.max_instances} x ml.g5.xlarge")
    assert a.simulated == "99.00% within the SLO (3000 ms p95 TTFAB), 1.00% rejected"
    # At its ceiling: the reason is the fleet maximum, and the oracle says part of it is capacity.
    assert f"the fleet reached its maximum of {plan.fleet.max_instances} instances" in a.simulated_reason
    assert "oracle (exactly the instances needed, no start-up) rejects 0.30%" in a.simulated_reason
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
    sim = _sim(plan, _result("plan", 0.98, 0.02, plan.fleet.max_instances - 1), _result("oracle", 1.0, 0.0, 11))
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
