"""``bench tune``'s search: the deployable scaling parameters with the fewest instance-hours that
keep the SLO share on simulated days (docs/design.md §10.10).

Pure: traces come in as arrays (a ``day(seed)`` callable makes them), no I/O, no clock. The seed
(the plan's own formulas) is where the search starts and what every tuned value is printed next to.

* The knobs (:class:`Knobs`): the surge ratio (the target is Q_max's share the surge rule leaves),
  the scale-out alarm's datapoints, the floor, and the scale-in: its step as a share of the fleet
  (PercentChangeInCapacity with MinAdjustmentMagnitude 1), its window and its cooldown. Each has a
  safety bound (:func:`bounds`); the search never leaves them.
* Choosing: coordinate descent from the seed over each knob's candidates, twice, on the training
  days: a candidate wins when it keeps the SLO share on every training day and costs fewer mean
  instance-hours (while nothing keeps the share, the highest worst-day share wins).
* Checking: the winner and the seed on held-out days and on perturbed days (spikes raised by the
  surge ratio, the day shifted by an hour); the verdict says whether the promise held.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import MAX_SURGE_RATIO, PlanInputs, ReactionPolicy
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.fleet import Summary, run_policy, summarize
from speech.sim.instance import InstanceModel
from speech.sim.policies import AwsPolicy, OraclePolicy, ScalingNumbers, scaling_numbers

SIMULATOR_VERSION = "speech.sim 2: one capacity change at a time, Erlang-k service, SLO oracle, superposed traces"
DEPLOYABLE_NOW = ("surge_ratio", "datapoints_to_alarm", "min_instances")
"""Knobs that are plan inputs on this branch (PlanInputs.surge_ratio, reaction.datapoints_to_alarm,
min_instances: a floor above the plan's own). The scale-in knobs and a floor below the plan's
become deployable with the plan inputs of issue 23's plan half."""


@dataclass(frozen=True)
class Knobs:
    surge_ratio: float
    datapoints_to_alarm: int
    min_instances: int
    scale_in_percent: float | None
    """None: the seed's ChangeInCapacity step."""
    scale_in_periods: int
    """Datapoints (metric periods) the scale-in alarm needs, all at or below C_scale_min."""
    scale_in_cooldown_s: int


@dataclass(frozen=True)
class Bounds:
    max_scale_in_percent: float
    """100 x (1 - C_scale_min / target): removing more raises the per-instance load at the scale-in
    threshold above the target, and target tracking adds the instances back (a flap)."""
    min_scale_in_cooldown_s: int
    """The planning T_total: the next scale-in waits until the previous removal has drained and the
    metric shows the smaller fleet."""
    min_scale_in_periods: int = 3
    surge_ratio_range: tuple[float, float] = (1.0, MAX_SURGE_RATIO - 1e-6)
    datapoints_range: tuple[int, int] = (1, 5)


def bounds(numbers: ScalingNumbers) -> Bounds:
    """The safety bounds of the scale-in knobs, from the seed plan's numbers (units in the names)."""
    pct = 100.0 * (1.0 - numbers.scale_in_threshold / numbers.target_value) if numbers.target_value > 0 else 0.0
    return Bounds(max_scale_in_percent=max(0.0, math.floor(pct * 10) / 10),
                  min_scale_in_cooldown_s=int(math.ceil(numbers.planning_total_s)))


@dataclass
class Candidate:
    knobs: Knobs
    days: list[Summary]
    oracle_hours: list[float]

    @property
    def hours(self) -> float:
        return float(np.mean([d.instance_hours for d in self.days]))

    @property
    def worst_share(self) -> float:
        return min(d.within_slo_share for d in self.days)

    @property
    def rejected(self) -> float:
        return float(np.mean([d.rejected_share for d in self.days]))

    @property
    def x_oracle(self) -> float:
        return float(np.mean([d.instance_hours / o for d, o in zip(self.days, self.oracle_hours, strict=True)]))


class Tuner:
    """Evaluates knobs on days of traffic (cached) with the simulator's plan policy."""

    def __init__(self, qmax: QmaxArtifact, ttotal: TtotalArtifact, seed_inputs: PlanInputs, model: InstanceModel,
                 slo_share: float, on_eval: Callable[[], None] | None = None) -> None:
        self.qmax, self.ttotal, self.inputs, self.model, self.slo_share = qmax, ttotal, seed_inputs, model, slo_share
        self.seed_plan = build_plan(qmax, ttotal, seed_inputs, allow_config_mismatch=True)
        self.seed_numbers = scaling_numbers(self.seed_plan)
        self.bounds = bounds(self.seed_numbers)
        self._plans: dict[tuple, PlanArtifact] = {}
        self._cache: dict[tuple, Summary] = {}
        self._oracle: dict[int, float] = {}
        self.on_eval = on_eval or (lambda: None)
        self.evaluations = 0

    def seed_knobs(self) -> Knobs:
        s = self.seed_numbers
        return Knobs(surge_ratio=self.inputs.surge_ratio, datapoints_to_alarm=self.inputs.reaction.datapoints_to_alarm,
                     min_instances=s.min_instances, scale_in_percent=None, scale_in_periods=s.scale_in_periods,
                     scale_in_cooldown_s=s.scale_in_cooldown_s)

    def plan_for(self, k: Knobs) -> PlanArtifact:
        """The plan built from the deployable knobs (surge ratio, datapoints, a floor above the plan's)."""
        key = (k.surge_ratio, k.datapoints_to_alarm, max(k.min_instances, self.inputs.min_instances))
        if key not in self._plans:
            inputs = self.inputs.model_copy(update={
                "surge_ratio": k.surge_ratio,
                "reaction": ReactionPolicy(metric_period_s=self.inputs.reaction.metric_period_s,
                                           datapoints_to_alarm=k.datapoints_to_alarm),
                "min_instances": max(self.inputs.min_instances, min(k.min_instances, self.seed_numbers.min_instances)
                                     if k.min_instances < self.seed_numbers.min_instances else k.min_instances),
            })
            self._plans[key] = build_plan(self.qmax, self.ttotal, inputs, allow_config_mismatch=True)
        return self._plans[key]

    def numbers_for(self, k: Knobs) -> ScalingNumbers:
        s = scaling_numbers(self.plan_for(k))
        return replace(s, min_instances=k.min_instances, scale_in_percent=(-k.scale_in_percent if k.scale_in_percent else None),
                       scale_in_step=-1 if k.scale_in_percent else s.scale_in_step, scale_in_periods=k.scale_in_periods,
                       scale_in_cooldown_s=k.scale_in_cooldown_s)

    def run(self, k: Knobs, day_id: int, arrivals: np.ndarray) -> Summary:
        key = (k, day_id)
        if key not in self._cache:
            s = self.numbers_for(k)
            pol = AwsPolicy(s, self.model.cloudwatch_ratio, self.model.q_max)
            run = run_policy(self.model, arrivals, pol, warm_x_rps=s.x_target_rps)
            self._cache[key] = summarize(run, self.model, self.inputs.slo_ms, s.planning_total_s)
            self.evaluations += 1
            self.on_eval()
        return self._cache[key]

    def oracle_hours(self, day_id: int, arrivals: np.ndarray) -> float:
        if day_id not in self._oracle:
            run = run_policy(self.model, arrivals, OraclePolicy(self.model, arrivals, self.inputs.slo_ms, self.slo_share))
            self._oracle[day_id] = summarize(run, self.model, self.inputs.slo_ms, 0.0).instance_hours
        return self._oracle[day_id]

    def candidate(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]]) -> Candidate:
        return Candidate(k, [self.run(k, i, a) for i, a in days], [self.oracle_hours(i, a) for i, a in days])

    def better(self, a: Candidate, b: Candidate) -> bool:
        """a beats b: keeps the share where b does not, or both keep it and a is cheaper, or
        neither does and a's worst day is better."""
        ok_a, ok_b = a.worst_share >= self.slo_share, b.worst_share >= self.slo_share
        if ok_a != ok_b:
            return ok_a
        if ok_a:
            return a.hours < b.hours - 1e-9
        return a.worst_share > b.worst_share + 1e-9

    def choices(self, seed: Knobs, deployable_only: bool = False) -> dict[str, list]:
        """Each knob's candidates, inside its bounds, the seed's value first."""
        if deployable_only:
            full = self.choices(seed)
            full["min_instances"] = [seed.min_instances, seed.min_instances + max(1, seed.min_instances // 4)]
            return {k: v for k, v in full.items() if k in DEPLOYABLE_NOW}
        b, s = self.bounds, seed
        pct = [p for p in (5.0, 10.0, 20.0, 30.0) if p <= b.max_scale_in_percent] + (
            [b.max_scale_in_percent] if 0 < b.max_scale_in_percent < 30 else [])
        cool = sorted({c for c in (s.scale_in_cooldown_s, 600, 300, b.min_scale_in_cooldown_s) if c >= b.min_scale_in_cooldown_s},
                      reverse=True)
        periods = [p for p in dict.fromkeys((s.scale_in_periods, 12, 6)) if p >= b.min_scale_in_periods]
        lo, hi = b.surge_ratio_range
        surge = [r for r in dict.fromkeys((s.surge_ratio, 1.1, 1.05, 1.4)) if lo <= r <= hi]
        dps = list(dict.fromkeys((s.datapoints_to_alarm, 1, 2)))
        floors = list(dict.fromkeys((s.min_instances, max(1, s.min_instances // 2), max(1, s.min_instances * 3 // 4))))
        return {"scale_in_percent": [None, *sorted(set(pct))], "scale_in_cooldown_s": cool, "scale_in_periods": periods,
                "surge_ratio": surge, "datapoints_to_alarm": dps, "min_instances": floors}

    def search(self, days: Sequence[tuple[int, np.ndarray]], passes: int = 2,
               deployable_only: bool = False) -> tuple[Candidate, Candidate]:
        """(seed, winner) on the training ``days`` ((id, arrivals) pairs); with ``deployable_only``
        only the knobs the written plan can carry (:data:`DEPLOYABLE_NOW`, a floor not below the seed's)."""
        seed_k = self.seed_knobs()
        seed = best = self.candidate(seed_k, days)
        options = self.choices(seed_k, deployable_only)
        for _ in range(passes):
            moved = False
            for name, values in options.items():
                for v in values:
                    if getattr(best.knobs, name) == v:
                        continue
                    c = self.candidate(replace(best.knobs, **{name: v}), days)
                    if self.better(c, best):
                        best, moved = c, True
            if not moved:
                break
        return seed, best


def deployable_now(seed: Knobs, tuned: Knobs) -> dict[str, bool]:
    """Per knob: can the written plan carry the tuned value on this branch?"""
    out = {}
    for name, value in asdict(tuned).items():
        same = value == getattr(seed, name)
        out[name] = same or (name in DEPLOYABLE_NOW and not (name == "min_instances" and value < seed.min_instances))
    return out


REASONS = {
    "surge_ratio": "a lower surge ratio raises the target (Q_max / surge): fewer instances for the same traffic; the "
                   "held-out and spike checks say whether the smaller headroom still absorbs the surges",
    "datapoints_to_alarm": "fewer datapoints: the surge step fires sooner, so start-ups begin earlier",
    "min_instances": "a lower floor: the quiet hours need fewer instances than the trough formula keeps",
    "scale_in_percent": "removing a share of the fleet per scale-in follows the evening decline at its pace; one instance "
                        "per cooldown keeps the peak fleet for hours",
    "scale_in_periods": "a shorter scale-in window: the decline is seen sooner",
    "scale_in_cooldown_s": "a shorter scale-in cooldown (still at least the planning T_total): more removals per hour",
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
    return {f"spikes x{surge_ratio:g}": spike_arrivals, f"shifted {shift_s / 3600:g} h": np.roll(a, shift_s)}


def describe(k: Knobs) -> dict[str, str]:
    return {
        "surge_ratio": f"{k.surge_ratio:g}",
        "datapoints_to_alarm": str(k.datapoints_to_alarm),
        "min_instances": str(k.min_instances),
        "scale_in_percent": "1 instance" if k.scale_in_percent is None else f"{k.scale_in_percent:g}% of the fleet",
        "scale_in_periods": f"{k.scale_in_periods} x 10 s",
        "scale_in_cooldown_s": f"{k.scale_in_cooldown_s} s",
    }


def check(tuner: Tuner, knobs: Iterable[Knobs], days: Sequence[tuple[int, np.ndarray]]) -> list[Candidate]:
    return [tuner.candidate(k, days) for k in knobs]
