"""Scheduled floors from a rate series (speech.plan.schedule): ramps raise the floor one planning
T_total ahead, the slot after a ramp releases it; the plan clamps and records them."""

from __future__ import annotations

from datetime import UTC, datetime

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
    # The action sets the floor only: the cap stays the target's, from the plan (issue 46 item 2).
    assert (raise_.timezone, raise_.min_capacity, raise_.max_capacity) == ("Europe/Berlin", 293, None)
    assert release.schedule == "cron(0 10 * * ? *)" and release.min_capacity == 1


def test_schedule_input_is_checked():
    with pytest.raises(ValueError, match="IANA"):
        FloorSchedule(timezone="Mars/Olympus", floors=[{"at": "07:40", "min_instances": 2}, {"at": "9:00", "min_instances": 1}])
    with pytest.raises(ValueError, match="HH:MM"):
        FloorSchedule(floors=[{"at": "7:40", "min_instances": 2}, {"at": "09:00", "min_instances": 1}])
    with pytest.raises(ValueError, match="two floors at 07:40"):
        FloorSchedule(floors=[{"at": "07:40", "min_instances": 2}, {"at": "07:40", "min_instances": 1}])


def _berlin_actions():
    from speech.deploy.scaling import ScheduledActionSpec

    def action(at: str, n: int) -> ScheduledActionSpec:
        hh, mm = at.split(":")
        return ScheduledActionSpec(name=f"ep-floor-{hh}{mm}", schedule=f"cron({int(mm)} {int(hh)} * * ? *)",
                                   timezone="Europe/Berlin", min_capacity=n)

    return (action("07:40", 6), action("10:00", 2), action("18:30", 4))


@pytest.mark.parametrize("utc, want", [
    # winter (UTC+1): the raise at 07:40 Berlin is 06:40 UTC
    ("2026-01-15T06:39", ("ep-floor-1830", 4)),   # before the day's first: the previous day's last
    ("2026-01-15T06:40", ("ep-floor-0740", 6)),   # the edge itself: the raise is in force
    ("2026-01-15T08:59", ("ep-floor-0740", 6)),
    ("2026-01-15T09:00", ("ep-floor-1000", 3)),   # the release, never below the plan's floor 3
    ("2026-01-15T17:30", ("ep-floor-1830", 4)),
    # summer (UTC+2): the same local edge is an hour earlier in UTC
    ("2026-07-15T05:39", ("ep-floor-1830", 4)),
    ("2026-07-15T05:40", ("ep-floor-0740", 6)),
])
def test_the_floor_in_force_is_the_schedules_entry_in_its_own_time_zone(utc, want):
    from datetime import UTC, datetime

    from speech.deploy.scaling import floor_in_force

    when = datetime.fromisoformat(utc).replace(tzinfo=UTC)
    floor, action = floor_in_force(_berlin_actions(), 3, when)
    assert (action.name, floor) == want
    assert floor_in_force((), 3, when) == (3, None)
    with pytest.raises(ValueError, match="aware datetime"):
        floor_in_force(_berlin_actions(), 3, when.replace(tzinfo=None))


def test_a_scheduled_target_is_registered_with_the_floor_in_force_and_the_plans_cap(kokoro_entry, write_stack):
    """Scheduled actions set MinCapacity when they run. The program ignores neither bound (issue 46
    item 2: ignoring MaxCapacity kept a re-planned cap from AWS until the next action): it registers
    the target with the floor in force at deploy, so an update inside a raised window does not put
    the plan's floor back, and with the plan's cap."""
    from speech.infra.preview import run_preview

    plain = run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="plain"))
    (target,) = plain.of_type("aws:appautoscaling/target:Target")
    assert target.ignore_changes == []
    kokoro_entry["plan"]["schedule"] = {"timezone": "Europe/Berlin", "floors": [{"at": "07:40", "min_instances": 6},
                                                                                {"at": "10:00", "min_instances": 1}]}
    started = datetime.now(UTC)
    scheduled = run_preview(write_stack({"kokoro-82m": kokoro_entry}, stack="sched"))
    ended = datetime.now(UTC)
    (sched_target,) = scheduled.of_type("aws:appautoscaling/target:Target")
    assert sched_target.ignore_changes == []
    assert sched_target.inputs["maxCapacity"] == target.inputs["maxCapacity"]
    actions = scheduled.of_type("aws:appautoscaling/scheduledAction:ScheduledAction")
    assert len(actions) == 2 and all("maxCapacity" not in a.inputs["scalableTargetAction"] for a in actions)
    from speech.deploy.scaling import ScheduledActionSpec, floor_in_force

    specs = [ScheduledActionSpec(name=a.name, schedule=a.inputs["schedule"], timezone=a.inputs["timezone"],
                                 min_capacity=a.inputs["scalableTargetAction"]["minCapacity"]) for a in actions]
    # The floor in force while the preview ran (either end, should a scheduled edge fall inside it).
    in_force = {floor_in_force(specs, target.inputs["minCapacity"], when)[0] for when in (started, ended)}
    assert sched_target.inputs["minCapacity"] in in_force
