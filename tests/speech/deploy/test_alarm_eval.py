"""The alarm evaluator against CloudWatch's own examples: the two tables of "How CloudWatch alarms
treat missing data" (evaluation range 5, evaluation periods 3; 3 of 3 and 2 of 3), oldest point
first, 0 a good point, X a breaching one, - a missing one. "keep" is the guide's "Retain current
state"."""

from __future__ import annotations

import pytest

from speech.deploy.alarm_eval import evaluate, guarded_periods

TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")
THREE_OF_THREE = [
    ("0 - X - X", "OK OK OK OK"),
    ("0 - - - -", "OK OK OK OK"),
    ("- - - - -", "INSUFFICIENT_DATA keep ALARM OK"),
    ("0 X X - X", "ALARM ALARM ALARM ALARM"),
    ("- - - - X", "INSUFFICIENT_DATA keep ALARM OK"),
    # The Knowledge Center's case: one breaching point, then nothing, is ALARM even as missing.
    ("X - - - -", "ALARM keep ALARM OK"),
]
TWO_OF_THREE = [
    ("0 - X - X", "ALARM ALARM ALARM ALARM"),
    ("0 0 X 0 X", "ALARM ALARM ALARM ALARM"),
    ("0 - X - -", "OK OK ALARM OK"),
    ("- - - - 0", "OK OK ALARM OK"),
    ("- - - - X", "INSUFFICIENT_DATA keep ALARM OK"),
]


def _periods(points: str) -> list[float | None]:
    return [None if p == "-" else (1.0 if p == "X" else 0.0) for p in points.split()]


@pytest.mark.parametrize("m, points, expected", [(3, *row) for row in THREE_OF_THREE] + [(2, *row) for row in TWO_OF_THREE])
def test_the_documented_examples(m, points, expected):
    for treat, want in zip(TREATMENTS, expected.split(), strict=True):
        states = evaluate(_periods(points), threshold=0.5, comparison="GreaterThanThreshold", evaluation_periods=3,
                          datapoints_to_alarm=m, treat_missing_data=treat, evaluation_range=5)
        got = states[-1]
        assert got == (states[-2] if want == "keep" else want), (points, treat, states)


def test_an_alarm_as_missing_stays_in_alarm_until_its_breaching_points_leave_the_range():
    periods = [1.0] * 3 + [None] * 6
    states = evaluate(periods, threshold=0.5, comparison="GreaterThanThreshold", evaluation_periods=3,
                      datapoints_to_alarm=3, treat_missing_data="missing", evaluation_range=5)
    # After minute 3 the metric stops: ALARM while a breaching point is in the last 5, then no data.
    assert states == ["ALARM"] * 5 + ["INSUFFICIENT_DATA"] * 2


def test_the_guard_expression_per_period():
    # Per minute: two copies served (inv / ipc = 2): the concurrency; one copy served: the guard;
    # nothing invoked but a request refused: the guard; nothing at all: 0 (idle).
    low, inv, ipc = [1.0, 1.0, None, None], [10.0, 10.0, None, None], [5.0, 10.0, None, None]
    nocap = [None, None, 2.0, None]
    assert guarded_periods(low, inv, ipc, nocap, 9.0) == [1.0, 9.0, 9.0, 0.0]
    # A refused request counted as an invocation with no copy serving (no InvocationsPerCopy): the guard.
    assert guarded_periods([None], [1.0], [None], [1.0], 9.0) == [9.0]


@pytest.mark.parametrize("fill_empty, idle", [(True, [0.0, 0.0]), (False, [None, None])])
def test_fill_of_an_all_empty_series_either_way(fill_empty, idle):
    # Nothing in the range: filled, the idle value 0; not filled, no point (which the alarm treats
    # as breaching, the same verdict).
    assert guarded_periods([None, None], [None, None], [None, None], [None, None], 9.0, fill_empty=fill_empty) == idle
