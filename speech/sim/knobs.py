"""``bench tune``'s search space: the knobs (plan inputs) it changes, a candidate's evidence on the
training draws, the unit of simulated work, and how a tuned knob is described (docs/design.md §10.10).
Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from speech.schema.config import PlanInputs, ReactionPolicy
from speech.sim.fleet import Summary, run_policy, summarize
from speech.sim.floor import floor_schedule
from speech.sim.hotload import CopyFleet, hot_load_day
from speech.sim.instance import InstanceModel
from speech.sim.names import PROMISE_MISS_CHANCE
from speech.sim.policies import AwsPolicy
from speech.sim.promise import ShareBound, unseen_share_bound
from speech.sim.scaler import ScalingNumbers

KNOBS = ("surge_ratio", "target_share", "datapoints_to_alarm", "min_instances", "scale_in_step_share",
         "scale_in_window_s", "scale_in_cooldown_s", "scheduled_floors", "forecast_quantile", "busy_headroom",
         "surge_average_share")
"""The plan inputs the search changes (speech.schema.config.PlanInputs; None: the seed formula).
``scheduled_floors``: daily floors derived (speech.plan.schedule.derive_schedule) from the
training draws' mean traffic only, tried on and off. ``forecast_quantile``: floors from a seasonal
forecast of the history before the judged days (speech.plan.forecast), sized for that upper quantile;
off (None) or one of :data:`FORECAST_QUANTILES`. ``surge_average_share``: the surge alarm on the
Average of ConcurrentRequestsPerModel at that share of Q_max, target tracking inert (off or one of
:data:`SURGE_AVERAGE_SHARES`). The scale-out cooldown stays as the team set it.
``Knobs.jump_ratio`` (the simulator's emergency step) is not searched: no plan input deploys it, and
a tuned plan must deploy what its promise simulated; benchmarks/plan_cost.py measures it beside the
tuned plan."""
FORECAST_QUANTILES = (0.5, 0.75, 0.9)
"""The forecast's upper quantiles the tuner tries as floors: a floor is a minimum the reactive
policy builds on, so a lower quantile can be cheaper and still keep the share."""
LOW_FORECAST_QUANTILES = (0.1, 0.25)
"""Quantiles below the median the tuner tries as floors under the surge on the Average only
(with ``surge_average_share`` set, and in :meth:`speech.sim.tune.Tuner.average_moves`): floors a
few percent under the forecast, the Average surge adding what they miss when the traffic
outgrows them. On week:peak=5000 the median's floors bought about 0.2 points of share for 7 % of
the floor where about 0.1 was needed: at 0.1 the training bound kept 99.54-99.57 % at 1.07x the
floor (benchmarks/week_candidates.py; docs/plan-cost.md, the week's third run). Not offered under
target tracking on the Maximum: not measured there (that layer fires at any floor sized at the
SLO rate, docs/plan-cost.md "Why the Maximum buys capacity the traffic does not need")."""
AVERAGE_FORECAST_QUANTILES = (*FORECAST_QUANTILES, *LOW_FORECAST_QUANTILES)
"""Every quantile a forecast floor may take under the surge on the Average, the low ones last (so a
tie keeps the higher floors): the tuner's choices there, and what one forecast fit serves."""
SURGE_AVERAGE_SHARES = (0.45, 0.5, 0.55)
"""The Average surge thresholds (x Q_max) the tuner tries. At the floor the instances' Average
stays at 0.2-0.5 x Q_max while some instance refuses in almost every period (diurnal:peak=5000,
docs/plan-cost.md); a day the floors undershoot lifts it past these."""
HEADROOMS = (1.15, 1.3)
MAX_HEADROOM = 2.0
"""Scheduled headroom over the forecast floors in the busy hours the tuner tries, besides the
largest crowd the training draws show (:func:`speech.plan.forecast.crowd_ratio`)."""
DEFAULT_HEADROOM_QUANTILE = 0.9
"""The forecast quantile headroom is laid over when the forecast knob itself is off."""
HOT_LOAD_KNOBS = ("hot_load_headroom_copies",)
"""Knobs the search tries only with a copy fleet (``hosting: components`` where several copies fit
an instance: speech.sim.hotload.tuner_copy_fleet): scale-out into spare room first. Not plan
inputs: simulated, not deployable (docs/design.md §10.10): the component stack deploys the copy
plan's own scaling (speech.plan.copies), which states none of the tuned scale-in knobs nor spare
room kept for the next surge, so a tuned plan cannot deploy what a promise with it simulated."""


Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]]
"""The builtin ``map``'s shape (and ``Executor.map``'s): a function applied to each item, results in
the items' order."""


def simulate_day(task: tuple[InstanceModel, ScalingNumbers, float, np.ndarray]
                 | tuple[InstanceModel, ScalingNumbers, float, np.ndarray, CopyFleet]) -> Summary:
    """One day of ``arrivals`` under the plan policy of ``numbers`` (model, numbers, SLO ms,
    arrivals): the unit of work the tuner counts and caches. With a fifth item, a copy fleet: the
    copies hot-loaded into it (:func:`speech.sim.hotload.hot_load_day`). Module-level, so a process
    pool can run it."""
    if len(task) == 5:
        return hot_load_day(task)
    model, numbers, slo_ms, arrivals = task
    pol = AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max)
    run = run_policy(model, arrivals, pol, warm_x_rps=numbers.x_target_rps)
    return summarize(run, model, slo_ms, numbers.planning_total_s)


def floor_day_hours(task: tuple[InstanceModel, np.ndarray, float, float]) -> float:
    """The floor's instance-hours on one day (model, arrivals, SLO ms, SLO share)."""
    model, arrivals, slo_ms, slo_share = task
    return floor_schedule(model, arrivals, slo_ms, slo_share).instance_hours


@dataclass(frozen=True)
class Knobs:
    """Plan inputs (None: the plan's seed formula). The plan validates each against its bound
    (target share <= 1 - h, step share <= 1 - C_scale_min / C_scale_max, cooldown >= max(window,
    planning T_total)); a candidate outside one is skipped."""

    surge_ratio: float
    target_share: float | None
    datapoints_to_alarm: int
    min_instances: int
    scale_in_step_share: float | None
    scale_in_window_s: int | None
    scale_in_cooldown_s: int | None
    scheduled_floors: bool = False
    """Daily scheduled floors learned from the training draws (:meth:`Tuner.inputs_for` derives them)."""
    forecast_quantile: float | None = None
    """Forecast floors at this upper quantile (:meth:`Tuner.inputs_for`); None: none."""
    busy_headroom: float | None = None
    """Forecast floors raised by this ratio in the busy hours (a scheduled surge ratio, for crowds
    nobody can place; at :data:`DEFAULT_HEADROOM_QUANTILE` when ``forecast_quantile`` is None);
    None: no headroom. The plan's cap is raised to hold it at the forecast's busiest minute
    (speech.plan.forecast.headroom_peak_rps)."""
    surge_average_share: float | None = None
    """The surge alarm on the Average at this share of Q_max, target tracking inert
    (PlanInputs.surge_average_share); None: target tracking and the surge on the Maximum."""
    jump_ratio: float | None = None
    """The simulator's emergency step (speech.sim.policies.AwsPolicy): a ``jump_window_s`` window's
    arrivals at least this many times the window before's takes the fleet at once to the new
    rate's instances; None: off. Not a plan input: nothing deploys it yet."""
    jump_window_s: int = 10
    hot_load_headroom_copies: int | None = None
    """Hot loading (speech.sim.hotload.hot_load_day): the plan's scaling decides copies, added
    copies go into spare room of running instances first (serving after T_copy), new instances
    only for the rest, and this many copies' worth of room is kept spare; None: a plain variant,
    one copy per instance. Offered only with a copy fleet (:data:`HOT_LOAD_KNOBS`)."""

    def inputs(self, base: PlanInputs) -> PlanInputs:
        return base.model_copy(update={
            "surge_ratio": self.surge_ratio, "target_share": self.target_share, "min_instances": self.min_instances,
            "reaction": ReactionPolicy(metric_period_s=base.reaction.metric_period_s, datapoints_to_alarm=self.datapoints_to_alarm),
            "scale_in_step_share": self.scale_in_step_share, "scale_in_window_s": self.scale_in_window_s,
            "scale_in_cooldown_s": self.scale_in_cooldown_s, "surge_average_share": self.surge_average_share,
        })



@dataclass
class Candidate:
    knobs: Knobs
    days: list[Summary]
    floor_hours: Sequence[float]
    """The floor's instance-hours of each day (the tuner's are computed when first read: speech.sim.evaluate.DayFloors)."""
    miss_chance: float = PROMISE_MISS_CHANCE
    """What :attr:`share_bound` allows (:func:`unseen_share_bound`); the tuner's own."""

    @property
    def hours(self) -> float:
        return float(np.mean([d.instance_hours for d in self.days]))

    @property
    def worst_share(self) -> float:
        return min(d.within_slo_share for d in self.days)

    @property
    def share(self) -> float:
        return float(np.mean([d.within_slo_share for d in self.days]))

    @property
    def share_bound(self) -> ShareBound:
        """The share predicted for a draw the tuner has not seen (:func:`unseen_share_bound`)."""
        return unseen_share_bound([d.within_slo_share for d in self.days], self.miss_chance,
                                  blocks=([d.block_requests for d in self.days], [d.block_within for d in self.days]))

    @property
    def best_share(self) -> float:
        return max(d.within_slo_share for d in self.days)

    @property
    def hours_low(self) -> float:
        return min(d.instance_hours for d in self.days)

    @property
    def hours_high(self) -> float:
        return max(d.instance_hours for d in self.days)

    @property
    def rejected(self) -> float:
        return float(np.mean([d.rejected_share for d in self.days]))

    @property
    def x_floor(self) -> float:
        return float(np.mean([d.instance_hours / o for d, o in zip(self.days, self.floor_hours, strict=True)]))


REASONS = {
    "surge_ratio": "a lower surge ratio raises the target (Q_max / surge): fewer instances for the same traffic; the "
                   "held-out and spike checks say whether the smaller headroom still absorbs the surges",
    "target_share": "the scale-out target as a share of Q_max (within the surge rule): the highest whose share bound "
                    "for an unseen draw kept the target",
    "datapoints_to_alarm": "fewer datapoints: the surge step fires sooner, so start-ups begin earlier",
    "min_instances": "a higher floor: the plan's floor let the SLO share slip at the trough or at the opening",
    "scale_in_step_share": "the share of the fleet one scale-in removes: what followed the decline at least cost",
    "scale_in_window_s": "a shorter scale-in window: the decline is seen sooner",
    "scale_in_cooldown_s": "a shorter scale-in cooldown (still at least the window and the planning T_total): more removals "
                           "per hour",
    "scheduled_floors": "daily floors learned from the training draws' traffic (speech.plan.schedule): instances in service "
                        "a planning T_total before each ramp; the checks say what they saved on days the tuner did not see",
    "busy_headroom": "forecast floors raised in the busy hours (a scheduled surge ratio, up to the largest crowd the training "
                     "draws show): capacity for crowds no forecast places, bought only while the traffic is high",
    "forecast_quantile": "floors from a seasonal forecast of the days before (speech.plan.forecast) at this upper quantile, "
                         "raised a planning T_total ahead: the reactive policy adds only what the forecast missed",
    "surge_average_share": "the surge alarm on the Average of the instances' concurrency at this share of Q_max, target "
                           "tracking left at Q_max: refusals at floors sized at the SLO rate hold the Maximum at Q_max "
                           "in almost every period, the Average rises only when the traffic outgrows the fleet",
    "hot_load_headroom_copies": "added copies go into spare room of running instances first (serving after T_copy, not "
                                "an instance start-up), with this many copies' room kept spare for the next burst; "
                                "simulated, not deployable",
}


FIXED_FLEET_REASON = ("the fixed-peak fleet ({n} instances: the training draws' busiest minute at the plan's X): every "
                      "plan with a lower floor missed the share bound or cost more, so this one holds that fleet throughout; "
                      "typical where bursts are shorter than a start-up ({startup_s:.0f} s), since instances asked for "
                      "when a burst begins serve after it ends")
"""``min_instances``'s reason when the search's floor is the fixed-peak fleet (:func:`knob_reasons`):
the generic "a higher floor" reason would send the user looking at the trough."""


def knob_reasons(seed: Knobs, best: Knobs, *, fixed_peak_instances: int | None, startup_s: float) -> dict[str, str]:
    """Why each knob the search moved away from the seed moved (:data:`REASONS`), with the floor's
    reason saying so when the search settled on the fixed-peak fleet."""
    out = {k: REASONS[k] for k in KNOBS if getattr(seed, k) != getattr(best, k)}
    if "min_instances" in out and fixed_peak_instances is not None and best.min_instances == fixed_peak_instances:
        out["min_instances"] = FIXED_FLEET_REASON.format(n=fixed_peak_instances, startup_s=startup_s)
    return out


def describe_plan(numbers: ScalingNumbers, k: Knobs) -> dict[str, str]:
    """Each knob as the plan deploys it (the seed formula's value when the input is None)."""
    pct = "1 instance" if numbers.scale_in_percent is None else f"{-numbers.scale_in_percent}% of the fleet"
    return {
        "surge_ratio": f"{k.surge_ratio:g}",
        "target_share": f"{numbers.target_value:.2f} (CloudWatch units)"
                        + ("" if k.target_share is None else f", {k.target_share:g} x Q_max"),
        "datapoints_to_alarm": str(k.datapoints_to_alarm),
        "min_instances": f"{numbers.min_instances}",
        "scale_in_step_share": pct,
        "scale_in_window_s": f"{numbers.scale_in_periods * numbers.metric_period_s} s",
        "scale_in_cooldown_s": f"{numbers.scale_in_cooldown_s} s",
        "scheduled_floors": f"{len(numbers.floors)} daily floors" if numbers.floors and k.scheduled_floors else "none",
        "forecast_quantile": (f"{k.forecast_quantile or DEFAULT_HEADROOM_QUANTILE:g} ({len(numbers.floors)} forecast floors)"
                              if k.forecast_quantile is not None or k.busy_headroom is not None else "none"),
        "busy_headroom": "none" if k.busy_headroom is None else f"x{k.busy_headroom:g} in the busy hours, cap {numbers.max_instances}",
        "surge_average_share": ("none (target tracking, surge on the Maximum)" if k.surge_average_share is None else
                                f"surge on the Average >= {numbers.saturation_threshold:g} ({k.surge_average_share:g} x Q_max), "
                                "target tracking at Q_max"),
        **({} if k.hot_load_headroom_copies is None else
           {"hot_load_headroom_copies": f"hot-load, {k.hot_load_headroom_copies} copies of headroom (simulated, not deployable)"}),
    }


def perturbations(arrivals: np.ndarray, surge_ratio: float, *, spike_arrivals: np.ndarray | None = None,
                  shift_s: int = 3600) -> dict[str, np.ndarray]:
    """The checks beyond held-out days: spikes raised by the surge ratio (``spike_arrivals`` when
    the caller could regenerate the day with taller spikes; else three seeded 5-minute windows at
    the busiest hours multiplied by the ratio) and the day shifted by ``shift_s``."""
    a = np.asarray(arrivals, dtype=float)
    if spike_arrivals is None:
        rng = np.random.default_rng(7)
        spike_arrivals = a.copy()
        hot = np.argsort(a)[-max(1, a.size // 10):]
        for start in rng.choice(hot, size=min(3, hot.size), replace=False):
            spike_arrivals[start : start + 300] *= surge_ratio
    return {f"spikes x{surge_ratio:g}": spike_arrivals, f"shifted {shift_s / 3600:.3g} h": np.roll(a, shift_s)}


