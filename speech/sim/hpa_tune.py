"""``bench tune --platform kubernetes``: the HPA's knobs with the fewest instance-hours that keep the
SLO share on simulated days, with the same promise as the plan's tuning (speech.sim.tune).

Pure: days come in as arrays, no I/O, no clock. The seed is the measured plan rendered as an HPA
(:func:`speech.sim.kube.plan_hpa_spec`); the search changes the HPA's own knobs (:class:`HpaKnobs`):

* the target, as a share of Q_max in flight per pod (the HPA acts only past 1 + tolerance of it);
* the scale-down stabilization window (the highest recommendation over it holds);
* the scale-down policy (how many pods one period may remove);
* minReplicas;
* scheduled floors, with KEDA only (minReplicas raised a planning T_total before each daily ramp,
  learned from the training draws' mean traffic by speech.plan.schedule.derive_schedule; KEDA's cron
  triggers deploy them, an autoscaling/v2 HPA cannot).

Choosing is :mod:`speech.sim.tune`'s rule: coordinate descent, twice, over each knob's candidates; a
candidate wins when its share bound for draws it has not seen (:func:`speech.sim.tune.unseen_share_bound`)
keeps the target and it costs fewer mean instance-hours; from a seed that misses, the move with
the highest bound. Scale-up stays at the API's default (+100 % or +4 pods per 15 s): it is the
fastest the controller allows, and a slower one only waits longer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.fleet import Summary, run_policy, summarize
from speech.sim.hpa import ScalingPolicy, ScalingRules
from speech.sim.instance import InstanceModel
from speech.sim.knobs import Candidate, Mapper, floor_day_hours
from speech.sim.kube import HpaSpec, Kind, KubePolicy, floors_of, plan_hpa_spec
from speech.sim.names import PROMISE_MISS_CHANCE
from speech.sim.scaler import ScalingNumbers, scaling_numbers

HPA_KNOBS = ("target_share", "scale_down_window_s", "scale_down_policy", "min_replicas", "scheduled_floors")
DOWN_POLICIES: dict[str, ScalingPolicy] = {
    "100%/15s": ScalingPolicy("Percent", 100, 15),
    "10%/60s": ScalingPolicy("Percent", 10, 60),
    "1 pod/60s": ScalingPolicy("Pods", 1, 60),
    "1 pod/300s": ScalingPolicy("Pods", 1, 300),
}
"""The scale-down policies tried (the API default first), by the name tables print."""


@dataclass(frozen=True)
class HpaKnobs:
    """One HPA to judge: every knob the search moves (the rest is the seed spec's)."""

    target_share: float
    """Target in flight per pod, as a share of Q_max."""
    scale_down_window_s: int
    scale_down_policy: str
    """A key of :data:`DOWN_POLICIES`, or "plan" (the plan's step per its cooldown)."""
    min_replicas: int
    scheduled_floors: bool = False


def simulate_hpa_day(task: tuple[InstanceModel, HpaSpec, float, float, np.ndarray]) -> Summary:
    """One day under one HPA (model, spec, SLO ms, planning T_total, arrivals): the tuner's unit of work,
    module-level so a process pool can run it."""
    model, spec, slo_ms, planning_s, arrivals = task
    pol = KubePolicy(spec, model)
    warm = None if not arrivals.size else model_rate_at(model, spec.target_per_pod)
    return summarize(run_policy(model, arrivals, pol, warm_x_rps=warm), model, slo_ms, planning_s)


def model_rate_at(model: InstanceModel, occupancy: float) -> float:
    """Completions per second of one pod at this mean occupancy (the instance model's table): what
    a fleet already running at the target serves per pod, for the warm start."""
    return float(np.interp(occupancy, model.occupancy, model.depart_rps))


@dataclass
class HpaCandidate(Candidate):
    """One HPA's draws: the plan tuner's candidate (hours, share bound, x floor read the same way)
    with the HPA's knobs."""

    knobs: HpaKnobs  # type: ignore[assignment]  # the HPA's knobs where the plan's candidate has the plan's


class HpaTuner:
    """Evaluates HPA knobs on days of traffic (cached), from the measured plan's HPA."""

    def __init__(self, plan: PlanArtifact, model: InstanceModel, slo_share: float, *, kind: Kind = "hpa",
                 schedule_rate: np.ndarray | None = None, map_fn: Mapper = map,
                 on_eval: Callable[[], None] | None = None, miss_chance: float = PROMISE_MISS_CHANCE) -> None:
        self.plan, self.model, self.slo_share, self.kind = plan, model, slo_share, kind
        self.numbers: ScalingNumbers = scaling_numbers(plan)
        self.seed_spec = plan_hpa_spec(plan, self.numbers, kind)
        self.schedule_rate, self.map_fn, self.miss_chance = schedule_rate, map_fn, miss_chance
        self.on_eval = on_eval or (lambda: None)
        self._cache: dict[tuple[HpaKnobs, int], Summary] = {}
        self._floor: dict[int, float] = {}
        self._floors_learned: tuple[tuple[int, int], ...] | None = None
        self.evaluations = 0

    def seed_knobs(self) -> HpaKnobs:
        s = self.seed_spec
        return HpaKnobs(target_share=round(s.target_per_pod / self.model.q_max, 4),
                        scale_down_window_s=s.scale_down.stabilization_window_s, scale_down_policy="plan",
                        min_replicas=s.min_replicas, scheduled_floors=bool(s.floors) and self.kind == "keda")

    def learned_floors(self) -> tuple[tuple[int, int], ...]:
        """Daily floors from the training draws' mean traffic (none without it or without a ramp)."""
        if self._floors_learned is None:
            self._floors_learned = ()
            if self.schedule_rate is not None:
                from speech.plan.schedule import derive_schedule

                schedule = derive_schedule(self.schedule_rate.tolist(), per_instance_rps=self.numbers.x_target_rps,
                                           lead_s=self.numbers.planning_total_s, floor=self.numbers.min_instances,
                                           max_instances=self.numbers.max_instances)
                if schedule is not None:
                    self._floors_learned = tuple((int(f.at[:2]) * 60 + int(f.at[3:5]), f.min_instances)
                                                 for f in schedule.floors)
        return self._floors_learned

    def spec_for(self, k: HpaKnobs) -> HpaSpec:
        """The HPA of these knobs (scale-up and the cap as the seed's)."""
        s = self.seed_spec
        policy = s.scale_down.policies if k.scale_down_policy == "plan" else (DOWN_POLICIES[k.scale_down_policy],)
        floors = (self.learned_floors() or floors_of(self.numbers)) if k.scheduled_floors else ()
        return replace(s, target_per_pod=k.target_share * self.model.q_max, min_replicas=k.min_replicas,
                       scale_down=ScalingRules(k.scale_down_window_s, policy, "Max", tolerance=s.scale_down.tolerance),
                       floors=floors)

    def _task(self, k: HpaKnobs, arrivals: np.ndarray) -> tuple[InstanceModel, HpaSpec, float, float, np.ndarray]:
        return self.model, self.spec_for(k), self.plan.inputs.slo_ms, self.numbers.planning_total_s, arrivals

    def candidate(self, k: HpaKnobs, days: Sequence[tuple[int, np.ndarray]]) -> HpaCandidate:
        todo = [(i, a) for i, a in days if (k, i) not in self._cache]
        for (i, _), s in zip(todo, self.map_fn(simulate_hpa_day, [self._task(k, a) for _, a in todo]), strict=True):
            self._cache[(k, i)] = s
            self.evaluations += 1
            self.on_eval()
        floors = [i for i, _ in days if i not in self._floor]
        if floors:
            got = self.map_fn(floor_day_hours, [(self.model, a, self.plan.inputs.slo_ms, self.slo_share)
                                                for i, a in days if i in floors])
            self._floor.update(zip(floors, got, strict=True))
        return HpaCandidate(k, [self._cache[(k, i)] for i, _ in days], [self._floor[i] for i, _ in days], self.miss_chance)

    def better(self, a: HpaCandidate, b: HpaCandidate) -> bool:
        """speech.sim.tune.Tuner.better's rule: keeping the target beats missing it, then cheaper, then a higher bound."""
        ba, bb = a.share_bound.bound, b.share_bound.bound
        ok_a, ok_b = ba >= self.slo_share, bb >= self.slo_share
        if ok_a != ok_b:
            return ok_a
        return a.hours < b.hours - EPS if ok_a else ba > bb + EPS

    def choices(self, at: HpaKnobs) -> dict[str, list]:
        seed = self.seed_knobs()
        planning = int(math.ceil(self.numbers.planning_total_s))
        return {
            "target_share": list(dict.fromkeys(round(seed.target_share * f, 4) for f in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5))),
            "scale_down_window_s": list(dict.fromkeys((seed.scale_down_window_s, 300, 600, 900, max(300, 2 * planning)))),
            "scale_down_policy": ["plan", *DOWN_POLICIES],
            "min_replicas": list(dict.fromkeys((seed.min_replicas, seed.min_replicas * 5 // 4 + 1, seed.min_replicas * 3 // 2 + 1))),
            # an autoscaling/v2 HPA cannot raise its floor on a schedule (the stack refuses floors with hpa):
            # only KEDA's cron triggers deploy them
            "scheduled_floors": [False, True] if self.kind == "keda" and (self.learned_floors() or self.numbers.floors) else [False],
        }

    def search(self, days: Sequence[tuple[int, np.ndarray]], passes: int = 2) -> tuple[HpaCandidate, HpaCandidate]:
        """(seed, winner) on the training ``days``: coordinate descent over :data:`HPA_KNOBS`."""
        if not days:
            raise SimulationInputError("no training draws to tune on")
        seed = best = self.candidate(self.seed_knobs(), days)
        for _ in range(passes):
            moved = False
            for name in HPA_KNOBS:
                for v in self.choices(best.knobs)[name]:
                    if v == getattr(best.knobs, name):
                        continue
                    c = self.candidate(replace(best.knobs, **{name: v}), days)
                    if self.better(c, best):
                        best, moved = c, True
            if not moved:
                break
        return seed, best


def describe(spec: HpaSpec, k: HpaKnobs, q_max: int) -> dict[str, str]:
    """Each knob as the HPA deploys it."""
    def policy(p: ScalingPolicy) -> str:
        unit = "%" if p.type == "Percent" else (" pod" if p.value == 1 else " pods")
        return f"{p.value}{unit} per {p.period_s} s"

    down = spec.scale_down
    tol = "" if down.tolerance is None else f", tolerance {down.tolerance:g}"
    return {
        "target_share": f"{spec.target_per_pod:.2f} in flight/pod ({k.target_share:g} x Q_max {q_max})",
        "scale_down_window_s": f"{down.stabilization_window_s} s",
        "scale_down_policy": " or ".join(policy(p) for p in down.policies) + f" ({down.select_policy}{tol})",
        "min_replicas": str(spec.min_replicas),
        "scheduled_floors": f"{len(spec.floors)} daily floors" if spec.floors else "none",
    }
