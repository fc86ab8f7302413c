"""Scheduled floors for the tide: a daily schedule of minimum capacity from the user's own traffic.

Pure: an arrival-rate series in, a :class:`FloorSchedule` out (no trace files, no clock). The
series is folded onto one day, each slot's need is its busiest minute over the per-instance rate
the plan is sized at, and every slot where the need rises (a ramp) raises the floor to that need
one planning T_total before the slot starts, so the instances are in service when the ramp comes;
the slot after the ramp releases the floor to the plan's own. Releasing never removes instances
(a lower MinCapacity changes no current capacity): the fleet then follows the traffic down through
the scale-in step (docs/design.md §3.12).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from speech.errors import PlanInputError
from speech.schema.config import FloorSchedule, ScheduledFloor

DAY_S = 86400
SLOT_MINUTES = 30
"""Default slot: at most 48 entries a day."""


def minute_means(rate_rps: Sequence[float], step_s: int) -> np.ndarray:
    """Mean rate of each whole minute of the series, requests/s (a per-second peak is mostly noise)."""
    if step_s <= 0 or 60 % step_s:
        raise PlanInputError(f"series step {step_s} s must divide a minute (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)")
    per_min = 60 // step_s
    x = np.asarray(rate_rps, dtype=float)
    whole = len(x) // per_min
    if whole < 60:
        raise PlanInputError(f"the series covers {len(x) * step_s} s; a schedule needs at least an hour of traffic")
    return x[: whole * per_min].reshape(whole, per_min).mean(axis=1)


def slot_peaks(minutes: np.ndarray, start_minute: int, slot_minutes: int) -> np.ndarray:
    """Busiest minute of each slot of the day, over every day the series covers (requests/s);
    NaN for a slot the series never covers."""
    slots = 1440 // slot_minutes
    peaks = np.full(slots, np.nan)
    for i, rate in enumerate(minutes):
        k = ((start_minute + i) % 1440) // slot_minutes
        peaks[k] = rate if np.isnan(peaks[k]) else max(peaks[k], rate)
    return peaks


def slot_needs(peaks: np.ndarray, per_instance_rps: float, floor: int, max_instances: int) -> np.ndarray:
    """Instances each slot needs: ceil(busiest minute / per-instance rate), within [floor, max];
    the floor where the series has no data."""
    out = np.full(len(peaks), floor, dtype=int)
    for k, p in enumerate(peaks):
        if not np.isnan(p):
            out[k] = min(max_instances, max(floor, math.ceil(p / per_instance_rps - 1e-9)))
    return out


def _hhmm(minute: int) -> str:
    m = minute % 1440
    return f"{m // 60:02d}:{m % 60:02d}"


def derive_schedule(
    rate_rps: Sequence[float],
    *,
    per_instance_rps: float,
    lead_s: float,
    floor: int,
    max_instances: int,
    step_s: int = 1,
    start_minute: int = 0,
    slot_minutes: int = SLOT_MINUTES,
    timezone: str = "UTC",
    trace_sha256: str | None = None,
) -> FloorSchedule | None:
    """The daily floors for ``rate_rps`` (requests/s every ``step_s`` seconds, the first sample at
    ``start_minute`` of the day in ``timezone``), or None when no slot needs more than ``floor``.

    Rule: a slot whose need exceeds the previous slot's (and the floor) is a ramp: its floor is its
    need, raised ``lead_s`` (the planning T_total, rounded up to whole minutes) before it starts. The
    first slot after a ramp releases the floor to ``floor`` at its start.
    """
    if per_instance_rps <= 0:
        raise PlanInputError("the plan has no per-instance rate to size floors with (its fleet_capacity finding says why)")
    if slot_minutes <= 0 or 1440 % slot_minutes:
        raise PlanInputError(f"slot of {slot_minutes} min must divide a day (e.g. 15, 30, 60)")
    lead_min = math.ceil(lead_s / 60 - 1e-9)
    if lead_min >= slot_minutes:
        raise PlanInputError(
            f"the planning T_total {lead_s:g} s is not shorter than a {slot_minutes}-minute slot: a floor would be "
            f"raised before the previous one is released; use a longer slot (at least {lead_min + 1} minutes)"
        )
    needs = slot_needs(slot_peaks(minute_means(rate_rps, step_s), start_minute, slot_minutes),
                       per_instance_rps, floor, max_instances)
    n = len(needs)
    ramp = [needs[k] > max(needs[k - 1], floor) for k in range(n)]  # needs[-1]: the day wraps
    if not any(ramp):
        return None
    entries: dict[int, int] = {}
    for k in range(n):
        start = k * slot_minutes
        if ramp[k]:
            entries[(start - lead_min) % 1440] = int(needs[k])
        elif ramp[k - 1]:
            entries.setdefault(start % 1440, floor)
    return FloorSchedule(
        timezone=timezone,
        floors=[ScheduledFloor(at=_hhmm(m), min_instances=v) for m, v in sorted(entries.items())],
        trace_sha256=trace_sha256,
    )
