"""The crons of scheduled floors: Application Auto Scaling's daily ``cron(M H * * ? *)`` and
weekly ``cron(M H ? * MON *)``, written (:func:`floor_cron`) and read back (:func:`cron_minutes`)
by the one pair of functions the spec, the pack and the simulator share."""

from __future__ import annotations

import re
from collections.abc import Sequence

from speech.schema.config import WEEKDAYS

CRON_DAILY_RE = re.compile(r"^cron\((?P<minute>\d+) (?P<hour>\d+) \* \* \? \*\)$")
"""The daily cron of a scheduled floor: ``cron(M H * * ? *)``."""
CRON_WEEKLY_RE = re.compile(r"^cron\((?P<minute>\d+) (?P<hour>\d+) \? \* (?P<day>MON|TUE|WED|THU|FRI|SAT|SUN) \*\)$")
"""The weekly cron of a per-weekday floor: ``cron(M H ? * MON *)`` (Application Auto Scaling's
six fields, day of month ``?`` when the day of week is set)."""


def floor_cron(minute_of_day: int, weekday: str | None) -> str:
    """The Application Auto Scaling cron of a floor at ``minute_of_day``: every day, or every
    ``weekday`` (MON..SUN)."""
    m, h = minute_of_day % 60, minute_of_day // 60
    return f"cron({m} {h} * * ? *)" if weekday is None else f"cron({m} {h} ? * {weekday} *)"


def cron_minute(cron: str) -> tuple[int, bool]:
    """(minute the floor's cron runs at, weekly): minutes since 00:00 for a daily cron, since Monday
    00:00 for a weekly one. Raises ValueError for any other cron (the floors render only these two)."""
    m = CRON_DAILY_RE.match(cron)
    if m is not None:
        return int(m.group("hour")) * 60 + int(m.group("minute")), False
    m = CRON_WEEKLY_RE.match(cron)
    if m is not None:
        return WEEKDAYS.index(m.group("day")) * 1440 + int(m.group("hour")) * 60 + int(m.group("minute")), True
    raise ValueError(f"{cron!r} is not cron(M H * * ? *) (daily) or cron(M H ? * MON *) (weekly)")


def cron_minutes(crons: Sequence[str]) -> tuple[list[int], int]:
    """Each floor cron's minute (:func:`cron_minute`) and the period the schedule repeats after in
    minutes: 1440 for daily crons, 10080 for weekly ones. Raises ValueError for a cron neither
    renders, or a mix of the two (a schedule is one or the other)."""
    minutes, kinds = [], set()
    for cron in crons:
        at, weekly = cron_minute(cron)
        minutes.append(at)
        kinds.add(weekly)
    if len(kinds) > 1:
        raise ValueError("the scheduled floors mix daily and weekly crons: a schedule is one or the other")
    return minutes, 7 * 1440 if True in kinds else 1440
