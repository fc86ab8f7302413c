"""``bench tune``'s evaluations: the plan of a knob setting, its simulated days (cached, batched through a
map the caller gives) and the floor's hours of each day (docs/design.md §10.10). Pure: traces come in
as arrays, no I/O, no clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from speech.errors import SimulationInputError, SpeechError
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.fleet import Summary
from speech.sim.hotload import CopyFleet
from speech.sim.instance import InstanceModel
from speech.sim.knobs import (
    AVERAGE_FORECAST_QUANTILES,
    DEFAULT_HEADROOM_QUANTILE,
    Candidate,
    Knobs,
    Mapper,
    floor_day_hours,
    simulate_day,
)
from speech.sim.names import PROMISE_MISS_CHANCE
from speech.sim.scaler import ScalingNumbers, scaling_numbers


class Evaluator:
    """Evaluates knobs on days of traffic (cached) with the simulator's plan policy: the plan of each
    knob setting, the simulated days, the floor's hours. :class:`speech.sim.tune.Tuner` searches with it."""

    def __init__(self, qmax: QmaxArtifact, ttotal: TtotalArtifact, seed_inputs: PlanInputs, model: InstanceModel,
                 slo_share: float, on_eval: Callable[[], None] | None = None,
                 schedule_rate: np.ndarray | None = None, miss_chance: float = PROMISE_MISS_CHANCE,
                 map_fn: Mapper = map, width: int = 1, forecast_history: np.ndarray | None = None,
                 forecast_model: str = "auto", copy_fleet: CopyFleet | None = None, forecast_season_days: int = 1) -> None:
        self.qmax, self.ttotal, self.inputs, self.model, self.slo_share = qmax, ttotal, seed_inputs, model, slo_share
        self.forecast_history = forecast_history
        """Per-second arrivals of the days before the judged ones, ending at 00:00 (forecast floors are
        learned from it); None: the forecast knob is not tried."""
        self.forecast_model = forecast_model
        self.forecast_season_days = forecast_season_days
        """The forecast's season: 1 (daily floors), or 7 (a weekly forecast a week ahead, floors per
        weekday; the history starts on a Monday 00:00 and the judged weeks after it)."""
        self.copy_fleet = copy_fleet
        """Where the hot-load knob's copies go (speech.sim.hotload.tuner_copy_fleet: several copies per
        instance, T_copy); None: the knob is not tried (a plain variant, or one copy per instance)."""
        self._forecasts: dict[float, Any] = {}
        self.train_days: list[np.ndarray] = []
        self._headrooms: list[float] = []
        self.miss_chance = miss_chance
        """The chance the share bound leaves that any of PROMISE_UNSEEN_DRAWS unseen draws falls below it."""
        self.schedule_rate = schedule_rate
        """Per-second mean of the training draws (the trace starts at 00:00): what scheduled floors are
        learned from; None: none are tried."""
        self.seed_plan = build_plan(qmax, ttotal, seed_inputs, allow_config_mismatch=True)
        self.seed_numbers = scaling_numbers(self.seed_plan)
        self._plans: dict[Knobs, PlanArtifact | None] = {}
        self._cache: dict[tuple, Summary] = {}
        self._floor: dict[int, float] = {}
        self.on_eval = on_eval or (lambda: None)
        self.map_fn = map_fn
        """How batches of days are run (:meth:`prefetch`): ``map``, or a process pool's."""
        self.width = width
        """Runs ``map_fn`` makes side by side (its workers). Above 1, a challenger's next ``width``
        draws are run together (:meth:`_judge`): no later in wall time than one by one, though the
        challenger may stop before it reads them all."""
        self.simulated = 0
        """Days simulated, those run ahead and never read included (``evaluations`` counts the read)."""
        self._read: set[tuple] = set()
        self.evaluations = 0
        self.skipped: list[str] = []
        self.train_peak_rps: float | None = None
        """Busiest minute over the training draws (set by :meth:`search`): what the fixed-peak floor
        among the ``min_instances`` candidates is sized for."""

    def seed_knobs(self) -> Knobs:
        i = self.inputs
        return Knobs(surge_ratio=i.surge_ratio, target_share=i.target_share, datapoints_to_alarm=i.reaction.datapoints_to_alarm,
                     min_instances=i.min_instances, scale_in_step_share=i.scale_in_step_share,
                     scale_in_window_s=i.scale_in_window_s, scale_in_cooldown_s=i.scale_in_cooldown_s)

    def inputs_for(self, k: Knobs) -> PlanInputs | None:
        """The plan inputs of these knobs; with ``scheduled_floors``, the daily floors derived from the
        training draws for the plan of the other knobs (None when there is no ramp to schedule)."""
        base = k.inputs(self.inputs)
        if k.forecast_quantile is not None or k.busy_headroom is not None:
            if k.scheduled_floors:
                return None
            return self._with_forecast(base, k.forecast_quantile or DEFAULT_HEADROOM_QUANTILE, k.busy_headroom or 1.0)
        if not k.scheduled_floors:
            return base
        if self.schedule_rate is None:
            return None
        from speech.plan.schedule import derive_schedule

        plan = build_plan(self.qmax, self.ttotal, base, allow_config_mismatch=True)
        schedule = derive_schedule(self.schedule_rate.tolist(), per_instance_rps=plan.capacity.per_instance_rps
                                   or plan.capacity.throughput_at_target_rps, lead_s=plan.t_total.planning_s,
                                   floor=plan.fleet.min_instances, max_instances=plan.fleet.max_instances)
        return None if schedule is None else base.model_copy(update={"schedule": schedule})

    def forecast(self, quantile: float) -> Any:
        """The forecast of the day after :attr:`forecast_history` at ``quantile`` (speech.plan.forecast.Forecast), cached."""
        if quantile not in self._forecasts:
            from speech.plan.forecast import forecast_rates

            assert self.forecast_history is not None
            days = self.forecast_season_days
            # every quantile the search may ask for, from one set of model fits (speech.plan.forecast.forecast_rates)
            wanted = sorted({quantile, DEFAULT_HEADROOM_QUANTILE, *AVERAGE_FORECAST_QUANTILES}
                            - set(self._forecasts))
            self._forecasts.update(forecast_rates(self.forecast_history, model=self.forecast_model, quantiles=wanted,
                                                  season_days=days, horizon_min=days * 1440))
        return self._forecasts[quantile]

    def _with_forecast(self, base: PlanInputs, quantile: float, headroom: float = 1.0) -> PlanInputs | None:
        """``base`` with floors from the forecast at ``quantile`` (``headroom`` x more in its busy
        hours), sized for the plan of ``base`` (None: no history, or no minute needs more than the
        plan's floor)."""
        if self.forecast_history is None:
            return None
        from speech.plan.forecast import forecast_schedule, headroom_peak_rps

        if headroom > 1.0:
            # the cap (max_instances, from peak_rps) must hold the headroom at the busiest minute: a
            # cap at the seed's peak clips the floors exactly where a crowd costs the most (two-peak:
            # 374 instances, for 6,377 requests/s, under crowds of 7,500 on the 10:00 peak)
            base = base.model_copy(update={"peak_rps": max(base.peak_rps, headroom_peak_rps(self.forecast(quantile), headroom))})
        plan = build_plan(self.qmax, self.ttotal, base, allow_config_mismatch=True)
        per = plan.capacity.per_instance_rps or plan.capacity.throughput_at_target_rps
        schedule = forecast_schedule(self.forecast(quantile), per_instance_rps=per, lead_s=plan.t_total.planning_s,
                                     floor=plan.fleet.min_instances, max_instances=plan.fleet.max_instances,
                                     headroom=headroom)
        return None if schedule is None else base.model_copy(update={"schedule": schedule})

    def plan_for(self, k: Knobs) -> PlanArtifact | None:
        """The plan of these inputs, None when one is outside its bound (the plan refuses it) or there
        are no floors to schedule."""
        if k not in self._plans:
            if k.hot_load_headroom_copies is not None and self.copy_fleet is None:
                self.skipped.append(f"{k}: hot loading needs a copy fleet of several copies per instance")
                self._plans[k] = None
                return None
            try:
                inputs = self.inputs_for(k)
                self._plans[k] = None if inputs is None else build_plan(self.qmax, self.ttotal, inputs,
                                                                        allow_config_mismatch=True)
            except (SpeechError, ValueError) as err:
                self.skipped.append(f"{k}: {err}")
                self._plans[k] = None
        return self._plans[k]

    def numbers_for(self, k: Knobs) -> ScalingNumbers:
        """The scaling numbers of these knobs' plan, with the simulator's emergency step when
        ``k.jump_ratio`` is set (not a plan input: nothing deploys it yet)."""
        plan = self.plan_for(k)
        if plan is None:
            raise SimulationInputError(f"knobs outside their bounds: {k}")
        numbers = scaling_numbers(plan)
        if k.jump_ratio is None:
            return numbers
        return replace(numbers, jump_ratio=k.jump_ratio, jump_window_s=k.jump_window_s)

    def task(self, k: Knobs, arrivals: np.ndarray) -> tuple:
        """What :func:`simulate_day` runs for ``k`` on ``arrivals``: with the hot-load knob, the copy
        fleet with its headroom as the fifth item."""
        head = (self.model, self.numbers_for(k), self.inputs.slo_ms, arrivals)
        if k.hot_load_headroom_copies is None:
            return head
        assert self.copy_fleet is not None  # plan_for refuses the knob without one
        return (*head, replace(self.copy_fleet, headroom_copies=k.hot_load_headroom_copies))

    def run(self, k: Knobs, day_id: int, arrivals: np.ndarray) -> Summary:
        key = (k, day_id)
        if key not in self._cache:
            self._cache[key] = simulate_day(self.task(k, arrivals))
            self.simulated += 1
        if key not in self._read:
            self._read.add(key)
            self.evaluations += 1
            self.on_eval()
        return self._cache[key]

    def prefetch(self, wanted: Iterable[tuple[Knobs, tuple[int, np.ndarray]]]) -> None:
        """Simulate at once, through :attr:`map_fn`, the (knobs, day) runs not yet cached, skipping
        knobs the plan refuses; :meth:`run` then finds them. Callers ask only for runs the search
        reads next, so with ``map`` this costs what running them in turn would."""
        todo: dict[tuple, tuple] = {}
        for k, (day_id, arrivals) in wanted:
            key = (k, day_id)
            if key not in self._cache and key not in todo and self.plan_for(k) is not None:
                todo[key] = self.task(k, arrivals)
        if len(todo) > 1:  # one run is no faster elsewhere
            self._cache.update(zip(todo, self.map_fn(simulate_day, list(todo.values())), strict=True))
            self.simulated += len(todo)

    def floor_hours(self, day_id: int, arrivals: np.ndarray) -> float:
        """The floor's instance-hours on this day (its schedule's billed hours: no simulation needed)."""
        if day_id not in self._floor:
            self._floor[day_id] = floor_day_hours((self.model, arrivals, self.inputs.slo_ms, self.slo_share))
        return self._floor[day_id]

    def prefetch_floors(self, days: Sequence[tuple[int, np.ndarray]]) -> None:
        """:meth:`floor_hours` of every day not yet known, at once through :attr:`map_fn`."""
        todo = {i: a for i, a in days if i not in self._floor}
        if len(todo) > 1:
            hours = self.map_fn(floor_day_hours, [(self.model, a, self.inputs.slo_ms, self.slo_share) for a in todo.values()])
            self._floor.update(zip(todo, hours, strict=True))

    def floors_of(self, days: Sequence[tuple[int, np.ndarray]]) -> DayFloors:
        """The floor's hours of ``days``, computed when first read (:class:`DayFloors`)."""
        return DayFloors(self, days)

    def ensure_floors(self, *candidates: Candidate) -> None:
        """Every floor the candidates' :attr:`Candidate.x_floor` will read, at once through
        :attr:`map_fn` (call it while that map can still run: a process pool is closed after the search)."""
        self.prefetch_floors([d for c in candidates if isinstance(c.floor_hours, DayFloors) for d in c.floor_hours.days])

    def candidate(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]]) -> Candidate | None:
        if self.plan_for(k) is None:
            return None
        self.prefetch((k, d) for d in days)
        return Candidate(k, [self.run(k, i, a) for i, a in days], self.floors_of(days), self.miss_chance)


class DayFloors(Sequence[float]):
    """The floor's instance-hours of each of ``days`` (:meth:`Evaluator.floor_hours`), computed at the
    first read (or before, side by side, by :meth:`Evaluator.ensure_floors`).

    Why lazy: a floor costs more than a simulated day (a day's Lagrangian over per-minute counts,
    judged by the fluid step: 1-3 s against 0.2-0.4 s), and only a candidate's ``x_floor`` reads
    it, which the search never does. ``bench tune`` reads it for the seed and the winner; the
    crowd check's fifteen moved draws (speech.sim.crowd_check) need a floor only when their
    candidate is the one kept. The numbers are those computed eagerly before: the same function
    of the same (model, arrivals, SLO, share)."""

    def __init__(self, evaluator: Evaluator, days: Sequence[tuple[int, np.ndarray]]) -> None:
        self.days = list(days)
        self._evaluator = evaluator
        self._hours: list[float] | None = None

    def _known(self) -> list[float]:
        if self._hours is None:  # in this process (the map may be a pool closed since): Evaluator.ensure_floors batches them
            self._hours = [self._evaluator.floor_hours(i, a) for i, a in self.days]
        return self._hours

    def __len__(self) -> int:
        return len(self.days)

    def __getitem__(self, i):  # an index or a slice, as the list it stands for
        return self._known()[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as the list it replaces

    def __repr__(self) -> str:
        return f"DayFloors({self._hours if self._hours is not None else f'{len(self.days)} days, not yet computed'})"
