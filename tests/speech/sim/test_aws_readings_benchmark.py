"""benchmarks/aws_readings.py in process (fast, no subprocess): the max move leaves the rule-off row
out and takes the largest change either way, a one-hour trace gives every reading's row for both
plans with the move computed from those rows, and an unknown trace is exit 2 with nothing on stdout."""
from __future__ import annotations

import json

import pytest

from benchmarks.aws_readings import READINGS, Row, main, max_move


def _row(reading: str, share: float, hours: float, unknown: bool = True) -> Row:
    return Row(reading, unknown, share, 1 - share, hours, 1.0, 1, 1, 0, 0.0)


def test_max_move_is_the_largest_change_from_the_default_among_the_unknowns():
    rows = [_row("default", 0.997, 100.0), _row("a", 0.998, 90.0), _row("b", 0.990, 104.0),
            _row("rule off", 0.900, 200.0, unknown=False)]
    m = max_move(rows)
    assert m.slo_share_reading == "b" and m.slo_share_points == pytest.approx(-0.7)
    assert m.instance_hours_reading == "a" and m.instance_hours_pct == pytest.approx(-10.0)
    assert (m.keeps_slo_share, m.readings) == (2, 3)  # 0.997 and 0.998 keep 0.995; the rule-off row is not counted


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_one_trace_every_reading_both_plans(capsys):
    assert main(["--traces", "azure-conv", "--train-days", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [trace] = report["traces"]
    assert trace["trace"] == "azure-conv:peak=500" and trace["test_seed"] == 2
    for body in trace["plans"].values():
        rows = body["rows"]
        assert [r["reading"] for r in rows] == [r.label for r in READINGS]
        assert rows[-1]["unknown"] is False and all(r["unknown"] for r in rows[:-1])
        base, m = rows[0], body["max_move"]
        moves = [abs(r["within_slo_share"] - base["within_slo_share"]) for r in rows if r["unknown"]]
        assert abs(m["slo_share_points"]) == pytest.approx(100 * max(moves))
        for r in rows:
            assert r["x_floor"] == pytest.approx(r["instance_hours"] / trace["floor_instance_hours"])


def test_an_unknown_trace_is_bad_input(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--traces", "diurnal,nope"])
    out = capsys.readouterr()
    assert exit_.value.code == 2 and out.out == ""
    assert "unknown trace 'nope'" in out.err and "azure-conv" in out.err
