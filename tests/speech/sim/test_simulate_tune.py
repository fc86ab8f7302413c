"""The tuner's rules (speech.sim.tune): candidates inside the plan's bounds, choosing only what
keeps the share, percent scale-in as Application Auto Scaling rounds it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from speech.errors import SimulationInputError
from speech.files import load_artifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import Summary
from speech.sim.instance import build_instance
from speech.sim.traces import generate
from speech.sim.tune import KNOBS, Candidate, Tuner
from tests.conftest import QMAX_REF, ROOT, TTOTAL_REF

ROOT_TRACES = ROOT / "data" / "traces"


@pytest.fixture(scope="module")
def tuner():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    inputs = PlanInputs(slo_ms=3000, peak_rps=800, trough_rps=80)
    return Tuner(q, t, inputs, build_instance(q, t, slo_ms=3000), 0.995)


def test_candidates_outside_the_plans_bounds_are_refused(tuner):
    seed = tuner.seed_knobs()
    assert set(tuner.choices(seed)) == set(KNOBS)
    # a target share above 1 - h and a step share above the safe bound: the plan refuses, the search skips
    assert tuner.plan_for(replace(seed, target_share=0.95)) is None
    assert tuner.plan_for(replace(seed, scale_in_step_share=0.95)) is None
    assert tuner.candidate(replace(seed, target_share=0.95), []) is None
    assert tuner.skipped
    ok = tuner.plan_for(replace(seed, scale_in_step_share=0.05, scale_in_window_s=60))
    assert ok is not None and ok.inputs.scale_in_step_share == 0.05


def test_percent_scale_in_rounds_like_application_auto_scaling(tuner):
    s = replace(tuner.seed_numbers, scale_in_percent=-10, scale_in_min_removed=1, min_instances=1)
    assert s.scale_in_to(100) == 90
    assert s.scale_in_to(15) == 14  # 1.5 rounds toward zero
    assert s.scale_in_to(5) == 4  # 0.5: at least MinAdjustmentMagnitude
    assert replace(s, scale_in_min_removed=2).scale_in_to(5) == 3


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_search_keeps_the_share_and_costs_no_more(tuner):
    days = [(1, generate("diurnal:peak=800,hours=4,spikes=1,spike_s=120,seed=1").arrivals)]
    seed, best = tuner.search(days, passes=1)
    if seed.worst_share >= 0.995:
        assert best.worst_share >= 0.995 and best.hours <= seed.hours
    else:
        assert best.worst_share >= seed.worst_share
    # a candidate that misses the share never beats one that keeps it, however cheap
    cheap = replace(best, days=[replace(d, within_slo_share=0.5, instance_hours=0.1) for d in best.days])
    assert not tuner.better(cheap, best) or best.worst_share < 0.995


def test_scheduled_floors_are_learned_from_the_training_draws_only():
    """With the training draws' mean rate the tuner also tries daily floors derived from it (the
    plan's own speech.plan.schedule); without it, it does not."""
    import numpy as np

    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    inputs = PlanInputs(slo_ms=3000, peak_rps=800, trough_rps=40)
    draws = [generate(f"diurnal:peak=800,hours=4,seed={s}").arrivals for s in (1, 2)]
    rate = np.mean(np.stack(draws), axis=0)
    tu = Tuner(q, t, inputs, build_instance(q, t, slo_ms=3000), 0.995, schedule_rate=rate)
    seed = tu.seed_knobs()
    assert seed.scheduled_floors is False and tu.choices(seed)["scheduled_floors"] == [False, True]
    with_floors = tu.plan_for(replace(seed, scheduled_floors=True))
    assert with_floors is not None and with_floors.schedule is not None and with_floors.schedule.floors
    # the floors rise before the ramp the training draws had: the busiest slot's floor is above the plan's
    assert max(f.min_instances for f in with_floors.schedule.floors) > with_floors.fleet.min_instances
    plain = Tuner(q, t, inputs, build_instance(q, t, slo_ms=3000), 0.995)
    assert plain.choices(seed)["scheduled_floors"] == [False]
    assert plain.plan_for(replace(seed, scheduled_floors=True)) is None


def test_the_unseen_share_bound_is_a_student_t_prediction_bound():
    """min(lowest, mean - t_{q, n-1} sd sqrt(1 + 1/n)) with q = 1 - miss / unseen, t from scipy; one
    draw: that draw's share."""
    import math

    import numpy as np
    from scipy.stats import t as student_t

    from speech.sim.tune import unseen_share_bound

    shares = [0.9981, 0.9969, 0.9990, 0.9962, 0.9984]
    b = unseen_share_bound(shares, miss_chance=0.1, unseen_draws=5)
    assert b.n == 5 and b.t == pytest.approx(student_t.ppf(0.98, 4)) and b.t == pytest.approx(2.9985, abs=1e-4)
    assert b.sd == pytest.approx(float(np.std(shares, ddof=1)))
    assert b.bound == pytest.approx(float(np.mean(shares)) - b.t * b.sd * math.sqrt(1.2))
    assert b.bound < min(shares)  # the spread, not the lowest draw, sets it here
    # a wider miss chance is a laxer bound; with no spread the bound is the lowest draw itself
    assert unseen_share_bound(shares, miss_chance=0.5).bound > b.bound
    assert unseen_share_bound([0.997, 0.997]).bound == pytest.approx(0.997)
    one = unseen_share_bound([0.9971])
    assert one.bound == 0.9971 and one.n == 1 and one.t is None and one.sd == 0.0
    with pytest.raises(SimulationInputError):
        unseen_share_bound([])


def _summary(share: float, hours: float) -> Summary:
    return Summary(policy="plan", requests=1e6, within_slo_share=share, rejected_share=0.0, ttfab_p95_ms=1000.0,
                   ttfab_p99_ms=2000.0, violation_minutes=0, instance_hours=hours, scale_out_actions=0, scale_in_actions=0,
                   flaps=0, peak_instances=10)


def test_the_block_sd_sees_the_spread_five_lucky_draws_hide():
    """Days of 24 blocks, each block a little worse with a small chance (a crowd at a bad hour).
    Over many groups of five draws the block estimate's mean is near the true sd of a day's share
    and it is less often far below it than the five shares' own sd; the bound takes it when the
    draws' own is implausibly small beside it."""
    import numpy as np

    from speech.sim.tune import block_share_sd, unseen_share_bound

    rng = np.random.default_rng(3)
    groups, n, blocks = 400, 5, 24
    req = rng.uniform(0.5, 1.5, size=blocks) * 1e5  # a day's shape: the same in every draw
    hit = rng.random((groups, n, blocks)) < 0.03
    share = np.where(hit, rng.uniform(0.90, 0.97, size=hit.shape), 0.999)
    requests = np.broadcast_to(req, share.shape) * rng.uniform(0.98, 1.02, size=share.shape)
    day = (share * requests).sum(axis=2) / requests.sum(axis=2)
    true_sd = float(day.std(ddof=1))
    by_blocks = np.array([block_share_sd(requests[g], share[g] * requests[g]) for g in range(groups)])
    by_days = day.std(axis=1, ddof=1)
    assert abs(float(np.median(by_blocks)) / true_sd - 1) < 0.2
    assert np.mean(by_blocks < 0.5 * true_sd) < 0.75 * np.mean(by_days < 0.5 * true_sd)
    assert float(np.std(by_blocks / true_sd)) < 0.9 * float(np.std(by_days / true_sd))  # a steadier estimate
    g = int(np.argmin(by_days / by_blocks))  # the luckiest five: their shares barely spread
    b = unseen_share_bound(day[g].tolist(), blocks=(requests[g].tolist(), (share[g] * requests[g]).tolist()))
    assert b.sd == b.sd_blocks > b.sd_draws and b.bound < unseen_share_bound(day[g].tolist()).bound
    # a spread the blocks make plausible stands, even below theirs: blocks that co-vary (a superposed
    # trace's bursts move between neighbours) overstate it
    ok = int(np.argmin(np.abs(by_days / by_blocks - 0.7)))
    b = unseen_share_bound(day[ok].tolist(), blocks=(requests[ok].tolist(), (share[ok] * requests[ok]).tolist()))
    assert b.sd_draws < b.sd_blocks and b.sd == b.sd_draws
    # no spread in any block: nothing added
    flat = np.broadcast_to(req, (n, blocks))
    assert block_share_sd(flat, 0.999 * flat) == pytest.approx(0.0, abs=1e-12)


def test_a_cheap_candidate_whose_spread_puts_unseen_draws_at_risk_loses_to_a_safer_one(tuner):
    """Every draw of ``risky`` keeps 99.5 %, but they spread so wide that an unseen draw is predicted
    below it: the costlier ``safe`` wins; under the old rule (lowest draw >= target) risky did."""
    seed = tuner.seed_knobs()
    risky = Candidate(seed, [_summary(s, 10.0) for s in (0.9951, 0.9990, 0.9985, 0.9952, 0.9995)], [8.0] * 5)
    safe = Candidate(replace(seed, min_instances=seed.min_instances + 1),
                     [_summary(s, 11.0) for s in (0.9975, 0.9978, 0.9980, 0.9976, 0.9979)], [8.0] * 5)
    assert risky.worst_share >= 0.995 and risky.hours < safe.hours
    assert risky.share_bound.bound < 0.995 <= safe.share_bound.bound
    assert tuner.better(safe, risky) and not tuner.better(risky, safe)
    # neither keeping it: the higher bound wins, even when its lowest draw is lower
    wide = Candidate(seed, [_summary(s, 9.0) for s in (0.9900, 0.9990, 0.9995)], [8.0] * 3)
    tight = Candidate(seed, [_summary(s, 9.5) for s in (0.9930, 0.9932, 0.9934)], [8.0] * 3)
    assert wide.share_bound.bound < tight.share_bound.bound < 0.995
    assert tuner.better(tight, wide)


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_the_fixed_peak_fleet_is_a_floor_the_search_tries(tuner):
    """After the search has seen its draws, min_instances offers exactly the fleet bench simulate's
    fixed-peak runs for their busiest minute (capped by the plan's max), and the plan pinned there builds."""
    from speech.sim.peers import FixedPolicy
    from speech.sim.policies import make_policy
    from speech.sim.traces import peak_rps

    days = [(1, generate("diurnal:peak=800,hours=1,spikes=1,spike_s=120,seed=1").arrivals),
            (2, generate("diurnal:peak=800,hours=1,spikes=1,spike_s=120,seed=2").arrivals)]
    tuner.search(days, passes=1)
    peak = max(peak_rps(a) for _, a in days)
    assert tuner.train_peak_rps == pytest.approx(peak)
    fixed = make_policy("fixed-peak", plan=tuner.seed_plan, qmax=tuner.qmax, model=tuner.model, arrivals=days[0][1],
                        peak_rps=peak)
    assert isinstance(fixed, FixedPolicy)
    n = tuner.fixed_peak_instances()
    assert n == min(fixed.n, tuner.seed_numbers.max_instances) and n > tuner.seed_numbers.min_instances
    assert n in tuner.choices(tuner.seed_knobs())["min_instances"]
    pinned = tuner.plan_for(replace(tuner.seed_knobs(), min_instances=n))
    assert pinned is not None and pinned.fleet.min_instances == n


def test_pair_moves_combine_near_misses_of_different_knobs_cheapest_first(tuner):
    seed = tuner.seed_knobs()
    at = Candidate(seed, [_summary(0.997, 30.0)], [20.0])
    near = [("min_instances", 21, 25.3), ("scale_in_window_s", 60, 26.1), ("min_instances", 28, 25.0),
            ("target_share", 0.75, 24.6)]
    moves = tuner.pair_moves(at, near, limit=10)
    # two values of one knob are not a pair: 4 near misses, one same-knob pair left out
    assert len(moves) == 5
    changed = [{k for k in KNOBS if getattr(m, k) != getattr(seed, k)} for m in moves]
    assert all(len(c) == 2 for c in changed)
    assert changed[0] == {"min_instances", "target_share"} and moves[0].min_instances == 28  # 25.0 + 24.6
    assert changed[-1] == {"scale_in_window_s", "min_instances"} and moves[-1].min_instances == 21  # 25.3 + 26.1
    assert tuner.pair_moves(at, near, limit=2) == moves[:2]


def _conv_days(n: int) -> list:
    from speech.sim.traces import from_csv_text

    text = (ROOT_TRACES / "azure-llm-2023-conv.csv").read_text()
    return [(s, from_csv_text(text, name="azure-conv", spec=f"azure-conv:peak=500,seed={s}",
                              opts={"peak": "500", "seed": str(s)}).arrivals) for s in range(1, n + 1)]


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_from_a_seed_that_misses_the_cheapest_one_knob_move_that_keeps_the_target_wins():
    """Not the first knob in KNOBS that helps, nor the one with the highest bound: on three draws of
    the conversation trace the seed misses, and several single moves keep the target at different
    costs. The first step of the search is the cheapest of them, checked against every move."""
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    days = _conv_days(3)
    tuner = Tuner(q, t, PlanInputs(slo_ms=3000, peak_rps=500, trough_rps=250), build_instance(q, t, slo_ms=3000), 0.995)
    tuner.see_training(days)
    seed = tuner.candidate(tuner.seed_knobs(), days)
    assert seed is not None and seed.share_bound.bound < 0.995
    moves = [tuner.candidate(replace(seed.knobs, **{k: v}), days) for k in KNOBS for v in tuner.choices(seed.knobs)[k]
             if v != getattr(seed.knobs, k)]
    keeping = sorted((c for c in moves if c is not None and c.share_bound.bound >= 0.995), key=lambda c: c.hours)
    assert len(keeping) >= 2 and keeping[0].hours < keeping[-1].hours
    first = next(c for c in moves if c is not None and c.share_bound.bound >= 0.995)
    assert first.knobs != keeping[0].knobs  # what first-improvement would take
    assert tuner.cheapest_keeping(seed, days).knobs == keeping[0].knobs


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_pair_moves_find_a_cheaper_plan_one_knob_at_a_time_cannot_on_a_bursty_hour():
    """The shipped conversation trace at 500 rps, three draws: one knob at a time the search ends
    where no single cheaper move keeps the share, but a higher floor with a shorter scale-in window
    does, for at least 5 % less. Checked on the real simulator, with pairs off and on."""
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    days = _conv_days(3)
    inputs = PlanInputs(slo_ms=3000, peak_rps=500, trough_rps=270)
    model = build_instance(q, t, slo_ms=3000)
    _, alone = Tuner(q, t, inputs, model, 0.995).search(days, pairs=0)
    _, paired = Tuner(q, t, inputs, model, 0.995).search(days)
    assert alone.share_bound.bound >= 0.995 and paired.share_bound.bound >= 0.995
    assert paired.hours < 0.95 * alone.hours
    moved = {k for k in KNOBS if getattr(paired.knobs, k) != getattr(alone.knobs, k)}
    assert {"min_instances", "scale_in_window_s"} <= moved


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_a_search_through_a_process_pool_reads_the_same_days_and_finds_the_same_plan():
    """Days run side by side in real worker processes, two at a time, with challengers' next draws
    run ahead: what the search reads is what it reads one by one, so the seed, the winner, its
    runs and the evaluation count are equal; the pool only simulated more (draws read ahead that a
    challenger stopped before)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    days = _conv_days(3)
    inputs = PlanInputs(slo_ms=3000, peak_rps=500, trough_rps=270)
    model = build_instance(q, t, slo_ms=3000)
    serial = Tuner(q, t, inputs, model, 0.995)
    seed_1, best_1 = serial.search(days, passes=1)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        pooled = Tuner(q, t, inputs, model, 0.995, map_fn=pool.map, width=2)
        seed_2, best_2 = pooled.search(days, passes=1)
    assert (seed_2.knobs, best_2.knobs) == (seed_1.knobs, best_1.knobs) and best_1.knobs != seed_1.knobs
    assert best_2.days == best_1.days and best_2.floor_hours == best_1.floor_hours  # the same numbers, not close ones
    assert pooled.evaluations == serial.evaluations == serial.simulated
    assert pooled.simulated > pooled.evaluations
