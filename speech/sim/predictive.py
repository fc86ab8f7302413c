"""``predictive``: the baseline a user of ECS or EC2 would pick, predictive scaling as AWS documents
it, with the reactive plan underneath (docs/design.md §10.11).

Application Auto Scaling's predictive scaling ("How Application Auto Scaling predictive scaling
works"): it needs at least 24 hours of the metric, analyses up to the past 14 days, forecasts the
capacity needed hourly for the next 48 hours, refreshes the forecast every 6 hours from the latest
data, and in forecast-and-scale mode raises capacity where the forecast expects more load but never
scales in on a forecast: the reactive policies remove capacity when the demand has dropped. A
scheduling buffer launches capacity ahead of the hour (here the planning T_total, the most it helps).

What AWS does not publish is its model ("an analysis of historical trends"): here the load forecast
for an hour is the mean of the same hour of day over the days available (at most 14), the capacity
``ceil(load / the per-instance rate at the plan's target)``. Pure and causal: at each refresh the
policy reads only the history given before the trace and the trace's own seconds so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from speech.schema.units import EPS
from speech.sim.scaler import Ctx, Decision, Policy

HISTORY_DAYS = 14
"""Days of the metric predictive scaling analyses, at most."""
MIN_HISTORY_S = 86400
"""Predictive scaling forecasts nothing before it has 24 hours of the metric."""
HORIZON_H = 48
REFRESH_S = 6 * 3600


def hourly_capacity(data: np.ndarray, from_hour: int, hours: int, per_instance_rps: float, floor: int,
                    max_instances: int) -> np.ndarray:
    """Instances for each of ``hours`` hours from hour ``from_hour`` of ``data`` (arrivals per
    second, hour 0 at its first second): the mean rate of the same hour of day over the (at most
    :data:`HISTORY_DAYS`) earlier days ``data`` covers in full, over ``per_instance_rps``, within
    [floor, max]; ``floor`` for an hour no earlier day covers."""
    whole = data.size // 3600
    hourly = data[: whole * 3600].reshape(whole, 3600).mean(axis=1) if whole else np.zeros(0)
    out = np.full(hours, floor, dtype=int)
    for i in range(hours):
        h = from_hour + i
        past = [hourly[h - 24 * d] for d in range(1, HISTORY_DAYS + 1) if 0 <= h - 24 * d < whole]
        if past:
            out[i] = min(max_instances, max(floor, math.ceil(float(np.mean(past)) / per_instance_rps - EPS)))
    return out


@dataclass(frozen=True)
class PredictiveState:
    inner: Any = None
    made_s: int = -1
    """When the forecast in force was made (-1: none yet)."""
    from_hour: int = 0
    capacity: tuple[int, ...] = ()


class PredictivePolicy(Policy):
    """The reactive ``inner`` policy, with capacity raised to the hourly forecast (``buffer_s``
    ahead) and never scaled in below it; forecasts from ``history`` (arrivals per second before the
    trace, ending where the trace starts) and the trace so far."""

    def __init__(self, inner: Policy, history: np.ndarray | None, *, per_instance_rps: float, buffer_s: float) -> None:
        self.inner = inner
        self.name = "predictive"
        self.tick_s = inner.tick_s
        self.min_instances, self.max_instances = inner.min_instances, inner.max_instances
        self.history = np.zeros(0) if history is None else np.asarray(history, dtype=float)
        self.per_instance_rps = per_instance_rps
        self.buffer_s = buffer_s

    def initial(self) -> int:
        return self.inner.initial()

    def _refresh(self, ctx: Ctx, st: PredictiveState) -> PredictiveState:
        data = np.concatenate([self.history, np.asarray(ctx.history.arrivals[: ctx.now], dtype=float)])
        if data.size < MIN_HISTORY_S:
            return PredictiveState(inner=st.inner, made_s=ctx.now)
        hour = data.size // 3600  # the forecast starts at the current hour
        cap = hourly_capacity(data, hour, HORIZON_H, self.per_instance_rps, self.inner.min_instances, self.inner.max_instances)
        return PredictiveState(inner=st.inner, made_s=ctx.now, from_hour=hour - self.history.size // 3600,
                               capacity=tuple(int(x) for x in cap))

    def forecast_at(self, st: PredictiveState, t_s: float) -> int:
        """The forecast capacity for the hour of ``t_s`` (seconds into the trace); 0 without one."""
        i = int(t_s // 3600) - st.from_hour
        return st.capacity[i] if st.capacity and 0 <= i < len(st.capacity) else 0

    def decide(self, ctx: Ctx) -> Decision:
        st: PredictiveState = ctx.state or PredictiveState()
        if st.made_s < 0 or ctx.now - st.made_s >= REFRESH_S:
            st = self._refresh(ctx, st)
        want, why, inner = self.inner.decide(Ctx(t=ctx.t, desired=ctx.desired, history=ctx.history, state=st.inner))
        st = PredictiveState(inner=inner, made_s=st.made_s, from_hour=st.from_hour, capacity=st.capacity)
        cap = max(self.forecast_at(st, ctx.now), self.forecast_at(st, ctx.now + self.buffer_s))
        if want < cap:  # raise to the forecast; a scale-in stops there
            return (cap, "predictive", st) if cap > ctx.desired else (ctx.desired, "", st)
        return want, why, st

    def refused(self, old: Any, new: Any) -> Any:
        old = old or PredictiveState()
        return PredictiveState(inner=self.inner.refused(old.inner, new.inner), made_s=new.made_s, from_hour=new.from_hour,
                               capacity=new.capacity)
