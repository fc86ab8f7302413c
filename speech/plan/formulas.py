"""The plan's formulas, each a small function named after its one job, with its rule and units in the
docstring (docs/design.md §3): thresholds, time, the scale-in step, the fleet, and one serving unit's
sizing (:func:`unit_sizing`, :func:`capacity_at`, :func:`surge_at_target`), which the instance plan
and the copy plan share."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speech.errors import PlanInputError
from speech.plan.survival import (
    arrival_for_gated_mean,
    arrival_for_mean_occupancy,
    gated_mean,
    over_slo_by_concurrency,
    reach_probability,
    service_rates,
    slo_rate,
    slo_shares,
    throughput_at,
)
from speech.schema.artifacts import QmaxArtifact
from speech.schema.config import MAX_SURGE_RATIO, PlanInputs, ReactionPolicy
from speech.schema.plan_artifacts import Capacity, ScaleIn, Surge, TTotalSummary
from speech.schema.units import EPS, UNBOUNDED

# --- thresholds --------------------------------------------------------------------------------


def headroom(surge_ratio: float) -> float:
    """h = surge_ratio - 1: the fraction of Q_max kept free to absorb a surge. Refuse h >= 0.5."""
    h = surge_ratio - 1.0
    if not 0.0 <= h < MAX_SURGE_RATIO - 1.0:
        raise PlanInputError(
            f"surge ratio {surge_ratio} is outside [1.0, {MAX_SURGE_RATIO}): at >= {MAX_SURGE_RATIO} the "
            f"scale-in threshold (1 - 2h) x Q_max would be <= 0; choose e.g. 1.25"
        )
    return h


def c_scale_max(q_max: int, h: float) -> float:
    """Scale-out target in client units: (1 - h) x Q_max requests in flight per instance."""
    return (1.0 - h) * q_max


def c_scale_min(q_max: int, h: float) -> float:
    """Scale-in threshold in client units: (1 - 2h) x Q_max requests in flight per instance."""
    return (1.0 - 2.0 * h) * q_max


def target_share_bound(h: float) -> float:
    """Highest scale-out target as a share of Q_max: 1 - h (the surge rule keeps h x Q_max free)."""
    return 1.0 - h


def tuned_c_scale_max(q_max: int, h: float, target_share: float | None) -> float:
    """Scale-out target in client units: target_share x Q_max when tuned, else the seed (1 - h) x
    Q_max. A tuned share above 1 - h would leave less than h free for a surge: refused."""
    if target_share is None:
        return c_scale_max(q_max, h)
    bound = target_share_bound(h)
    if target_share > bound + EPS:
        raise PlanInputError(
            f"target_share {target_share:g} is above 1 - h = {bound:g} (surge ratio {1 + h:g}): the target would leave "
            f"less than {h:g} x Q_max free for a surge; choose target_share <= {bound:g} or a smaller surge ratio"
        )
    return target_share * q_max


def tuned_c_scale_min(c_max: float, h: float) -> float:
    """Scale-in threshold in client units: C_scale_max x (1 - 2h) / (1 - h), the seed ratio kept for
    any target (at the seed target it is (1 - 2h) x Q_max), so the floor's safety argument holds."""
    return c_max * (1.0 - 2.0 * h) / (1.0 - h)


def w_max_s(slo_ms: float, service_p95_ms: float) -> float:
    """Queueing budget, seconds: SLO - uncontended p95 service time (<= 0 means infeasible)."""
    return (slo_ms - service_p95_ms) / 1000.0


def to_cloudwatch(client_value: float, cloudwatch_ratio: float) -> float:
    """Client in-flight -> ConcurrentRequestsPerModel units, by the measured ratio."""
    return client_value * cloudwatch_ratio


# --- time --------------------------------------------------------------------------------------


def scale_out_cooldown_s(measured_total_s: float) -> int:
    """clamp(T_total / 2, 10, 30) seconds, whole seconds: long enough for one step to show."""
    return int(min(30.0, max(10.0, measured_total_s / 2.0)))


def reaction_bound_s(metric_period_s: int, datapoints_to_alarm: int, scale_out_cooldown: int) -> float:
    """Detection delay nobody measures: metric period x datapoints to alarm + scale-out cooldown."""
    return float(metric_period_s * datapoints_to_alarm + scale_out_cooldown)


def planning_t_total(measured_total_s: float, reaction: ReactionPolicy,
                     scale_out_cooldown: int | None = None) -> TTotalSummary:
    """Planning T_total, seconds: measured scale-out + reaction bound (metric period x datapoints
    to alarm + the scale-out cooldown, seed clamp(T_measured / 2, 10, 30), or the tuned one). The one
    place it is computed: the plan, the Pulumi program, the policy pack and ``bench ttotal``'s report
    use it."""
    cooldown = scale_out_cooldown_s(measured_total_s) if scale_out_cooldown is None else scale_out_cooldown
    reaction_s = reaction_bound_s(reaction.metric_period_s, reaction.datapoints_to_alarm, cooldown)
    return TTotalSummary(
        measured_s=round(measured_total_s, 3),
        reaction_bound_s=round(reaction_s, 3),
        planning_s=round(measured_total_s + reaction_s, 3),
    )


def derated_q_max(measured_q_max: int, qmax_derate: float) -> int:
    """Q_max to plan with: floor(measured Q_max x qmax_derate), requests in flight per instance."""
    return int(math.floor(measured_q_max * qmax_derate + EPS))


def scale_in_cooldown_s(planning_total_s: float) -> int:
    """Seed: max(300, 3 x planning T_total) in whole seconds: never give back what takes T_total to get."""
    return int(max(300.0, math.floor(3.0 * planning_total_s)))


SCALE_IN_WINDOW_S = 300
"""Seed scale-in window, seconds: five minutes of low concurrency before a step."""
MIN_WINDOW_PERIODS = 3
"""A window shorter than 3 metric periods would act on one quiet datapoint."""


def scale_in_evaluation_periods(metric_period_s: int, window_s: int = SCALE_IN_WINDOW_S) -> int:
    """Periods at or below C_scale_min before a scale-in step: ceil(window / period), at least 3.
    Seed window 300 s (a sustained 5 minutes)."""
    return max(MIN_WINDOW_PERIODS, math.ceil(window_s / metric_period_s - EPS))


def scale_in_cooldown_floor_s(window_s: int, planning_total_s: float) -> int:
    """Least scale-in cooldown, seconds: max(window, ceil(planning T_total)). A step removes a share
    of the fleet; the next one must wait for a full window on the smaller fleet (else it acts on the
    old fleet's metric) and for one planning T_total (the time scale-out needs to bring back a share
    removed too early)."""
    return int(max(window_s, math.ceil(planning_total_s - EPS)))


def tuned_scale_in_cooldown_s(tuned: int | None, window_s: int, planning_total_s: float) -> int:
    """The tuned scale-in cooldown within its safety bound, else the seed max(300, 3 x planning T_total)."""
    if tuned is None:
        return max(scale_in_cooldown_s(planning_total_s), scale_in_cooldown_floor_s(window_s, planning_total_s))
    least = scale_in_cooldown_floor_s(window_s, planning_total_s)
    if tuned < least:
        raise PlanInputError(
            f"scale_in_cooldown_s {tuned} is below max(scale-in window {window_s} s, planning T_total "
            f"{planning_total_s:g} s) = {least} s: a second step would act before the first one shows, or before "
            f"scale-out could bring the removed share back; choose scale_in_cooldown_s >= {least}"
        )
    return tuned


def tuned_scale_out_cooldown_s(tuned: int | None, measured_total_s: float, metric_period_s: int) -> int:
    """The tuned scale-out cooldown within [metric period, max(30, measured T_total)], else the seed
    clamp(T_total / 2, 10, 30). Shorter than a period, the next datapoint cannot show the step yet;
    longer than T_total, the plan's reaction bound (which includes it) only grows."""
    if tuned is None:
        return scale_out_cooldown_s(measured_total_s)
    hi = int(max(30.0, math.ceil(measured_total_s)))
    if not metric_period_s <= tuned <= hi:
        raise PlanInputError(
            f"scale_out_cooldown_s {tuned} is outside [{metric_period_s}, {hi}] s (metric period .. max(30 s, measured "
            f"T_total)); choose a value in that range or leave it unset for clamp(T_total / 2, 10, 30)"
        )
    return tuned


# --- scale-in step -----------------------------------------------------------------------------


def max_safe_step_share(c_max: float, c_min: float) -> float:
    """1 - C_scale_min / C_scale_max: removing k of N at C_scale_min lifts each survivor to
    C_scale_min x N / (N - k), which stays at or below C_scale_max while k / N <= this share."""
    return 1.0 - c_min / c_max if c_max > 0 else 0.0


def seed_step_share(c_max: float, c_min: float, surge_ratio: float) -> float:
    """Seed share of one scale-in step: 1 - surge_ratio x C_scale_min / C_scale_max (at least 0), so
    survivors land at or below C_scale_max / surge_ratio and a planned surge right after the step
    still lands at or below C_scale_max. (The safe bound, :func:`max_safe_step_share`, lands them at
    C_scale_max itself: safe while the load holds, no room for it to rise.) 1/6 at surge ratio 1.25."""
    return max(0.0, 1.0 - surge_ratio * c_min / c_max) if c_max > 0 else 0.0


def scale_in_step_percent(step_share: float) -> int:
    """PercentChangeInCapacity of the step: -floor(100 x share), at most -1. Application Auto
    Scaling rounds the resulting count toward zero (1.4 -> 1), so the share removed never exceeds
    the step's; MinAdjustmentMagnitude 1 removes one where the share rounds to 0 (safe from the
    floor up: the floor is at least the min safe fleet)."""
    return -max(1, int(math.floor(100.0 * step_share + EPS)))


def scale_in(c_max: float, c_min: float, tuned_share: float | None, window_s: int, metric_period_s: int,
             surge_ratio: float) -> ScaleIn:
    """The scale-in step: the tuned share of the fleet (at most the safe bound), else the seed."""
    bound = max_safe_step_share(c_max, c_min)
    share = min(bound, seed_step_share(c_max, c_min, surge_ratio)) if tuned_share is None else tuned_share
    if share > bound + EPS:
        raise PlanInputError(
            f"scale_in_step_share {tuned_share:g} is above 1 - C_scale_min / C_scale_max = {bound:.4f}: removing that "
            f"share at C_scale_min lifts the survivors past C_scale_max {c_max:g} (a flap); choose at most {bound:.4f}"
        )
    return ScaleIn(
        step_share=round(share, 6),
        max_safe_share=round(bound, 6),
        step_percent=scale_in_step_percent(share),
        min_removed=1,
        window_s=scale_in_evaluation_periods(metric_period_s, window_s) * metric_period_s,
    )


# --- fleet -------------------------------------------------------------------------------------


def min_safe_instances(c_max: float, c_min: float) -> int:
    """Smallest N >= 2 with N / (N - 1) <= C_scale_max / C_scale_min.

    Scaling in from N at C_scale_min spreads the load over N - 1 instances; below this N the
    survivors land above C_scale_max and scale straight back out (a flap).
    """
    if c_min <= 0:
        raise PlanInputError("scale-in threshold is 0: lower the surge ratio below 1.5")
    ratio = c_max / c_min
    if ratio <= 1.0:
        return UNBOUNDED
    # N/(N-1) <= ratio  <=>  N >= ratio / (ratio - 1); a tiny epsilon keeps exact ratios exact.
    return max(2, math.ceil(ratio / (ratio - 1.0) - EPS))


def instances_for(rate_rps: float, per_instance_rps: float) -> int:
    """ceil(rate / per-instance throughput), at least 1."""
    if per_instance_rps <= 0:
        return UNBOUNDED
    return max(1, math.ceil(rate_rps / per_instance_rps - EPS))


def min_fleet(floor: int, trough_rps: float, per_instance_at_target_rps: float) -> int:
    """max(floor, ceil(trough / X(C_scale_max))): the smallest fleet that carries the trough
    without crossing the scale-out target. Scale-in (at C_scale_min) decides the rest; a higher
    floor would only pay for idle instances."""
    return max(floor, instances_for(trough_rps, per_instance_at_target_rps) if per_instance_at_target_rps > 0 else 1)


@dataclass(frozen=True)
class SloSizing:
    """The gated chain of one instance against the SLO share (speech.plan.survival)."""

    rates: np.ndarray
    """X(1..Q_max), requests/s."""
    over_slo: np.ndarray
    """Share over the SLO of a request served at concurrency 1..Q_max."""
    rate_rps: float | None
    """Highest per-instance Poisson rate keeping the SLO share; None: no rate does."""
    occupancy: float | None
    """Mean requests in the instance at that rate."""

    def shares_at(self, arrival_rps: float) -> tuple[float, float]:
        """(within the SLO, refused) at a per-instance rate."""
        return slo_shares(arrival_rps, self.rates, self.over_slo)


def slo_sizing(qmax: QmaxArtifact, q: int, slo_ms: float, slo_share: float) -> SloSizing:
    """Solve the gated chain (gate at Q_max, departures X(n) from the ladder, answers over the SLO
    from the ladder's TTFAB quantiles at n + 1) for the highest per-instance rate whose share within
    the SLO, refused requests counted as missed, is at least ``slo_share``."""
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    quantiles = [(lv.concurrency, lv.ttfab_p50_ms, lv.ttfab_p95_ms, lv.ttfab_p99_ms) for lv in qmax.ladder]
    n = max(1, q)
    rates = service_rates(levels, n)
    over = over_slo_by_concurrency(quantiles, n, slo_ms)
    rate = slo_rate(rates, over, slo_share) if q >= 1 and rates[-1] > 0 else None
    return SloSizing(rates=rates, over_slo=over, rate_rps=rate,
                     occupancy=None if rate is None else gated_mean(rate, rates))


def scale_out_target(q: int, h: float, target_share: float | None, slo_occupancy: float | None) -> tuple[float, str]:
    """Scale-out target C_scale_max in client units and the rule that set it: a tuned share
    (``target share``), else min((1 - h) x Q_max, the SLO occupancy): the surge rule keeps h x Q_max
    free, and an instance held above the mean occupancy of the SLO-share rate refuses or delays more
    than the share allows (``SLO share``)."""
    if target_share is not None:
        return tuned_c_scale_max(q, h, target_share), "target share"
    seed = c_scale_max(q, h)
    if slo_occupancy is not None and 0 < slo_occupancy < seed:
        return slo_occupancy, "SLO share"
    return seed, "surge rule"


def per_instance_rps(c_max: float, x_target: float, rates: np.ndarray) -> float:
    """Arrival rate per instance the fleet is sized at, requests/s: the rate at which the gated
    chain holds C_scale_max on average (what target tracking keeps each instance at), never above
    the closed-loop throughput X(C_scale_max) the ladder measured there."""
    lam = arrival_for_gated_mean(c_max, rates) if rates[-1] > 0 else 0.0
    return min(lam, x_target) if lam > 0 else x_target


def littles_law_instances(peak_rps: float, service_mean_s: float, c_max: float) -> int:
    """The common (wrong for queueing servers) sizing: ceil(lambda x S / C_scale_max)."""
    return max(1, math.ceil(peak_rps * service_mean_s / c_max - EPS)) if c_max > 0 else UNBOUNDED




# --- one serving unit (an instance, or a copy): the sizing both plans share -------------------


@dataclass(frozen=True)
class UnitSizing:
    """The scaling numbers of one serving unit, with the evidence they were computed from.

    A unit is what the ladder ran against and what target tracking counts: an instance of a
    real-time variant (:func:`speech.plan.realtime.build_plan`) or a copy of an inference
    component (:func:`speech.plan.copies.build_copy_plan`). Concurrencies are requests in flight
    per unit (client units), rates requests/s per unit."""

    headroom: float
    """h = surge ratio - 1 (:func:`headroom`)."""
    q_max: int
    """Q_max per unit after the derate (:func:`derated_q_max`)."""
    slo: SloSizing
    """The gated chain against the SLO share (:func:`slo_sizing`)."""
    c_scale_max: float
    """Scale-out target (:func:`scale_out_target`)."""
    target_rule: str
    """Which rule set the target: ``surge rule``, ``SLO share`` or ``target share``."""
    c_scale_min: float
    """Scale-in threshold: (1 - 2h) x Q_max under the surge rule, else :func:`tuned_c_scale_min`."""
    levels: list[tuple[int, float]]
    """The ladder: (concurrency, closed-loop throughput requests/s)."""
    throughput_at_target_rps: float
    """X(C_scale_max), interpolated on the ladder."""
    throughput_at_scale_in_rps: float
    """X(C_scale_min), interpolated on the ladder."""
    per_unit_rps: float
    """The rate each unit is sized at (:func:`per_instance_rps`)."""
    littles_law_units: int
    """The common sizing the plan is compared with, at the seed target (1 - h) x Q_max
    (:func:`littles_law_instances`)."""
    min_safe_units: int
    """The smallest count scale-in never flaps from (:func:`min_safe_instances`); UNBOUNDED when
    the scale-in threshold is 0."""


def unit_sizing(qmax: QmaxArtifact, inputs: PlanInputs) -> UnitSizing:
    """Size one unit from its ladder and the team's inputs: Q_max derated, C_scale_max by the SLO
    share or the surge rule (:func:`scale_out_target`), C_scale_min, the ladder's throughput at
    both, the per-unit rate at the target, and Little's law's count at ``inputs.peak_rps`` for
    comparison. Raises :class:`PlanInputError` for a surge ratio or tuned share out of range."""
    h = headroom(inputs.surge_ratio)
    q = derated_q_max(qmax.q_max, inputs.qmax_derate)
    slo = slo_sizing(qmax, q, inputs.slo_ms, inputs.slo_share)
    c_max, rule = scale_out_target(q, h, inputs.target_share, slo.occupancy)
    c_min = c_scale_min(q, h) if rule == "surge rule" else tuned_c_scale_min(c_max, h)
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    x_target = throughput_at(levels, c_max)
    return UnitSizing(
        headroom=h, q_max=q, slo=slo, c_scale_max=c_max, target_rule=rule, c_scale_min=c_min, levels=levels,
        throughput_at_target_rps=x_target,
        throughput_at_scale_in_rps=throughput_at(levels, c_min),
        per_unit_rps=per_instance_rps(c_max, x_target, slo.rates),
        littles_law_units=littles_law_instances(inputs.peak_rps, qmax.service_time.mean_ms / 1000.0, c_scale_max(q, h)),
        min_safe_units=min_safe_instances(c_max, c_min) if c_min > 0 else UNBOUNDED,
    )


def capacity_at(sizing: UnitSizing, *, peak_rps: float, units_at_peak: int, trough_rps: float,
                units_at_trough: int) -> Capacity:
    """The plan's capacity block: the ladder's throughput at the target and the scale-in
    threshold, Little's law's count and what it would carry (count x X(C_scale_max), requests/s),
    the per-unit rate, and the shares within the SLO and refused when the peak (trough) rate is
    spread over ``units_at_peak`` (``units_at_trough``) units."""
    at_peak = sizing.slo.shares_at(peak_rps / units_at_peak)
    at_trough = sizing.slo.shares_at(trough_rps / units_at_trough)
    rate = sizing.slo.rate_rps
    return Capacity(
        throughput_at_target_rps=round(sizing.throughput_at_target_rps, 4),
        throughput_at_scale_in_rps=round(sizing.throughput_at_scale_in_rps, 4),
        littles_law_instances=sizing.littles_law_units,
        littles_law_capacity_rps=round(sizing.littles_law_units * sizing.throughput_at_target_rps, 2),
        per_instance_rps=round(sizing.per_unit_rps, 4),
        slo_rate_rps=None if rate is None else round(rate, 4),
        slo_share_at_peak=round(at_peak[0], 6),
        refused_share_at_peak=round(at_peak[1], 6),
        slo_share_at_trough=round(at_trough[0], 6),
        refused_share_at_trough=round(at_trough[1], 6),
    )


def surge_at_target(levels: list[tuple[int, float]], q_max: int, c_max: float, planning_s: float,
                    surge_ratio: float) -> Surge:
    """A unit held at C_scale_max (requests in flight): its utilization (the arrival rate that
    holds that mean occupancy / the saturated throughput) and the chance of reaching Q_max within
    ``planning_s`` seconds, the time a new unit takes to serve, while traffic ramps x
    ``surge_ratio`` (and at a steady rate), from the birth-death chain (speech.plan.survival).

    No measured throughput at saturation (the top level completed nothing) means no chain to
    solve: the surge counts as not survived, rather than a NaN the artifact cannot store."""
    n_max = max(q_max, levels[-1][0])
    rates = service_rates(levels, n_max)
    if q_max < 1 or c_max <= 0 or not rates[-1] > 0:
        return Surge(
            utilization=1.0, arrival_rps=0.0, reach_qmax_probability=1.0, survival=0.0, reach_qmax_probability_steady=1.0
        )
    lam = arrival_for_mean_occupancy(c_max, rates)
    util = lam / rates[-1]
    p_ramp = reach_probability(start_occupancy=c_max, q_max=q_max, arrival_rps=lam, rates=rates, horizon_s=planning_s,
                               ramp_ratio=surge_ratio)
    p_steady = reach_probability(start_occupancy=c_max, q_max=q_max, arrival_rps=lam, rates=rates, horizon_s=planning_s)
    return Surge(
        utilization=round(util, 6),
        arrival_rps=round(lam, 6),
        reach_qmax_probability=round(p_ramp, 6),
        survival=round(1 - p_ramp, 6),
        reach_qmax_probability_steady=round(p_steady, 6),
    )


def hot_load_gain(planning_t_copy_s: float, planning_t_total_s: float) -> float:
    """planning T_total / planning T_copy: how many times sooner an added copy serves than an instance."""
    return planning_t_total_s / planning_t_copy_s if planning_t_copy_s > 0 else float("inf")
