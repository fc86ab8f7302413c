"""A small, pure evaluator of CloudWatch metric-alarm semantics, to test alarm definitions
(:class:`speech.infra.components.observability.OpsAlarm`) against synthetic metric series.

What it models (CloudWatch "Evaluating an alarm"): raw datapoints are aggregated into periods of
``period_s`` with the alarm's statistic; the alarm looks at the last ``evaluation_periods``
periods and is in ALARM when at least ``datapoints_to_alarm`` of them breach the threshold on the
alarm's side of the comparison. Missing periods follow ``treat_missing_data`` (notBreaching: good,
breaching: bad, ignore/missing: not counted, and with no data at all the state stays
INSUFFICIENT_DATA). Single-metric alarms only (metric math is not evaluated here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

State = Literal["OK", "ALARM", "INSUFFICIENT_DATA"]

_COMPARE = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


def aggregate(values: Sequence[float], statistic: str) -> float:
    """One period's statistic of its raw datapoints (Average, Maximum, Minimum, Sum, SampleCount)."""
    if statistic == "Average":
        return statistics.fmean(values)
    if statistic == "Maximum":
        return max(values)
    if statistic == "Minimum":
        return min(values)
    if statistic == "Sum":
        return math.fsum(values)
    if statistic == "SampleCount":
        return float(len(values))
    raise ValueError(f"statistic {statistic!r} is not evaluated here")


def period_values(datapoints: Iterable[tuple[float, float]], period_s: int, statistic: str,
                  start_s: float, end_s: float) -> list[float | None]:
    """The statistic per period from ``start_s`` to ``end_s`` (seconds); None for a period without data.

    ``datapoints`` are (timestamp s, value) pairs, e.g. one per container flush per instance."""
    n = int((end_s - start_s) // period_s)
    buckets: list[list[float]] = [[] for _ in range(n)]
    for t, v in datapoints:
        i = int((t - start_s) // period_s)
        if 0 <= i < n:
            buckets[i].append(v)
    return [aggregate(b, statistic) if b else None for b in buckets]


def evaluate(periods: Sequence[float | None], *, threshold: float, comparison: str, evaluation_periods: int,
             datapoints_to_alarm: int, treat_missing_data: str = "notBreaching") -> list[State]:
    """The alarm's state after each period (a state only once ``evaluation_periods`` have passed)."""
    breach = _COMPARE[comparison]
    states: list[State] = []
    for end in range(evaluation_periods, len(periods) + 1):
        window = periods[end - evaluation_periods:end]
        bad = good = 0
        for v in window:
            if v is None:
                if treat_missing_data == "breaching":
                    bad += 1
                elif treat_missing_data == "notBreaching":
                    good += 1
            elif breach(v, threshold):
                bad += 1
            else:
                good += 1
        if bad >= datapoints_to_alarm:
            states.append("ALARM")
        elif bad + good == 0:
            states.append("INSUFFICIENT_DATA")
        else:
            states.append("OK")
    return states


class SingleMetricAlarm(Protocol):
    """What :func:`evaluate_alarm` reads of an alarm definition (OpsAlarm has these fields)."""

    @property
    def name(self) -> str: ...
    @property
    def queries(self) -> Sequence[object]: ...
    @property
    def period_s(self) -> int: ...
    @property
    def statistic(self) -> str | None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def comparison(self) -> str: ...
    @property
    def evaluation_periods(self) -> int: ...
    @property
    def datapoints_to_alarm(self) -> int: ...
    @property
    def treat_missing_data(self) -> str: ...


def evaluate_alarm(alarm: SingleMetricAlarm, datapoints: Iterable[tuple[float, float]], start_s: float,
                   end_s: float) -> list[State]:
    """:func:`evaluate` with every parameter taken from one single-metric alarm definition
    (:class:`speech.infra.components.observability.OpsAlarm`)."""
    if alarm.queries or alarm.statistic is None:
        raise ValueError(f"{alarm.name} is a metric-math alarm; only single-metric alarms are evaluated")
    periods = period_values(datapoints, alarm.period_s, alarm.statistic, start_s, end_s)
    return evaluate(periods, threshold=alarm.threshold, comparison=alarm.comparison,
                    evaluation_periods=alarm.evaluation_periods, datapoints_to_alarm=alarm.datapoints_to_alarm,
                    treat_missing_data=alarm.treat_missing_data)
