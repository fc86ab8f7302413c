"""Scheduled floors from a rate series (speech.plan.schedule): ramps raise the floor one planning
T_total ahead, the slot after a ramp releases it; the plan clamps and records them."""

from __future__ import annotations

import numpy as np
import pytest

from speech.errors import PlanInputError
from speech.plan.realtime import build_plan
from speech.plan.schedule import derive_schedule
from speech.schema.config import FloorSchedule, PlanInputs


def _day(levels_by_hour: dict[int, float], base: float) -> np.ndarray:
    """One day, 1 s steps: ``base`` rps except the hours given."""
    rate = np.full(86400, base)
    for hour, rps in levels_by_hour.items():
        rate[hour * 3600:(hour + 1) * 3600] = rps
    return rate


def test_a_morning_ramp_is_in_service_one_t_total_ahead_and_released_after():
    rate = _day({8: 100.0, 9: 200.0}, 10.0)
    s = derive_schedule(rate, per_instance_rps=10.0, lead_s=320.0, floor=1, max_instances=50, slot_minutes=60)
    # 08:00 needs 10, 09:00 needs 20: each raised ceil(320 / 60) = 6 minutes early; released at 10:00.
    assert [(f.at, f.min_instances) for f in s.floors] == [("07:54", 10), ("08:54", 20), ("10:00", 1)]
    assert s.timezone == "UTC"


def test_floors_stay_within_the_fleet_and_no_ramp_means_no_schedule():
    rate = _day({12: 1000.0}, 10.0)
    s = derive_schedule(rate, per_instance_rps=10.0, lead_s=60.0, floor=2, max_instances=30, slot_minutes=60)
    assert [(f.at, f.min_instances) for f in s.floors] == [("11:59", 30), ("13:00", 2)]
    assert derive_schedule(np.full(86400, 10.0), per_instance_rps=10.0, lead_s=60.0, floor=2, max_instances=30) is None


def test_start_time_shifts_the_day_and_several_days_take_the_busiest():
    two = np.concatenate([_day({8: 100.0}, 10.0), _day({8: 300.0}, 10.0)])
    s = derive_schedule(two, per_instance_rps=10.0, lead_s=60.0, floor=1, max_instances=99, slot_minutes=60,
                        start_minute=6 * 60)  # the trace's 08:00 is 14:00 local
    assert [(f.at, f.min_instances) for f in s.floors] == [("13:59", 30), ("15:00", 1)]


def test_bad_series_and_slots_are_refused_with_the_fix():
    with pytest.raises(PlanInputError, match="at least an hour"):
        derive_schedule(np.ones(600), per_instance_rps=1.0, lead_s=60.0, floor=1, max_instances=5)
    with pytest.raises(PlanInputError, match="longer slot"):
        derive_schedule(np.ones(7200), per_instance_rps=1.0, lead_s=1900.0, floor=1, max_instances=5)
    with pytest.raises(PlanInputError, match="divide a day"):
        derive_schedule(np.ones(7200), per_instance_rps=1.0, lead_s=60.0, floor=1, max_instances=5, slot_minutes=7)


def test_plan_clamps_the_schedule_and_the_spec_renders_it(qmax_ref, ttotal_ref):
    from speech.deploy.scaling import scaling_spec

    sched = FloorSchedule(timezone="Europe/Berlin", floors=[{"at": "07:40", "min_instances": 9999},
                                                            {"at": "10:00", "min_instances": 1}])
    p = build_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=5000, trough_rps=10, schedule=sched))
    assert [(f.at, f.min_instances) for f in p.schedule.floors] == [("07:40", p.fleet.max_instances), ("10:00", 1)]
    assert p.finding("schedule").level == "warn" and "capped" in p.finding("schedule").message
    [raise_, release] = scaling_spec(p, "dev-kokoro-82m").scheduled
    assert raise_.name == "dev-kokoro-82m-floor-0740" and raise_.schedule == "cron(40 7 * * ? *)"
    assert (raise_.timezone, raise_.min_capacity, raise_.max_capacity) == ("Europe/Berlin", 293, 293)
    assert release.schedule == "cron(0 10 * * ? *)" and release.min_capacity == 1


def test_schedule_input_is_checked():
    with pytest.raises(ValueError, match="IANA"):
        FloorSchedule(timezone="Mars/Olympus", floors=[{"at": "07:40", "min_instances": 2}, {"at": "9:00", "min_instances": 1}])
    with pytest.raises(ValueError, match="HH:MM"):
        FloorSchedule(floors=[{"at": "7:40", "min_instances": 2}, {"at": "09:00", "min_instances": 1}])
    with pytest.raises(ValueError, match="two floors at 07:40"):
        FloorSchedule(floors=[{"at": "07:40", "min_instances": 2}, {"at": "07:40", "min_instances": 1}])
