"""``bench forecast`` end to end: a CloudWatch per-minute export in, a forecast artifact whose
schedule ``bench plan --floors-from`` puts into the plan; bad input exits 2 and writes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from bench.cli.main import main
from tests.conftest import QMAX_REF, TTOTAL_REF


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plan")
    assert main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "800", "--trough-rps", "20",
                 "--out", str(out)]) == 0
    return next(out.glob("plan-*.json"))


def _export(path: Path, days: int = 3) -> Path:
    """A per-minute Invocations export: a tide from 20 to 800 rps, days ending 2026-12-03 00:00 UTC."""
    t0 = datetime(2026, 12, 3, tzinfo=UTC) - timedelta(days=days)
    rng = np.random.default_rng(5)
    rows = ["Timestamp,Value"]
    for m in range(days * 1440):
        rps = 20 + 780 * (1 - np.cos(2 * np.pi * (m % 1440) / 1440)) / 2
        rows.append(f"{(t0 + timedelta(minutes=m)).isoformat().replace('+00:00', 'Z')},{rps * 60 * (1 + 0.05 * rng.standard_normal()):.0f}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_an_export_becomes_forecast_floors_the_plan_takes(tmp_path, plan_file, capsys):
    history = _export(tmp_path / "inv.csv")
    assert main(["forecast", "--plan", str(plan_file), "--history", f"cloudwatch:{history}", "--out", str(tmp_path),
                 "--json"]) == 0
    art = json.loads(capsys.readouterr().out)
    prov = art["schedule"]["forecast"]
    # the export's own clock: it ends at 2026-12-03 00:00, so the next day's forecast holds until the 4th
    assert prov["history_end"] == "2026-12-03T00:00:00Z" and prov["valid_until"] == "2026-12-04T00:00:00Z"
    assert set(prov["backtest_loss"]) >= {"seasonal-naive", prov["model"]}
    assert "--history 'cloudwatch:" in prov["refresh"]
    floors = art["schedule"]["floors"]
    assert 2 <= len(floors) <= 200 and max(f["min_instances"] for f in floors) >= 800 / art["per_instance_rps"]
    written = tmp_path / "forecast-kokoro-82m.json"
    assert written.exists()
    out = tmp_path / "planned"
    assert main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "800", "--trough-rps", "20",
                 "--out", str(out), "--floors-from", str(written), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["schedule"]["forecast"]["valid_until"] == "2026-12-04T00:00:00Z"
    assert [f["at"] for f in plan["schedule"]["floors"]] == [f["at"] for f in floors]


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_floors_from_keeps_the_stack_entrys_cap(tmp_path, plan_file, capsys):
    # The re-plan that takes the forecast's floors is bounded by the cap the entry stores (no
    # --max-instances this time), as the plan before it is: the peak needs far more than 5.
    history = _export(tmp_path / "inv.csv")
    assert main(["forecast", "--plan", str(plan_file), "--history", f"cloudwatch:{history}", "--out", str(tmp_path)]) == 0
    base = ["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "800", "--trough-rps", "20",
            "--out", str(tmp_path / "planned"), "--stack", "s", "--stack-dir", str(tmp_path)]
    assert main([*base, "--max-instances", "5"]) in (0, 1)
    capsys.readouterr()
    assert main([*base, "--floors-from", str(tmp_path / "forecast-kokoro-82m.json"), "--json"]) in (0, 1)
    plan = json.loads(capsys.readouterr().out)
    assert plan["fleet"]["max_instances"] == 5 and max(f["min_instances"] for f in plan["schedule"]["floors"]) <= 5


def _weekly_export(path: Path, end: datetime, weeks: int = 3) -> Path:
    """Per-minute Invocations for ``weeks`` weeks ending at ``end``: weekdays' tide to 800 rps, the
    weekend's to 300."""
    t0 = end - timedelta(weeks=weeks)
    rows = ["Timestamp,Value"]
    for m in range(weeks * 7 * 1440):
        at = t0 + timedelta(minutes=m)
        top = 300 if at.weekday() >= 5 else 800
        rps = 20 + (top - 20) * (1 - np.cos(2 * np.pi * (at.hour * 60 + at.minute) / 1440)) / 2
        rows.append(f"{at.isoformat().replace('+00:00', 'Z')},{rps * 60:.0f}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow  # seconds (three weeks of minutes written, read and forecast): make test, not test-fast
def test_season_days_7_writes_a_weeks_floors_per_weekday_valid_for_the_week(tmp_path, plan_file, capsys):
    # three weeks ending Thursday 2026-12-03 00:00 UTC: the forecast's week starts on a Thursday,
    # its floors are per weekday (Monday-based crons), valid for seven days
    history = _weekly_export(tmp_path / "weeks.csv", datetime(2026, 12, 3, tzinfo=UTC))
    assert main(["forecast", "--plan", str(plan_file), "--history", f"cloudwatch:{history}", "--season-days", "7",
                 "--model", "seasonal-naive", "--out", str(tmp_path), "--json"]) == 0
    art = json.loads(capsys.readouterr().out)
    prov = art["schedule"]["forecast"]
    assert (prov["horizon_s"], prov["valid_until"]) == (7 * 86400, "2026-12-10T00:00:00Z")
    assert "--season-days 7" in prov["refresh"]
    assert art["start_minute"] == 3 * 1440 and len(art["point_rps"]) == 7 * 1440
    floors = art["schedule"]["floors"]
    assert len(floors) <= 200 and {f["weekday"] for f in floors} == {"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"}
    top = {d: max(f["min_instances"] for f in floors if f["weekday"] == d) for d in ("WED", "SAT")}
    assert top["WED"] >= 800 / art["per_instance_rps"] > 300 / art["per_instance_rps"] + 1 >= top["SAT"] - 1
    out = tmp_path / "planned"
    assert main(["plan", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "800", "--trough-rps", "20",
                 "--out", str(out), "--floors-from", str(tmp_path / "forecast-kokoro-82m.json"), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [(f["weekday"], f["at"]) for f in plan["schedule"]["floors"]] == [(f["weekday"], f["at"]) for f in floors]


def test_bad_input_exits_2_and_writes_nothing(tmp_path, plan_file, capsys):
    short = _export(tmp_path / "short.csv", days=2)
    assert main(["forecast", "--plan", str(plan_file), "--history", f"cloudwatch:{short}", "--out", str(tmp_path)]) == 2
    assert "three seasons" in capsys.readouterr().err
    assert main(["forecast", "--plan", str(plan_file), "--history", "diurnal:peak=100", "--quantile", "1.2",
                 "--out", str(tmp_path)]) == 2
    assert "--quantile 1.2" in capsys.readouterr().err
    assert not list(tmp_path.glob("forecast-*.json"))


def test_simulate_predictive_forecasts_from_the_history_given(tmp_path, plan_file, capsys):
    # a history of 49 h whose hour 25 (a day before the trace's first hour) ran at 300 rps: predictive
    # raises the fleet for the trace's first hour; without the history it has under a day of data
    # and is the reactive plan
    base = ["simulate", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--plan", str(plan_file),
            "--trace", "steady:rps=20,duration=3600", "--policies", "plan,predictive", "--out", str(tmp_path), "--json"]
    assert main([*base, "--history", "step:base=20,factor=15,at=90000,duration=176400"]) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["predictive"]["instance_hours"] > 2 * rows["plan"]["instance_hours"]
    assert any(a["reason"] == "predictive" for a in rows["predictive"]["actions"])
    assert main(base) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["predictive"]["instance_hours"] == rows["plan"]["instance_hours"]


def test_tune_refuses_a_forecast_history_too_short_to_forecast(tmp_path, capsys):
    # a day of history cannot be backtested (a model fits on two days and is checked on a third):
    # refused before the search starts, nothing written
    assert main(["tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--trace", "steady:rps=5,duration=600",
                 "--draws", "1", "--holdout-days", "1", "--forecast-history", "diurnal:peak=100,hours=24",
                 "--out", str(tmp_path), "--jobs", "1"]) == 2
    assert "--forecast-history 'diurnal:peak=100,hours=24'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
