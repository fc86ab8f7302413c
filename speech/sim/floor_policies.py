"""The floor and perfect-forecast as policies the fleet simulator runs (docs/design.md §10.4): the
floor's schedule in service at once, and a clairvoyant policy under the plan's own mechanics that
knows that schedule (the module docstring of :mod:`speech.sim.floor`). Beside them the bound for
reactive plans, perfect detection: the present seen exactly, the future not at all (§10.12)."""

from __future__ import annotations

import math

import numpy as np

from speech.schema.units import EPS
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


class PerfectDetectionPolicy(Policy):
    """A bound for reactive plans: what a policy that cannot see ahead could do if it saw the present
    exactly. Every ``tick_s`` it knows the arrivals of the last ``rate_window_s`` seconds (no metric
    period, no alarm datapoints, no CloudWatch delay) and asks for the instances their rate needs at
    ``per_instance_rps`` (requests/s an instance serves), times ``1 + headroom``, never fewer than
    ``min_instances``; it removes only down to the most any evaluation of the last ``hold_s``
    seconds asked for. The fleet applies start-up and, on SageMaker, one change at a time. It bounds
    policies that size the fleet from the present load, as the plan's target tracking, surge and
    emergency steps do from readings that come later; not every rule a causal policy could use.

    Its state is the last ``hold_s`` seconds' asks (newest last), so ``decide`` stays pure."""

    name = "perfect-detection"

    def __init__(self, per_instance_rps: float, *, headroom: float, min_instances: int, max_instances: int = 10**9,
                 rate_window_s: int = 10, hold_s: int = 60, tick_s: int = 10) -> None:
        if per_instance_rps <= 0 or headroom <= -1.0:
            raise ValueError(f"per-instance rate {per_instance_rps} must be > 0 and headroom {headroom} > -1")
        self.per_instance_rps, self.headroom = float(per_instance_rps), float(headroom)
        self.min_instances, self.max_instances = int(min_instances), int(max_instances)
        self.rate_window_s, self.tick_s = max(1, int(rate_window_s)), max(1, int(tick_s))
        self.keep = max(1, int(math.ceil(hold_s / self.tick_s)))

    def initial(self) -> int:
        return self.min_instances

    def ask(self, ctx: Ctx) -> int:
        """Instances the last ``rate_window_s`` seconds' rate needs, with the headroom."""
        seen = ctx.window(ctx.history.arrivals, self.rate_window_s)
        rate_rps = sum(seen) / max(1, len(seen))
        return max(self.min_instances, math.ceil(rate_rps * (1.0 + self.headroom) / self.per_instance_rps - EPS))

    def decide(self, ctx: Ctx) -> Decision:
        ask = self.ask(ctx)
        asks = ((ctx.state or ()) + (ask,))[-self.keep :]
        if ask > ctx.desired:
            return ask, "detected: the present rate needs more", asks
        keep = max(asks)
        if keep < ctx.desired:
            return keep, "detected: not needed in the last hold", asks
        return ctx.desired, "", asks

    def refused(self, old, new):
        return new  # what it saw stays seen; it asks again at the next tick anyway
