"""``bench tune``'s search: the deployable scaling parameters with the fewest instance-hours that
keep the SLO share on simulated days (docs/design.md §10.10).

Pure: traces come in as arrays (a ``day(seed)`` callable makes them), no I/O, no clock. The seed
(the plan's own formulas) is where the search starts and what every tuned value is printed next to.

* The knobs (:class:`Knobs`) are plan inputs (speech.schema.config.PlanInputs): the surge ratio,
  the target as a share of Q_max, the scale-out alarm's datapoints, the floor, and the scale-in
  step share, window and cooldown. The plan checks each against its safety bound and refuses what
  lies outside; the search skips those.
* Choosing: coordinate descent from the seed over each knob's candidates, twice, on independent
  draws of the traffic (``bench tune --draws``): a candidate wins when the share it predicts for
  draws it has NOT seen (:func:`unseen_share_bound`: a one-sided prediction bound from the mean and
  spread of its draws, never above their lowest) keeps the target and it costs fewer mean
  instance-hours. From an incumbent that misses the target every one-knob move is judged and the
  cheapest that keeps it taken (none: the pass climbs by the highest bound). A challenger stops being simulated at the
  first draw that shows it cannot win (:meth:`Tuner.challenge`). Where one knob at a time moves
  nothing, pairs of the moves that were cheaper but missed are tried (:meth:`Tuner.pair_moves`).
* Checking: the winner and the seed on held-out days and on perturbed days (spikes raised by the
  surge ratio, the day shifted by an hour); the verdict says whether the promise held.
* Running: every simulated day is a pure function of (instance model, scaling numbers, arrivals)
  (:func:`simulate_day`). Where the search knows it will need several, it asks for them at once
  (:meth:`Tuner.prefetch`) through the ``map_fn`` it was given: the builtin ``map`` here, a process
  pool's map at the CLI (``bench tune --jobs``). With a ``width`` above 1 it also runs a
  challenger's next draws side by side before knowing it will need them. What the search reads, and
  so every result and the evaluation count, is the same whatever the map and width.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from speech.errors import SimulationInputError, SpeechError
from speech.plan.realtime import build_plan
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.config import MAX_SURGE_RATIO, PlanInputs, ReactionPolicy
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.fleet import Summary, run_policy, summarize
from speech.sim.floor import floor_schedule
from speech.sim.instance import InstanceModel
from speech.sim.names import PROMISE_MISS_CHANCE, PROMISE_UNSEEN_DRAWS
from speech.sim.policies import AwsPolicy, fixed_peak_size
from speech.sim.scaler import ScalingNumbers, scaling_numbers
from speech.sim.traces import peak_rps

SPREAD_TEST_LEVEL = 0.05
"""When the draws' own sd is below this quantile of what n - 1 degrees of freedom give around the
block estimate (:func:`block_share_sd`), the share bound takes the block estimate instead: a one-in-
twenty low spread says the draws missed the rare costly events the blocks saw."""
MAX_PAIR_MOVES = 16
"""Two-knob moves :meth:`Tuner.search` tries at a one-knob local optimum (:meth:`Tuner.pair_moves`),
cheapest first. A pair that misses stops at its first draw below the target, so the step costs
between 16 and 16 x the draws simulated draws; it runs only where a pass moved nothing."""
SIMULATOR_VERSION = "speech.sim 3: one capacity change at a time, Erlang-k service, whole-trace floor, superposed traces"
KNOBS = ("surge_ratio", "target_share", "datapoints_to_alarm", "min_instances", "scale_in_step_share",
         "scale_in_window_s", "scale_in_cooldown_s", "scheduled_floors", "forecast_quantile", "busy_headroom")
"""The plan inputs the search changes (speech.schema.config.PlanInputs; None: the seed formula).
``scheduled_floors``: daily floors derived (speech.plan.schedule.derive_schedule) from the
training draws' mean traffic only, tried on and off. ``forecast_quantile``: floors from a seasonal
forecast of the history before the judged days (speech.plan.forecast), sized for that upper quantile;
off (None) or one of :data:`FORECAST_QUANTILES`. The scale-out cooldown stays as the team set it."""
FORECAST_QUANTILES = (0.5, 0.75, 0.9)
HEADROOMS = (1.15, 1.3)
MAX_HEADROOM = 2.0
"""Scheduled headroom over the forecast floors in the busy hours the tuner tries, besides the
largest crowd the training draws show (:func:`speech.plan.forecast.crowd_ratio`)."""
DEFAULT_HEADROOM_QUANTILE = 0.9
"""The forecast quantile headroom is laid over when the forecast knob itself is off."""
"""The forecast's upper quantiles the tuner tries as floors: a floor is a minimum the reactive
policy builds on, so a lower quantile can be cheaper and still keep the share."""


Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]]
"""The builtin ``map``'s shape (and ``Executor.map``'s): a function applied to each item, results in
the items' order."""


def simulate_day(task: tuple[InstanceModel, ScalingNumbers, float, np.ndarray]) -> Summary:
    """One day of ``arrivals`` under the plan policy of ``numbers`` (model, numbers, SLO ms,
    arrivals): the unit of work the tuner counts and caches. Module-level, so a process pool can run it."""
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
    None: no headroom."""

    def inputs(self, base: PlanInputs) -> PlanInputs:
        return base.model_copy(update={
            "surge_ratio": self.surge_ratio, "target_share": self.target_share, "min_instances": self.min_instances,
            "reaction": ReactionPolicy(metric_period_s=base.reaction.metric_period_s, datapoints_to_alarm=self.datapoints_to_alarm),
            "scale_in_step_share": self.scale_in_step_share, "scale_in_window_s": self.scale_in_window_s,
            "scale_in_cooldown_s": self.scale_in_cooldown_s,
        })


@dataclass(frozen=True)
class ShareBound:
    """A lower bound on the SLO share of a draw of the traffic the tuner has not seen (a fraction,
    0..1), with its evidence: ``mean`` and ``sd`` (sample, n - 1) of the ``n`` judged draws' shares
    and the Student-t quantile ``t`` it used (None with one draw: nothing to estimate a spread from)."""

    bound: float
    mean: float
    sd: float
    n: int
    t: float | None
    sd_draws: float = 0.0
    """The spread of the draws' shares themselves (sample sd, n - 1)."""
    sd_blocks: float = 0.0
    """The spread a draw's share has if its blocks (speech.sim.fleet.SHARE_BLOCKS) vary as they did
    across the draws (:func:`block_share_sd`); ``sd`` is this one when ``sd_draws`` is implausibly
    small beside it (:data:`SPREAD_TEST_LEVEL`), else ``sd_draws``."""


def block_share_sd(requests: Sequence[Sequence[float]], within: Sequence[Sequence[float]]) -> float:
    """The sd of a draw's share estimated block by block: ``sqrt(sum_b w_b^2 s_b^2)``, where ``s_b``
    is the sample sd (n - 1) of block b's share across the n draws and ``w_b`` its mean share of
    the requests. 0 with fewer than two draws or blocks that do not line up.

    Why: with five draws the sd of their shares rests on 4 degrees of freedom; on a day whose flash
    crowds fall at random hours, five draws can all miss the hours that cost most and show a
    quarter of the true spread (two-peak: 0.04 points from seeds 1..5, 0.15 over 30 draws). Each of
    a day's 24 blocks has its own n draws, so the blocks carry 24 x (n - 1) degrees of freedom:
    a crowd that hurt one block of one training draw counts. It assumes the blocks independent: on
    a superposed trace a burst that one draw has in one block another has in the next (the same
    copies, shifted), so the blocks co-vary negatively and this overstates the spread (azure-code:
    0.110 points against 0.069 over 40 draws; the draws' own 0.083). Hence
    :func:`unseen_share_bound` takes it only when the draws' own sd is implausibly small beside it."""
    r, w = np.asarray(requests, dtype=float), np.asarray(within, dtype=float)
    if r.ndim != 2 or r.shape != w.shape or r.shape[0] < 2 or r.shape[1] == 0:
        return 0.0
    share = np.where(r > 0, w / np.where(r > 0, r, 1.0), 1.0)
    weight = r.mean(axis=0)
    if weight.sum() <= 0:
        return 0.0
    weight = weight / weight.sum()
    return float(math.sqrt(float(np.sum(weight ** 2 * share.var(axis=0, ddof=1)))))


def unseen_share_bound(shares: Sequence[float], miss_chance: float = PROMISE_MISS_CHANCE,
                       unseen_draws: int = PROMISE_UNSEEN_DRAWS,
                       blocks: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]] | None = None) -> ShareBound:
    """The share a further draw is predicted to keep: ``min(lowest, mean - t_{q, n-1} * sd *
    sqrt(1 + 1/n))`` over the ``n`` draws' SLO shares (fractions), with q = 1 - miss_chance /
    unseen_draws. ``sd``: the shares' own sample sd; given ``blocks`` (each draw's requests and
    in-SLO requests per block, speech.sim.fleet.Summary), the sd estimated block by block
    (:func:`block_share_sd`) instead when the shares' is below the :data:`SPREAD_TEST_LEVEL`
    quantile of s / sigma around it (n = 5: under 0.42 of it).

    Why: the lowest of n draws is a poor promise for the next ones. Of n + m exchangeable draws the
    lowest is equally likely to be any of them, so with n = m = 5 "lowest training draw >= target"
    leaves even odds that an unseen draw lands below it. If the draws' shares are independent and
    normal, mean - t_{q, n-1} * sd * sqrt(1 + 1/n) is a one-sided 100q % prediction bound for ONE
    new draw (the sqrt(1 + 1/n) adds the mean's own uncertainty to the new draw's spread); with q =
    1 - miss_chance / unseen_draws, Bonferroni bounds the chance that ANY of ``unseen_draws`` new
    draws falls below it by ``miss_chance``. Shares near 1 are bounded and skewed toward misses
    (bursts), so the normal model is approximate; taking the min with the lowest draw keeps the rule
    never laxer than the old one. A larger ``miss_chance`` is cheaper and promises less: the
    default (:data:`PROMISE_MISS_CHANCE` over :data:`PROMISE_UNSEEN_DRAWS` draws: 10 % over five, q =
    0.98, t = 3.00 with five draws) is the trade-off docs/design.md §10.10 states. One
    draw: no spread to estimate, the bound is that draw's share."""
    if not shares:
        raise SimulationInputError("no draws to bound the share from")
    if not 0.0 < miss_chance < 1.0 or unseen_draws < 1:
        raise SimulationInputError(f"miss chance {miss_chance:g} must be in (0, 1) and unseen draws {unseen_draws} at least 1")
    x = np.asarray(shares, dtype=float)
    n, mean, low = int(x.size), float(x.mean()), float(x.min())
    if n == 1:
        return ShareBound(bound=low, mean=mean, sd=0.0, n=1, t=None)
    # scipy.stats costs about a second to import: here, so `bench tune --help` does not pay it.
    from scipy.stats import chi2
    from scipy.stats import t as student_t

    sd_draws = float(x.std(ddof=1))
    sd_blocks = block_share_sd(*blocks) if blocks is not None else 0.0
    # the draws' own spread, unless it is implausibly small beside the blocks' (below the
    # SPREAD_TEST_LEVEL quantile of s / sigma with n - 1 degrees of freedom): the draws then missed
    # what the blocks saw
    implausible = sd_draws < math.sqrt(float(chi2.ppf(SPREAD_TEST_LEVEL, n - 1)) / (n - 1)) * sd_blocks
    sd = sd_blocks if implausible else sd_draws
    t = float(student_t.ppf(1.0 - miss_chance / unseen_draws, n - 1))
    return ShareBound(bound=min(low, mean - t * sd * math.sqrt(1.0 + 1.0 / n)), mean=mean, sd=sd, n=n, t=t,
                      sd_draws=sd_draws, sd_blocks=sd_blocks)


@dataclass
class Candidate:
    knobs: Knobs
    days: list[Summary]
    floor_hours: list[float]
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


class Tuner:
    """Evaluates knobs on days of traffic (cached) with the simulator's plan policy."""

    def __init__(self, qmax: QmaxArtifact, ttotal: TtotalArtifact, seed_inputs: PlanInputs, model: InstanceModel,
                 slo_share: float, on_eval: Callable[[], None] | None = None,
                 schedule_rate: np.ndarray | None = None, miss_chance: float = PROMISE_MISS_CHANCE,
                 map_fn: Mapper = map, width: int = 1, forecast_history: np.ndarray | None = None,
                 forecast_model: str = "auto") -> None:
        self.qmax, self.ttotal, self.inputs, self.model, self.slo_share = qmax, ttotal, seed_inputs, model, slo_share
        self.forecast_history = forecast_history
        """Per-second arrivals of the days before the judged ones, ending at 00:00 (forecast floors are
        learned from it); None: the forecast knob is not tried."""
        self.forecast_model = forecast_model
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
            from speech.plan.forecast import forecast_rate

            assert self.forecast_history is not None
            self._forecasts[quantile] = forecast_rate(self.forecast_history, model=self.forecast_model, quantile=quantile)
        return self._forecasts[quantile]

    def _with_forecast(self, base: PlanInputs, quantile: float, headroom: float = 1.0) -> PlanInputs | None:
        """``base`` with floors from the forecast at ``quantile`` (``headroom`` x more in its busy
        hours), sized for the plan of ``base`` (None: no history, or no minute needs more than the
        plan's floor)."""
        if self.forecast_history is None:
            return None
        from speech.plan.forecast import forecast_schedule

        plan = build_plan(self.qmax, self.ttotal, base, allow_config_mismatch=True)
        per = plan.capacity.per_instance_rps or plan.capacity.throughput_at_target_rps
        schedule = forecast_schedule(self.forecast(quantile), per_instance_rps=per, lead_s=plan.t_total.planning_s,
                                     floor=plan.fleet.min_instances, max_instances=plan.fleet.max_instances,
                                     headroom=headroom)
        return None if schedule is None else base.model_copy(update={"schedule": schedule})

    def headrooms(self) -> list[float]:
        """The busy-hour headroom candidates: :data:`HEADROOMS` and the largest crowd the training
        draws show over the forecast (rounded up to 0.05), at most :data:`MAX_HEADROOM`."""
        if self.forecast_history is None or not self.train_days:
            return []
        from speech.plan.forecast import crowd_ratio

        crowd = crowd_ratio(self.forecast(DEFAULT_HEADROOM_QUANTILE), self.train_days)
        top = min(MAX_HEADROOM, math.ceil(crowd * 20 - EPS) / 20)
        return sorted({h for h in (*HEADROOMS, top) if 1.0 < h <= max(top, HEADROOMS[0])})

    def plan_for(self, k: Knobs) -> PlanArtifact | None:
        """The plan of these inputs, None when one is outside its bound (the plan refuses it) or there
        are no floors to schedule."""
        if k not in self._plans:
            try:
                inputs = self.inputs_for(k)
                self._plans[k] = None if inputs is None else build_plan(self.qmax, self.ttotal, inputs,
                                                                        allow_config_mismatch=True)
            except (SpeechError, ValueError) as err:
                self.skipped.append(f"{k}: {err}")
                self._plans[k] = None
        return self._plans[k]

    def numbers_for(self, k: Knobs) -> ScalingNumbers:
        plan = self.plan_for(k)
        if plan is None:
            raise SimulationInputError(f"knobs outside their bounds: {k}")
        return scaling_numbers(plan)

    def run(self, k: Knobs, day_id: int, arrivals: np.ndarray) -> Summary:
        key = (k, day_id)
        if key not in self._cache:
            self._cache[key] = simulate_day((self.model, self.numbers_for(k), self.inputs.slo_ms, arrivals))
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
        todo: dict[tuple, tuple[InstanceModel, ScalingNumbers, float, np.ndarray]] = {}
        for k, (day_id, arrivals) in wanted:
            key = (k, day_id)
            if key not in self._cache and key not in todo and self.plan_for(k) is not None:
                todo[key] = (self.model, self.numbers_for(k), self.inputs.slo_ms, arrivals)
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

    def candidate(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]]) -> Candidate | None:
        if self.plan_for(k) is None:
            return None
        self.prefetch((k, d) for d in days)
        self.prefetch_floors(days)
        return Candidate(k, [self.run(k, i, a) for i, a in days], [self.floor_hours(i, a) for i, a in days], self.miss_chance)

    def challenge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]], incumbent: Candidate) -> Candidate | None:
        """``k`` judged on ``days`` against ``incumbent``, or None as soon as it cannot beat it: while
        the incumbent's share bound keeps the target, a challenger that misses it on one draw (its
        bound is at most its lowest draw), or whose instance-hours so far already reach the
        incumbent's mean, loses whatever the other draws say. Draws run in the order of the
        incumbent's lowest share first, where a miss is likeliest."""
        return self._challenge(k, days, incumbent)[0]

    def _challenge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]],
                   incumbent: Candidate) -> tuple[Candidate | None, float | None]:
        """:meth:`challenge`, and when ``k`` lost only because a draw missed the target while
        costing less so far: the mean instance-hours of the draws it ran (a near miss, what
        :meth:`pair_moves` combines); else None."""
        if self.plan_for(k) is None:
            return None, None
        feasible = incumbent.share_bound.bound >= self.slo_share
        order = sorted(range(len(days)), key=lambda j: incumbent.days[j].within_slo_share)
        return self._judge(k, days, order, incumbent.hours if feasible else math.inf, stop_on_miss=feasible)

    def _judge(self, k: Knobs, days: Sequence[tuple[int, np.ndarray]], order: Sequence[int], cap_hours: float,
               *, stop_on_miss: bool) -> tuple[Candidate | None, float | None]:
        """``k`` on ``days`` in ``order``: the candidate, or (None, None) once its instance-hours so
        far reach ``cap_hours`` (it can no longer be cheaper), or with ``stop_on_miss`` (None, the mean
        hours of the draws it ran) at its first draw below the target while it still cost less (a
        near miss; None instead of the mean when it did not)."""
        got: dict[int, Summary] = {}
        for i, j in enumerate(order):
            if self.width > 1:  # the next draws side by side: the stops below may leave some unread
                self.prefetch((k, days[jj]) for jj in order[i:i + self.width])
            got[j] = s = self.run(k, *days[j])
            if sum(x.instance_hours for x in got.values()) / len(days) >= cap_hours - EPS:
                return None, None
            if stop_on_miss and s.within_slo_share < self.slo_share:
                mean_so_far = sum(x.instance_hours for x in got.values()) / len(got)
                return None, (mean_so_far if mean_so_far < cap_hours - EPS else None)
        got_all = [got[j] for j in range(len(days))]
        return Candidate(k, got_all, [self.floor_hours(i, a) for i, a in days], self.miss_chance), None

    def _prefetch_first(self, moves: Sequence[Knobs], days: Sequence[tuple[int, np.ndarray]], at: Candidate) -> None:
        """Each move on the draw where ``at`` has its lowest share: the first each challenge runs."""
        lowest = min(range(len(days)), key=lambda j: at.days[j].within_slo_share)
        self.prefetch((k, days[lowest]) for k in moves)

    def cheapest_keeping(self, at: Candidate, days: Sequence[tuple[int, np.ndarray]]) -> Candidate:
        """From an incumbent whose share bound misses the target: the cheapest one-knob move whose
        bound keeps it, or ``at`` when none does (the pass then climbs by the highest bound, as
        before). A move stops being simulated at its first draw below the target, or once it costs
        more than a move that keeps it.

        Why not the first move that helps: on two-peak days the seed misses, and the first knob in
        :data:`KNOBS` that keeps the target (a lower surge ratio) costs a third more than a later
        one (a higher floor). First-improvement descent would settle near the expensive one."""
        order = sorted(range(len(days)), key=lambda j: at.days[j].within_slo_share)
        moves = [k for name in KNOBS for v in self.choices(at.knobs)[name]
                 if v != getattr(at.knobs, name) and self.plan_for(k := replace(at.knobs, **{name: v})) is not None]
        # screen on the draw where a miss is likeliest, then judge the cheapest there first, so the
        # first move that keeps the target caps what the rest may cost
        self.prefetch((k, days[order[0]]) for k in moves)
        first = {k: self.run(k, *days[order[0]]) for k in moves}
        live = sorted((k for k in moves if first[k].within_slo_share >= self.slo_share),
                      key=lambda k: first[k].instance_hours)
        best: Candidate | None = None
        for k in live:  # stop at a draw below the target, or once dearer than a move that keeps it
            c, _ = self._judge(k, days, order, math.inf if best is None else best.hours, stop_on_miss=True)
            if c is not None and c.share_bound.bound >= self.slo_share:
                best = c
        return best if best is not None else at

    def pair_moves(self, at: Candidate, near: Sequence[tuple[str, Any, float]],
                   limit: int = MAX_PAIR_MOVES) -> list[Knobs]:
        """Two-knob moves from ``at``: every pair of near misses (knob, value, mean instance-hours
        of the draws it ran) on different knobs, cheapest pair first, at most ``limit``.

        Why: one knob's saving can need another's safety, and the fleet's response to them is not
        additive. On azure-conv:peak=500 a floor of 21 alone and a 60 s scale-in window alone each
        cost less than the seed and miss the target; together they keep it at 1.22x the floor, where
        the seed costs 1.31x. Coordinate descent, one knob at a time, never sees that."""
        pairs = sorted(((h1 + h2, replace(at.knobs, **{n1: v1, n2: v2}))
                        for (n1, v1, h1), (n2, v2, h2) in itertools.combinations(near, 2) if n1 != n2),
                       key=lambda p: p[0])
        return [k for _, k in pairs[:limit]]

    def better(self, a: Candidate, b: Candidate) -> bool:
        """a beats b: a's share bound for unseen draws (:func:`unseen_share_bound`) keeps the target
        where b's does not, or both keep it and a is cheaper, or neither does and a's bound is higher."""
        bound_a, bound_b = a.share_bound.bound, b.share_bound.bound
        ok_a, ok_b = bound_a >= self.slo_share, bound_b >= self.slo_share
        if ok_a != ok_b:
            return ok_a
        if ok_a:
            return a.hours < b.hours - EPS
        return bound_a > bound_b + EPS

    def fixed_peak_instances(self) -> int | None:
        """The fleet bench simulate's fixed-peak policy (speech.sim.policies) keeps for the training
        draws: instances_for(their busiest minute, the seed plan's X at the target), at least the seed
        plan's floor, at most its max; None before :meth:`search` has seen the draws. As a floor it
        makes "the plan pinned where fixed-peak sits" a candidate, so the search's winner never
        costs more than a fixed fleet that keeps the share."""
        if self.train_peak_rps is None:
            return None
        return min(self.seed_numbers.max_instances, fixed_peak_size(self.seed_numbers, self.train_peak_rps))

    def choices(self, at: Knobs) -> dict[str, list]:
        """Each knob's candidates around ``at`` (the seed formula, None, always among them); the plan
        refuses the ones outside their bounds. ``min_instances``: the seed's, a quarter above the
        seed plan's, and the fixed-peak fleet (:meth:`fixed_peak_instances`)."""
        h = at.surge_ratio - 1.0
        bound = 1.0 - h
        planning = int(math.ceil(self.seed_numbers.planning_total_s))
        return {
            "surge_ratio": [r for r in dict.fromkeys((self.inputs.surge_ratio, 1.1, 1.05)) if 1.0 <= r < MAX_SURGE_RATIO],
            "target_share": [None, round(bound, 4), round(0.9 * bound, 4), round(0.8 * bound, 4)],
            "datapoints_to_alarm": list(dict.fromkeys((self.inputs.reaction.datapoints_to_alarm, 1, 2))),
            "min_instances": [m for m in dict.fromkeys((self.inputs.min_instances, self.seed_numbers.min_instances * 5 // 4 + 1,
                                                        self.fixed_peak_instances())) if m is not None],
            "scale_in_step_share": [None, 0.05, 0.1, 0.2, 0.3],
            "scale_in_window_s": [None, 60, 120],
            "scale_in_cooldown_s": [None, 600, planning],
            "scheduled_floors": [False, True] if self.schedule_rate is not None else [False],
            "forecast_quantile": [None, *FORECAST_QUANTILES] if self.forecast_history is not None else [None],
            "busy_headroom": [None, *self._headrooms] if self.forecast_history is not None else [None],
        }

    def see_training(self, days: Sequence[tuple[int, np.ndarray]]) -> None:
        """Record what the choices read from the training draws (their busiest minute, for the
        fixed-peak floor); :meth:`search` calls it, a caller sizing a progress bar may call it first."""
        self.train_peak_rps = max(peak_rps(a) for _, a in days) if days else None
        self.train_days = [a for _, a in days if a.size >= 86400]
        self._headrooms = self.headrooms()

    def search(self, days: Sequence[tuple[int, np.ndarray]], passes: int = 2,
               pairs: int = MAX_PAIR_MOVES) -> tuple[Candidate, Candidate]:
        """(seed, winner) on the training ``days`` ((id, arrivals) pairs): coordinate descent from
        the seed, each knob's candidates in turn. A pass that starts from an incumbent missing the
        target first takes :meth:`cheapest_keeping`; a pass that moves nothing then tries up to
        ``pairs`` two-knob moves of its near misses (:meth:`pair_moves`).

        With a forecast history the descent runs twice, without the forecast knobs and with them,
        and the better winner (:meth:`better`) is kept. Why: descent is greedy; on diurnal:peak=5000
        the cheapest first move that kept the target was forecast floors, and the descent from
        there ended at 1.29x the floor where the one without them had found 1.16x."""
        if self.forecast_history is None:
            return self._search(days, passes, pairs)
        history, self.forecast_history = self.forecast_history, None  # choices() then offer no forecast knobs
        try:
            seed, plain = self._search(days, passes, pairs)
        finally:
            self.forecast_history = history
        _, forecast = self._search(days, passes, pairs)
        return seed, (forecast if self.better(forecast, plain) else plain)

    def _search(self, days: Sequence[tuple[int, np.ndarray]], passes: int, pairs: int) -> tuple[Candidate, Candidate]:
        """One coordinate descent of :meth:`search` over the knobs :meth:`choices` offers now."""
        self.see_training(days)
        first = self.candidate(self.seed_knobs(), days)
        if first is None:
            raise SimulationInputError("the seed plan inputs are outside their bounds")
        seed = best = first
        for _ in range(passes):
            moved = False
            if best.share_bound.bound < self.slo_share:
                step = self.cheapest_keeping(best, days)
                if step is not best:
                    best, moved = step, True
            near: list[tuple[str, Any, float]] = []
            for name in KNOBS:
                moves = [replace(best.knobs, **{name: v}) for v in self.choices(best.knobs)[name]
                         if getattr(best.knobs, name) != v]
                # every move of this knob is judged on the incumbent's lowest draw first (a new
                # incumbent within the loop differs only in this knob, so the moves stay the same)
                self._prefetch_first(moves, days, best)
                for k in moves:
                    c, cheaper_miss = self._challenge(k, days, best)
                    if c is not None and self.better(c, best):
                        best, moved = c, True
                    elif cheaper_miss is not None:
                        near.append((name, getattr(k, name), cheaper_miss))
            if not moved:
                # a local optimum one knob at a time: the near misses were all judged against this
                # incumbent, so their pairs are too
                paired = self.pair_moves(best, near, pairs)
                self._prefetch_first(paired, days, best)
                for k in paired:
                    c = self.challenge(k, days, best)
                    if c is not None and self.better(c, best):
                        best, moved = c, True
            if not moved:
                break
        return seed, best


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
}


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
        "busy_headroom": "none" if k.busy_headroom is None else f"x{k.busy_headroom:g} in the busy hours",
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


