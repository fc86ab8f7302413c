"""Floors per weekday (issue 45, the week): a schedule whose entries name a weekday renders as
Application Auto Scaling's weekly cron ``cron(M H ? * MON *)`` (AWS's six fields, day of month ``?``
when the day of week is set), as KEDA cron triggers ``M H * * 1`` (five fields, Sunday 0), holds
the floor of the week's latest entry (the deploy spec's floor_in_force, the simulator's floor_at),
and stays within Application Auto Scaling's 200 scheduled actions per scalable target. The
simulator's side: tests/speech/sim/test_simulate_weekday.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from speech.deploy.kubernetes.objects import cron_triggers
from speech.deploy.kubernetes.rules import scaled_object_problems
from speech.deploy.scaling import cron_minute, floor_in_force, scaling_spec
from speech.plan.realtime import build_plan
from speech.schema.config import MAX_SCHEDULED_FLOORS, WEEKDAYS, FloorSchedule, PlanInputs

# weekdays raised at 07:40 to 30 and released at 19:00; Saturday raised to 12 at 09:00 only; nothing on Sunday
WEEK = [*({"weekday": d, "at": "07:40", "min_instances": 30} for d in WEEKDAYS[:5]),
        *({"weekday": d, "at": "19:00", "min_instances": 1} for d in WEEKDAYS[:5]),
        {"weekday": "SAT", "at": "09:00", "min_instances": 12}, {"weekday": "SAT", "at": "18:00", "min_instances": 1}]


def weekday_plan(qmax_ref, ttotal_ref, floors=WEEK, timezone="UTC"):
    return build_plan(qmax_ref, ttotal_ref, PlanInputs(peak_rps=5000, trough_rps=10,
                                                       schedule=FloorSchedule(timezone=timezone, floors=floors)))


def test_a_weekly_schedule_is_sorted_through_the_week_and_refuses_what_aws_would():
    s = FloorSchedule(floors=list(reversed(WEEK)))
    assert s.weekly and s.period_min == 7 * 1440
    assert [f.when for f in s.floors][:3] == ["MON 07:40", "MON 19:00", "TUE 07:40"]
    assert [f.when for f in s.floors][-2:] == ["SAT 09:00", "SAT 18:00"]
    # a daily schedule keeps its bytes: no weekday key in the dump
    daily = FloorSchedule(floors=[{"at": "07:40", "min_instances": 3}, {"at": "19:00", "min_instances": 1}])
    assert not daily.weekly and "weekday" not in str(daily.model_dump(mode="json"))
    with pytest.raises(ValueError, match="two floors at MON 07:40"):
        FloorSchedule(floors=[*WEEK, {"weekday": "MON", "at": "07:40", "min_instances": 2}])
    with pytest.raises(ValueError, match="floors at 12:00 name no weekday"):
        FloorSchedule(floors=[*WEEK, {"at": "12:00", "min_instances": 2}])
    with pytest.raises(ValueError, match="weekday"):
        FloorSchedule(floors=[{"weekday": "MONDAY", "at": "07:40", "min_instances": 2}, *WEEK])


def test_more_floors_than_the_scheduled_action_quota_are_refused_with_the_fix():
    """Application Auto Scaling: 200 scheduled actions per scalable target, not adjustable. Seven
    days of half-hour slots (336) do not fit; 200 do."""
    slots = [{"weekday": d, "at": f"{m // 60:02d}:{m % 60:02d}", "min_instances": 1 + m // 30 % 2}
             for d in WEEKDAYS for m in range(0, 1440, 30)]
    assert len(slots) == 336
    with pytest.raises(ValueError, match=r"336 scheduled floors exceed .* quota of 200 .* coarsen"):
        FloorSchedule(floors=slots)
    assert len(FloorSchedule(floors=slots[:MAX_SCHEDULED_FLOORS]).floors) == MAX_SCHEDULED_FLOORS


def test_the_sagemaker_spec_renders_weekly_crons_and_holds_the_weeks_latest_floor(qmax_ref, ttotal_ref):
    p = weekday_plan(qmax_ref, ttotal_ref, timezone="Europe/Berlin")
    actions = scaling_spec(p, "dev-kokoro-82m").scheduled
    by = {a.name: a for a in actions}
    assert len(by) == len(WEEK)
    mon = by["dev-kokoro-82m-floor-MON-0740"]
    assert (mon.schedule, mon.timezone, mon.min_capacity) == ("cron(40 7 ? * MON *)", "Europe/Berlin", 30)
    assert by["dev-kokoro-82m-floor-SAT-0900"].schedule == "cron(0 9 ? * SAT *)"
    assert cron_minute("cron(0 9 ? * SAT *)") == (5 * 1440 + 540, True)
    assert cron_minute("cron(40 7 * * ? *)") == (460, False)
    with pytest.raises(ValueError, match="not cron"):
        cron_minute("cron(0 9 ? * MON-FRI *)")  # a range is valid AWS but not what the floors render
    floor = p.fleet.min_instances
    # 2026-12-07 is a Monday; Berlin is UTC+1 in December
    monday = datetime(2026, 12, 7, tzinfo=UTC)
    cases = [
        (monday + timedelta(hours=6, minutes=39), floor),        # Monday 07:39 Berlin: still Sunday's (none raised)
        (monday + timedelta(hours=6, minutes=40), 30),           # Monday 07:40 Berlin: raised
        (monday + timedelta(hours=17, minutes=59), 30),
        (monday + timedelta(hours=18), floor),                   # Monday 19:00 Berlin: released
        (monday + timedelta(days=5, hours=8), 12),               # Saturday 09:00 Berlin: the weekend's own floor
        (monday + timedelta(days=6, hours=8), floor),            # Sunday 09:00: nothing scheduled on Sundays
        (monday - timedelta(hours=2), floor),                    # Sunday night before the week's first entry
    ]
    for when, want in cases:
        assert floor_in_force(actions, floor, when)[0] == want, when


def test_keda_cron_triggers_run_from_each_weekday_entry_to_the_next(qmax_ref, ttotal_ref):
    p = weekday_plan(qmax_ref, ttotal_ref)
    triggers = cron_triggers(p.schedule, p.fleet.min_instances)
    by = {t["name"]: t["metadata"] for t in triggers}
    # one trigger per raise: five weekdays and Saturday; releases are where a trigger ends
    assert sorted(by) == ["floor-fri-0740", "floor-mon-0740", "floor-sat-0900", "floor-thu-0740", "floor-tue-0740",
                          "floor-wed-0740"]
    assert (by["floor-mon-0740"]["start"], by["floor-mon-0740"]["end"]) == ("40 7 * * 1", "0 19 * * 1")
    assert (by["floor-fri-0740"]["start"], by["floor-sat-0900"]["start"]) == ("40 7 * * 5", "0 9 * * 6")
    assert by["floor-sat-0900"]["desiredReplicas"] == "12"
    obj = {"metadata": {"name": "kokoro"}, "spec": {"scaleTargetRef": {"name": "kokoro"}, "minReplicaCount": 1,
                                                    "maxReplicaCount": p.fleet.max_instances, "triggers": triggers}}
    assert scaled_object_problems(obj) == []
    # a raise on Sunday whose next entry is Monday's: the window wraps the week (Sunday is cron's 0)
    sun = FloorSchedule(floors=[{"weekday": "MON", "at": "06:00", "min_instances": 1},
                                {"weekday": "SUN", "at": "22:00", "min_instances": 9}])
    [t] = cron_triggers(sun, 1)
    assert (t["metadata"]["start"], t["metadata"]["end"]) == ("0 22 * * 0", "0 6 * * 1")


def test_the_keda_stack_renders_a_weekly_schedule_the_server_rules_accept():
    """Through the whole Kubernetes render (the k8s-keda example, its plan's schedule made weekly,
    through YAML and back): the ScaledObject carries one cron trigger per raise with the weekday's
    day of week, and nothing KEDA's CRD, webhook or cron scaler refuses."""
    import copy
    from pathlib import Path

    from speech.deploy.gate import plan_model
    from speech.deploy.kubernetes import rules
    from speech.deploy.kubernetes.objects import model_objects
    from speech.schema.config import ModelConfig
    from speech.stack.render import read_yaml, to_yaml
    from tests.stack_files import MODELS, embedded_config

    root = Path(__file__).resolve().parents[3]
    entry = copy.deepcopy(embedded_config(root / "examples/Pulumi.k8s-keda.yaml")[MODELS]["kokoro-82m"])
    entry["plan"]["schedule"] = {"timezone": "Europe/Berlin", "floors": WEEK}
    dep = plan_model("kokoro-82m", ModelConfig.model_validate(entry), endpoint="k8s-keda-kokoro-82m")
    objects = read_yaml(to_yaml(model_objects(dep, "k8s-keda-kokoro-82m")))
    assert rules.check_objects(objects) == []
    [so] = [o for o in objects if o["kind"] == "ScaledObject"]
    crons = {t["metadata"]["start"]: t["metadata"] for t in so["spec"]["triggers"] if t["type"] == "cron"}
    assert sorted(crons) == ["0 9 * * 6", "40 7 * * 1", "40 7 * * 2", "40 7 * * 3", "40 7 * * 4", "40 7 * * 5"]
    assert crons["0 9 * * 6"]["end"] == "0 18 * * 6" and crons["0 9 * * 6"]["timezone"] == "Europe/Berlin"
