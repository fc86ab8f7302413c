"""The floor and perfect-forecast as policies the fleet simulator runs (docs/design.md §10.4): the
floor's schedule in service at once, and a clairvoyant policy under the plan's own mechanics that
knows that schedule (the module docstring of :mod:`speech.sim.floor`)."""

from __future__ import annotations

import math

import numpy as np

from speech.sim.floor import floor_schedule
from speech.sim.instance import InstanceModel
from speech.sim.peers import ScheduledPolicy
from speech.sim.scaler import Ctx, Decision, Policy


def FloorPolicy(model: InstanceModel, arrivals: np.ndarray, slo_ms: float, slo_share: float,  # noqa: N802
                name: str = "floor") -> ScheduledPolicy:
    """The floor's schedule as a policy the fleet simulator runs (in service at once, gone at once)."""
    return ScheduledPolicy(name, floor_schedule(model, arrivals, slo_ms, slo_share).per_second, name)


class PerfectForecastPolicy(Policy):
    """Clairvoyant under the plan's mechanics (module docstring): every ``tick_s`` it looks up the
    floor's schedule ``need`` (per second) and asks for

    * more: the most ``need`` holds from when a new instance would serve (now + start-up) until the
      next change could serve (one start-up more, or the Updating after a removal plus a start-up);
    * fewer: only down to the most ``need`` holds from now over the same span, so what it removes is
      not needed again before an instance asked for later could serve.

    The fleet applies start-up and refuses changes while Updating; the Scaler applies the plan's
    floor and cap."""

    name = "perfect-forecast"

    def __init__(self, need: np.ndarray, *, startup_s: float, removal_updating_s: float, tick_s: int,
                 min_instances: int, max_instances: int) -> None:
        self.need = np.maximum(1, np.asarray(need, dtype=int))
        self.tick_s = max(1, int(tick_s))
        self.lead = int(math.ceil(startup_s))
        self.span = int(math.ceil(max(startup_s, removal_updating_s))) + self.tick_s
        self.min_instances, self.max_instances = min_instances, max_instances
        # Running maxima over windows, precomputed once (the policy stays a pure lookup).
        self._ahead = _window_max(self.need, self.lead, self.span)
        self._now = _window_max(self.need, 0, self.lead + self.span)

    def initial(self) -> int:
        first = int(self._now[0]) if self.need.size else 1
        return max(self.min_instances, min(self.max_instances, first))

    def decide(self, ctx: Ctx) -> Decision:
        t = min(ctx.now, self.need.size - 1)
        want = int(self._ahead[t])
        if want > ctx.desired:
            return want, "forecast: more needed after a start-up", None
        keep = int(self._now[t])
        if keep < ctx.desired:
            return keep, "forecast: not needed again before a start-up", None
        return ctx.desired, "", None


def _window_max(need: np.ndarray, start: int, length: int) -> np.ndarray:
    """out[t] = max(need[t + start : t + start + length]) (the last value past the end)."""
    from numpy.lib.stride_tricks import sliding_window_view

    pad = np.concatenate([need, np.full(start + length, need[-1] if need.size else 1)])
    return sliding_window_view(pad, length).max(axis=1)[start : start + need.size]
