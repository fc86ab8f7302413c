"""Request-rate history from a per-minute export of the endpoint's CloudWatch ``Invocations``
metric (docs/design.md §10.11): what ``bench forecast`` reads besides the trace specs.

Pure: the export's text in, (first minute as an aware UTC datetime, requests per second of each
second) out. Two shapes are read:

* CSV with a header naming a time column (``Timestamp``, ``timestamp`` or ``time``) and a value
  column (``Value``, ``Sum`` or ``Invocations``): the console's "Download as .csv" and a hand export.
* JSON of ``aws cloudwatch get-metric-data`` (``MetricDataResults[0].Timestamps`` / ``Values``)
  or ``get-metric-statistics`` (``Datapoints`` with ``Timestamp`` and ``Sum``).

Every value is the Sum of Invocations over one minute (period 60). Minutes the export lacks
(CloudWatch omits a period with no datapoint) count as no requests; timestamps that are not whole
minutes apart, repeated, or values that are negative or not numbers are refused by row.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime

import numpy as np

from speech.errors import PlanInputError

TIME_COLUMNS = ("timestamp", "time", "date")
VALUE_COLUMNS = ("value", "sum", "invocations")
MAX_MINUTES = 60 * 24 * 62
"""At most 62 days of minutes (CloudWatch keeps 1-minute data for 15 days; longer exports are
5-minute data or coarser)."""


def _when(text: str, where: str) -> datetime:
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PlanInputError(f"{where}: {text!r} is not an ISO 8601 time (e.g. 2026-11-30T00:00:00Z)") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _value(text: object, where: str) -> float:
    try:
        v = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PlanInputError(f"{where}: {text!r} is not a number of requests") from None
    if not math.isfinite(v) or v < 0:
        raise PlanInputError(f"{where}: {v!r} requests; a minute's Sum of Invocations is a finite count >= 0")
    return v


def _pairs(text: str) -> list[tuple[datetime, float]]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise PlanInputError(f"the export is not valid JSON ({err.msg} at line {err.lineno})") from None
        if isinstance(doc.get("MetricDataResults"), list) and doc["MetricDataResults"]:
            r = doc["MetricDataResults"][0]
            ts, vs = r.get("Timestamps") or [], r.get("Values") or []
            if len(ts) != len(vs):
                raise PlanInputError("MetricDataResults[0]: Timestamps and Values differ in length")
            return [(_when(str(t), f"Timestamps[{i}]"), _value(v, f"Values[{i}]")) for i, (t, v) in enumerate(zip(ts, vs, strict=True))]
        if isinstance(doc.get("Datapoints"), list):
            return [(_when(str(d.get("Timestamp")), f"Datapoints[{i}].Timestamp"), _value(d.get("Sum"), f"Datapoints[{i}].Sum"))
                    for i, d in enumerate(doc["Datapoints"])]
        raise PlanInputError("the JSON has neither MetricDataResults (get-metric-data) nor Datapoints (get-metric-statistics)")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise PlanInputError("the export is empty")
    head = [h.strip().lower() for h in rows[0]]
    t_col = next((head.index(c) for c in TIME_COLUMNS if c in head), None)
    v_col = next((head.index(c) for c in VALUE_COLUMNS if c in head), None)
    if t_col is None or v_col is None:
        raise PlanInputError(f"the CSV header {rows[0]} names no time column ({', '.join(TIME_COLUMNS)}) and value column "
                             f"({', '.join(VALUE_COLUMNS)}); export the metric with Timestamp,Value")
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) <= max(t_col, v_col):
            raise PlanInputError(f"line {n}: {len(row)} columns; the header has {len(head)}")
        out.append((_when(row[t_col], f"line {n}"), _value(row[v_col], f"line {n}")))
    return out


def invocations_per_second(text: str) -> tuple[datetime, np.ndarray]:
    """(the first minute, arrivals per second): each minute's Sum spread evenly over its 60 seconds."""
    pairs = sorted(_pairs(text))
    if len(pairs) < 2:
        raise PlanInputError("the export has fewer than two minutes of Invocations")
    start = pairs[0][0]
    minutes: dict[int, float] = {}
    for t, v in pairs:
        offset = (t - start).total_seconds()
        if offset % 60:
            raise PlanInputError(f"{t.isoformat()} is not a whole minute after {start.isoformat()}: export with period 60")
        m = int(offset // 60)
        if m in minutes:
            raise PlanInputError(f"{t.isoformat()} appears twice in the export")
        minutes[m] = v
    count = max(minutes) + 1
    if count > MAX_MINUTES:
        raise PlanInputError(f"the export spans {count / 1440:.0f} days; at most {MAX_MINUTES // 1440} of minutes are read")
    per_min = np.zeros(count)
    for m, v in minutes.items():
        per_min[m] = v
    return start, np.repeat(per_min / 60.0, 60)
