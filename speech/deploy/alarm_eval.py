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
(:func:`speech.deploy.scaling.guarded_queries`) period by period, with FILL of an all-empty series
either filled or not (:func:`fill`).
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


def fill(series: Sequence[float | None], value: float, *, fill_empty: bool) -> list[float | None]:
    """``FILL(series, value)`` over the queried periods: every missing period gets ``value``
    (CloudWatch user guide, "Metric math syntax and functions", FILL). Whether a series with no
    point at all in the range comes back filled is not documented: ``fill_empty`` chooses, and the
    tests that depend on it try both."""
    if not fill_empty and all(v is None for v in series):
        return [None] * len(series)
    return [value if v is None else v for v in series]


COPIES_SPLIT = 1.5
"""``inv / ipc`` (Invocations over InvocationsPerCopy: the copies that served) above this is two or
more copies."""


def guarded_periods(concurrency: Sequence[float | None], invocations: Sequence[float | None],
                    per_copy: Sequence[float | None], failures: Sequence[float | None], guard_value: float,
                    *, fill_empty: bool = True) -> list[float | None]:
    """Per period, what the copy scale-in expression :data:`speech.deploy.scaling.GUARD_EXPRESSION`
    gives (CloudWatch metric math: IF per timestamp, no point where its condition or the chosen
    branch has none; FILL as :func:`fill`):

    * invocations in the period and two or more copies served them (``inv / ipc``): the concurrency
      point (``low``), compared with C_scale_min as before;
    * invocations and one copy, or none that served (a refused request counted as an invocation):
      ``guard_value`` (not breaching): the last copy is not removed while anything is invoked;
    * no invocations but a request found no copy (NoCapacityInvocationFailures): ``guard_value``;
    * neither: 0 (breaching): nothing was invoked.

    Series: ConcurrentRequestsPerCopy Maximum, Invocations Sum, InvocationsPerCopy Sum,
    NoCapacityInvocationFailures Sum, one value (or None) per period."""
    n = len(concurrency)
    if not len(invocations) == len(per_copy) == len(failures) == n:
        raise ValueError("every series needs the same periods")
    inv_f = fill(invocations, 0.0, fill_empty=fill_empty)
    ipc_f = fill(per_copy, 0.0, fill_empty=fill_empty)
    nocap_f = fill(failures, 0.0, fill_empty=fill_empty)
    out: list[float | None] = []
    for low, inv, ipc, c_inv, c_ipc, c_nocap in zip(concurrency, invocations, per_copy, inv_f, ipc_f, nocap_f,
                                                    strict=True):
        if c_inv is None:
            out.append(None)
        elif c_inv > 0:
            if c_ipc is None:
                out.append(None)
            elif c_ipc > 0:
                copies = None if inv is None or ipc is None else inv / ipc
                out.append(None if copies is None else (low if copies > COPIES_SPLIT else guard_value))
            else:
                out.append(guard_value)
        else:
            out.append(None if c_nocap is None else (guard_value if c_nocap > 0 else 0.0))
    return out


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
