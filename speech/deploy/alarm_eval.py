"""A small, pure evaluator of CloudWatch metric-alarm semantics, to test alarm definitions
(:class:`speech.infra.components.observability.OpsAlarm`, :class:`speech.deploy.scaling.AlarmSpec`)
against synthetic metric series.

What it models: raw datapoints are aggregated into periods of ``period_s`` with the alarm's
statistic, and each evaluation follows CloudWatch's documented rule (user guide, "Using Amazon
CloudWatch alarms", section "How CloudWatch alarms treat missing data"): CloudWatch reads an
*evaluation range* of more periods than ``evaluation_periods`` (its example: 5 for 3);

* no period of the range missing, or at least ``evaluation_periods`` of them present: the most
  recent ``evaluation_periods`` present points decide, missing-data treatment ignored;
* fewer present: the missing-data treatment fills the rest, using "missing data points only as few
  times as possible" (breaching: counted as breaching, notBreaching: as good);
* ``missing`` and ``ignore`` fill nothing: ``datapoints_to_alarm`` breaching points give ALARM,
  else a good point gives OK; with only (fewer) breaching points, ``missing`` gives ALARM when the
  oldest of them is at least ``datapoints_to_alarm`` periods old, "even when missing data is being
  treated as missing" (AWS Knowledge Center, "Why did my CloudWatch alarm send me a notification
  after a single breached data point?"; the guide's table row ``X - - - -``), and INSUFFICIENT_DATA
  when it is younger; ``ignore`` keeps the state;
* every period of the range missing: INSUFFICIENT_DATA (``missing``), the state kept (``ignore``),
  ALARM (``breaching``), OK (``notBreaching``).

So an alarm treating missing data as missing stays in ALARM after its metric stops, until the
breaching points leave the evaluation range: an Auto Scaling action keeps being invoked all that
time. The range's length for other windows is not documented; it is a parameter here
(``evaluation_range``, default the example's evaluation_periods + 2) and the tests that depend on it
try several. :func:`guarded_periods` evaluates the copy scale-in alarm's metric-math expression
(:func:`speech.deploy.scaling.guarded_queries`) period by period.
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
             datapoints_to_alarm: int, treat_missing_data: str = "notBreaching",
             evaluation_range: int | None = None) -> list[State]:
    """The alarm's state after each period (a state only once ``evaluation_periods`` have passed),
    by CloudWatch's documented rule (module docstring). ``evaluation_range``: how many of the most
    recent periods CloudWatch reads (default ``evaluation_periods + 2``, the documented example's)."""
    breach = _COMPARE[comparison]
    n, m = evaluation_periods, datapoints_to_alarm
    r = max(n, evaluation_range if evaluation_range is not None else n + 2)
    state: State = "INSUFFICIENT_DATA"
    states: list[State] = []
    for end in range(n, len(periods) + 1):
        window = periods[max(0, end - r):end]
        # (age in periods, newest = 1; breaching?) of each present point, newest first.
        present = [(age, breach(v, threshold)) for age, v in enumerate(reversed(window), start=1) if v is not None]
        state = _next_state(present, state, n, m, treat_missing_data)
        states.append(state)
    return states


def _next_state(present: list[tuple[int, bool]], state: State, n: int, m: int, treat: str) -> State:
    if len(present) >= n:
        # Enough real points: the most recent n decide, the missing-data setting is not used.
        return "ALARM" if sum(b for _, b in present[:n]) >= m else "OK"
    bad = sum(b for _, b in present)
    good = len(present) - bad
    if treat in ("breaching", "notBreaching"):
        # Filled as few times as possible: n - len(present) filled points join the real ones.
        filled = n - len(present)
        bad += filled if treat == "breaching" else 0
        return "ALARM" if bad >= m else "OK"
    if not present:
        return "INSUFFICIENT_DATA" if treat == "missing" else state
    if bad >= m:
        return "ALARM"
    if good:
        return "OK"
    if treat == "ignore":
        return state
    # Only breaching points, fewer than m: ALARM once the oldest of them is m periods old (the
    # Knowledge Center's single-breached-point case), else too early to say.
    return "ALARM" if max(age for age, _ in present) >= m else "INSUFFICIENT_DATA"


def guarded_periods(concurrency: Sequence[float | None], failures: Sequence[float | None],
                    guard_value: float) -> list[float | None]:
    """Per period, what ``IF(FILL(nocap, 0) > 0, guard_value, low)`` gives (CloudWatch user guide,
    "Using metric math", IF and FILL): ``guard_value`` where NoCapacityInvocationFailures is above
    0, else the concurrency point, and no point where that is missing (IF drops it)."""
    if len(concurrency) != len(failures):
        raise ValueError("both series need the same periods")
    return [guard_value if (f or 0.0) > 0 else c for c, f in zip(concurrency, failures, strict=True)]


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
                   end_s: float, evaluation_range: int | None = None) -> list[State]:
    """:func:`evaluate` with every parameter taken from one single-metric alarm definition
    (:class:`speech.infra.components.observability.OpsAlarm`)."""
    if alarm.queries or alarm.statistic is None:
        raise ValueError(f"{alarm.name} is a metric-math alarm; only single-metric alarms are evaluated")
    periods = period_values(datapoints, alarm.period_s, alarm.statistic, start_s, end_s)
    return evaluate(periods, threshold=alarm.threshold, comparison=alarm.comparison,
                    evaluation_periods=alarm.evaluation_periods, datapoints_to_alarm=alarm.datapoints_to_alarm,
                    treat_missing_data=alarm.treat_missing_data, evaluation_range=evaluation_range)
