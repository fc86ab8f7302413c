"""The simulator runs a weekly schedule (issue 45, the week): each weekday's floors on its own day,
the trace starting at Monday 00:00 of the schedule's zone (speech.sim.scaler.floor_at); short
traces only, a simulated week is the benchmark's (benchmarks/plan_cost.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from speech.plan.realtime import build_plan
from speech.schema.config import WEEKDAYS, FloorSchedule, PlanInputs
from speech.sim.scaler import floor_at, scaling_numbers

# weekdays raised at 07:40 to 30 and released at 19:00; Saturday raised to 12 at 09:00 only; nothing on Sunday
WEEK = [*({"weekday": d, "at": "07:40", "min_instances": 30} for d in WEEKDAYS[:5]),
        *({"weekday": d, "at": "19:00", "min_instances": 1} for d in WEEKDAYS[:5]),
        {"weekday": "SAT", "at": "09:00", "min_instances": 12}, {"weekday": "SAT", "at": "18:00", "min_instances": 1}]


def weekday_plan(qmax_ref, ttotal_ref, floors=WEEK):
    return build_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=5000, trough_rps=10, schedule=FloorSchedule(floors=floors)))


def test_the_simulator_applies_each_weekdays_floor_on_its_day(qmax_ref, ttotal_ref):
    """floor_at on every 10 minutes of two weeks (the trace starts at Monday 00:00 of the
    schedule's zone) against the schedule read by hand: weekdays raised 07:40-19:00, Saturday
    09:00-18:00, Sunday at the plan's floor; and the daily reading of the same crons is refused
    for a mixed schedule."""
    p = weekday_plan(qmax_ref, ttotal_ref)
    s = scaling_numbers(p)
    floor = s.min_instances
    for t_min in range(0, 2 * 7 * 1440, 10):
        day, minute = t_min // 1440 % 7, t_min % 1440
        if day < 5:
            want = 30 if 460 <= minute < 1140 else floor
        elif day == 5:
            want = 12 if 540 <= minute < 1080 else floor
        else:
            want = floor
        assert floor_at(s, t_min * 60 + 30) == max(floor, want), (day, minute)
    mixed = replace(s, floors=(*s.floors, ("cron(0 12 * * ? *)", "UTC", 5)))
    from speech.errors import SimulationInputError

    with pytest.raises(SimulationInputError, match="mix daily and weekly"):
        floor_at(mixed, 60)


def test_a_short_monday_runs_mondays_floor_not_tuesdays(qmax_ref, ttotal_ref):
    """Through the fleet simulation (a 15-minute trace, Monday 00:00 on): a Monday raise at 00:05
    puts its instances in service; the same raise on Tuesday leaves Monday's fleet at its floor."""
    import numpy as np

    from speech.sim.fleet import run_policy
    from speech.sim.instance import build_instance
    from speech.sim.policies import AwsPolicy

    model = build_instance(qmax_ref, ttotal_ref, slo_ms=3000)
    arrivals = np.full(15 * 60, 5.0)  # light traffic: the reactive policy alone keeps the plan's floor

    def fleet_at_end(day: str) -> int:
        floors = [{"weekday": day, "at": "00:05", "min_instances": 8}, {"weekday": day, "at": "23:00", "min_instances": 1}]
        p = weekday_plan(qmax_ref, ttotal_ref, floors=floors)
        run = run_policy(model, arrivals, AwsPolicy(scaling_numbers(p), model.cloudwatch_ratio, model.q_max))
        return int(run.serving[-1])

    assert fleet_at_end("MON") >= 8
    assert fleet_at_end("TUE") < 8
