"""forecast-floors-fresh through the pack: a stack whose plan carries forecast floors past the
forecast's horizon is refused at preview with the command that refreshes it; the scheduled actions
themselves still match the plan (the other rules pass)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.check import preview_resources
from tests.policy.policy_edits import messages
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[3]


def test_a_stale_forecast_is_refused_at_preview_with_its_refresh(pack, tmp_path):
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    entry = config["speech-endpoints:models"]["kokoro-82m"]
    # a forecast made from history ending 2020-01-01: valid for a day, long past
    entry["plan"]["schedule"] = {
        "timezone": "UTC",
        "floors": [{"at": "07:40", "min_instances": 40}, {"at": "12:00", "min_instances": 1}],
        "forecast": {"model": "ets", "quantile": 0.9, "history_sha256": "ab" * 32, "history_end": "2020-01-01T00:00:00Z",
                     "horizon_s": 86400, "valid_until": "2020-01-02T00:00:00Z",
                     "refresh": "python -m bench forecast --plan P --history cloudwatch:inv.csv"},
    }
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "dev")
    # the SageMaker stack deploys the forecast floors as Application Auto Scaling scheduled actions
    actions = [r for r in resources if r.type == "aws:appautoscaling/scheduledAction:ScheduledAction"]
    assert sorted(a.props["schedule"] for a in actions) == ["cron(0 12 * * ? *)", "cron(40 7 * * ? *)"]
    report = pack.check(resources)
    [msg] = messages(report, "forecast-floors-fresh", "mandatory")
    assert "valid until 2020-01-02T00:00:00Z" in msg
    assert "fix: python -m bench forecast --plan P --history cloudwatch:inv.csv" in msg
    # the floors themselves are deployed as planned: only the freshness rule speaks
    assert not messages(report, "scaling-matches-plan", "mandatory")


@pytest.mark.slow  # a Pulumi preview under mocks and the pack, ~2 s
def test_weekday_forecast_floors_deploy_as_weekly_scheduled_actions_the_pack_accepts(pack, tmp_path):
    """A week's forecast floors (bench forecast --season-days 7): one entry per weekday, rendered as
    cron(M H ? * DAY *); the pack's scaling-matches-plan finds them as planned, and a forecast
    within its horizon (a week) passes forecast-floors-fresh."""
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    entry = config["speech-endpoints:models"]["kokoro-82m"]
    entry["plan"]["schedule"] = {
        "timezone": "Europe/Berlin",
        "floors": [{"weekday": "MON", "at": "07:40", "min_instances": 40}, {"weekday": "MON", "at": "19:00", "min_instances": 1},
                   {"weekday": "SAT", "at": "09:00", "min_instances": 18}, {"weekday": "SAT", "at": "17:00", "min_instances": 1}],
        "forecast": {"model": "ets", "quantile": 0.9, "history_sha256": "ab" * 32, "history_end": "2999-01-04T00:00:00Z",
                     "horizon_s": 7 * 86400, "valid_until": "2999-01-11T00:00:00Z",
                     "refresh": "python -m bench forecast --season-days 7 --plan P --history cloudwatch:inv.json"},
    }
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "dev")
    actions = {a.props["schedule"]: a for a in resources if a.type == "aws:appautoscaling/scheduledAction:ScheduledAction"}
    assert sorted(actions) == ["cron(0 17 ? * SAT *)", "cron(0 19 ? * MON *)", "cron(0 9 ? * SAT *)", "cron(40 7 ? * MON *)"]
    assert actions["cron(0 9 ? * SAT *)"].props["scalableTargetAction"]["minCapacity"] == 18
    assert {a.props["timezone"] for a in actions.values()} == {"Europe/Berlin"}
    report = pack.check(resources)
    assert not messages(report, "scaling-matches-plan", "mandatory")
    assert not messages(report, "forecast-floors-fresh", "mandatory")
