"""The simulator's fast paths give the results of the rules they replace, bit for bit: the warm-
started fluid step (speech.sim.fleet.FluidGrid) against the bisection (fluid_step), and the parsed
scheduled floors (speech.sim.scaler.floor_entries) against the rule stated in floor_at's docstring.
Speed itself is measured by benchmarks/tune_speed.py, not here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from speech.errors import SimulationInputError
from speech.plan.realtime import build_plan
from speech.schema.config import PlanInputs
from speech.sim.fleet import FluidGrid, fluid_step, run_policy
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy
from speech.sim.scaler import floor_at, scaling_numbers


@pytest.fixture(scope="module")
def model():
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from tests.conftest import QMAX_REF, TTOTAL_REF

    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    return q, t, build_instance(q, t, slo_ms=3000)


def _grid_lists(m):
    return m.occupancy.tolist(), m.depart_rps.tolist(), m.block.tolist()


def test_fluid_grid_step_equals_the_bisection_from_any_hint(model):
    """Random occupancies and rates over the whole grid (below it, on it, above its top), each from
    a random hint and from the index the step before returned: the same four numbers, compared
    with ==, so a search that found a neighbouring grid index or rounded differently fails."""
    _, _, m = model
    grid = FluidGrid(m)
    assert grid.monotone  # the reference model's grid: the searched path is the one under test
    occ, dep, blk = _grid_lists(m)
    rng = np.random.default_rng(45)
    kmax = len(occ) - 1
    top = occ[-1] + dep[-1]
    hint = 0
    for _ in range(5_000):
        lam = float(rng.choice([0.0, rng.uniform(0, 2 * m.saturation_rps), rng.uniform(0, 50 * m.saturation_rps)]))
        mm = float(rng.choice([rng.uniform(-1.0, 0.0), rng.uniform(0, top), rng.uniform(top, 2 * top + 1), occ[int(rng.integers(kmax))]]))
        want = fluid_step(occ, dep, blk, mm, lam)
        assert grid.step(mm, lam, int(rng.integers(0, kmax + 1))) == want
        got = grid.step(mm, lam, hint)
        assert got == want
        hint = got[2]


def test_fluid_grid_follows_a_day_as_the_fleet_steps_it(model):
    """Along a real run's (m, lam) sequence (the path the hint is tuned for: small moves, bursts,
    scale-outs), every step equals the bisection's."""
    q, t, m = model
    from speech.sim.traces import generate

    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=600, trough_rps=30))
    arrivals = generate("diurnal:peak=600,seed=3").arrivals[: 4 * 3600]
    run = run_policy(m, arrivals, AwsPolicy(scaling_numbers(plan), m.cloudwatch_ratio, m.q_max))
    occ, dep, blk = _grid_lists(m)
    grid = FluidGrid(m)
    mm, k = 0.0, 0
    lam = arrivals / run.serving
    for t_s in range(arrivals.size):
        before = mm
        for n in range(int(run.serving[t_s - 1]) if t_s else 0, int(run.serving[t_s])):
            before = before * n / (n + 1)  # an instance entering service takes its share, as run_policy spreads it
        want = fluid_step(occ, dep, blk, before, float(lam[t_s]))
        got = grid.step(before, float(lam[t_s]), k)
        assert got == want
        mm, k = got[0], got[2]
    assert run.actions  # the path crossed scale-outs and scale-ins, not one steady state


def test_a_grid_that_is_not_monotone_is_bisected(model):
    """Where occ + dep decreases somewhere the prefix argument fails: the grid says so and steps
    by the bisection itself (the same numbers as fluid_step, from any hint)."""
    _, _, m = model
    dep = m.depart_rps.copy()
    dep[len(dep) // 2] += 10.0  # a bump: occ + dep no longer nondecreasing
    bumped = replace(m, depart_rps=dep)
    grid = FluidGrid(bumped)
    assert not grid.monotone
    occ, d, blk = _grid_lists(bumped)
    for mm, lam, hint in [(5.0, 3.0, 0), (20.0, 1.0, 300), (0.5, 40.0, 100)]:
        assert grid.step(mm, lam, hint) == fluid_step(occ, d, blk, mm, lam)


def test_floor_at_is_the_latest_entry_at_or_before_the_minute(model):
    """Every minute of two days against the rule written out here (entries out of order, two at
    the same minute, one at 00:00): the latest entry at or before the time of day, the day's last
    before the first, never below the plan's floor."""
    q, t, _ = model
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=600, trough_rps=30))
    floors = (("cron(30 7 * * ? *)", "UTC", 9), ("cron(0 22 * * ? *)", "UTC", 2), ("cron(30 7 * * ? *)", "UTC", 12),
              ("cron(0 0 * * ? *)", "UTC", 4), ("cron(15 13 * * ? *)", "UTC", 30))
    s = replace(scaling_numbers(plan), floors=floors, min_instances=3)
    entries = sorted((int(c.split()[1]) * 60 + int(c.split()[0][5:]), n) for c, _, n in floors)
    for minute in range(2 * 1440):
        past = [n for at, n in entries if at <= minute % 1440]
        want = max(3, past[-1] if past else entries[-1][1])
        assert floor_at(s, minute * 60 + 59) == want
    assert floor_at(s, 7 * 3600 + 30 * 60) == 12  # the larger of the two 07:30 entries, as sorting puts it last


def test_floor_at_refuses_a_schedule_it_cannot_read(model):
    q, t, _ = model
    plan = build_plan(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=600, trough_rps=30))
    s = replace(scaling_numbers(plan), floors=(("rate(5 minutes)", "UTC", 4),))
    for _ in range(2):  # also once the valid schedules before it were parsed and kept
        with pytest.raises(SimulationInputError, match="not cron"):
            floor_at(s, 60)


def test_a_candidates_floors_are_the_floor_schedules_hours_read_when_asked(model):
    """The tuner's candidates carry their days' floors unread (speech.sim.evaluate.DayFloors): the
    hours and x_floor read later are floor_schedule's own for each day, equal to a list of them,
    and a new candidate's are not computed before they are read."""
    from speech.sim.floor import floor_schedule
    from speech.sim.traces import generate
    from speech.sim.tune import Tuner

    q, t, m = model
    days = [(i, generate(f"step:base=60,factor=3,at=300,duration=900,seed={i + 1}").arrivals) for i in range(2)]
    tu = Tuner(q, t, PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=300, trough_rps=15), m, 0.995)
    c = tu.candidate(tu.seed_knobs(), days)
    assert c is not None
    want = [floor_schedule(m, a, 3000, 0.995).instance_hours for _, a in days]
    assert c.floor_hours == want and list(c.floor_hours) == want and len(c.floor_hours) == 2
    assert c.x_floor == pytest.approx(np.mean([d.instance_hours / w for d, w in zip(c.days, want, strict=True)]), rel=1e-12)
    other = tu.candidate(replace(tu.seed_knobs(), datapoints_to_alarm=1), days)
    assert other is not None and "not yet computed" in repr(other.floor_hours)  # nothing read yet
    assert other.floor_hours == want


def test_minute_start_queues_equal_the_rounds_stepped_on_every_minute(model):
    """queues_at_minute_starts steps again only the minutes whose start moved in a round; the
    queues must be those of the plain rounds (every minute stepped each round), bit for bit, on a
    schedule that runs hot (queues chain over several minutes, so several rounds run)."""
    from speech.sim.floor_fluid import JACOBI_ROUNDS, fluid_steps, queues_at_minute_starts
    from speech.sim.traces import generate

    _, _, m = model
    arrivals = generate("diurnal:peak=400,hours=1,spikes=2,spike_factor=1.6,seed=5").arrivals
    per_second = arrivals.reshape(-1, 60)
    counts = np.maximum(1, np.floor(per_second.mean(axis=1) / (0.8 * m.saturation_rps))).astype(int)
    n = counts.astype(float)
    queue, rounds = np.zeros(counts.size), 0
    while rounds < JACOBI_ROUNDS:  # the rule as the docstring states it
        rounds += 1
        _, end = fluid_steps(m, per_second, n, 3000, queue, with_end=True)
        new = np.concatenate([[0.0], (end * n)[:-1]])
        settled = np.allclose(new, queue, rtol=1e-6, atol=1e-6)
        queue = new
        if settled:
            break
    assert rounds >= 3  # the reuse between rounds was exercised
    assert np.array_equal(queues_at_minute_starts(m, per_second, counts, 3000, None), queue)
