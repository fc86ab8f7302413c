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
    # IF(FILL(nocap, 0) > 0, 9, low): the guard where a request was refused, the metric elsewhere,
    # nothing where the metric has no point and nothing was refused.
    assert guarded_periods([0.0, None, None, 2.0], [None, 3.0, None, 0.0], 9.0) == [0.0, 9.0, None, 2.0]
