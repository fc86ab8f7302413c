"""The plan: measured artifacts + chosen inputs -> thresholds, fleet, cooldowns, findings.

Pure arithmetic, one function (:func:`build_plan`) shared by ``bench plan``, the Pulumi program
and the policy pack, so the three can never disagree. Each step is a small function whose
docstring states the rule and the units (docs/design.md §3).
"""

from __future__ import annotations

import math

from speech.schema.plan_artifacts import (
    Alarms, Capacity, Cooldowns, Finding, Fleet, PlanArtifact, PlanInputsRecord, ScaleIn, Surge, Thresholds, TTotalSummary,
    TunedValue,
)
from speech.schema.artifacts import Level, Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import MAX_SURGE_RATIO, FloorSchedule, PlanInputs, ReactionPolicy, ScheduledFloor
from speech.errors import FingerprintMismatch, PlanInputError
from dataclasses import dataclass

import numpy as np

from speech.plan.survival import (
    arrival_for_gated_mean, arrival_for_mean_occupancy, gated_mean, over_slo_by_concurrency, reach_probability,
    saturation_rps, service_rates, slo_rate, slo_shares, throughput_at,
)

INVOCATION_LIMIT_S = 60.0
"""SageMaker closes a real-time invocation after 60 s."""
SURVIVAL_OK = 0.95
"""surge_survival is ok when the chance of reaching Q_max within T_total is at most 5 %."""
UTILIZATION_OK = 0.90
"""... and the instance at the scale-out point is at most 90 % utilized."""
LITTLE_LAW_TOLERANCE = 1.5
"""fleet_capacity warns when Little's law with S is off from measured sizing by more than this."""
ABSURD_FLEET_FACTOR = 2.0
"""slo_share warns when keeping the SLO share takes more than this many times the instances the
measured throughput alone needs at peak: the fleet pays mostly for idle headroom."""


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
    if target_share > bound + 1e-9:
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
    return int(math.floor(measured_q_max * qmax_derate + 1e-9))


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
    return max(MIN_WINDOW_PERIODS, math.ceil(window_s / metric_period_s - 1e-9))


def scale_in_cooldown_floor_s(window_s: int, planning_total_s: float) -> int:
    """Least scale-in cooldown, seconds: max(window, ceil(planning T_total)). A step removes a share
    of the fleet; the next one must wait for a full window on the smaller fleet (else it acts on the
    old fleet's metric) and for one planning T_total (the time scale-out needs to bring back a share
    removed too early)."""
    return int(max(window_s, math.ceil(planning_total_s - 1e-9)))


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
    return -max(1, int(math.floor(100.0 * step_share + 1e-9)))


def scale_in(c_max: float, c_min: float, tuned_share: float | None, window_s: int, metric_period_s: int,
             surge_ratio: float) -> ScaleIn:
    """The scale-in step: the tuned share of the fleet (at most the safe bound), else the seed."""
    bound = max_safe_step_share(c_max, c_min)
    share = min(bound, seed_step_share(c_max, c_min, surge_ratio)) if tuned_share is None else tuned_share
    if share > bound + 1e-9:
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
        return 10**6
    # N/(N-1) <= ratio  <=>  N >= ratio / (ratio - 1); a tiny epsilon keeps exact ratios exact.
    return max(2, math.ceil(ratio / (ratio - 1.0) - 1e-9))


def instances_for(rate_rps: float, per_instance_rps: float) -> int:
    """ceil(rate / per-instance throughput), at least 1."""
    if per_instance_rps <= 0:
        return 10**6
    return max(1, math.ceil(rate_rps / per_instance_rps - 1e-9))


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
    return max(1, math.ceil(peak_rps * service_mean_s / c_max - 1e-9)) if c_max > 0 else 10**6


# --- findings ----------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def finding_slo(slo_ms: float, service_p95_ms: float, q_max: int) -> Finding:
    if service_p95_ms >= slo_ms:
        return Finding(
            name="slo_feasible",
            level="stop",
            message=f"uncontended p95 TTFAB {service_p95_ms:.1f} ms already misses the SLO {slo_ms:.0f} ms "
            f"(W_max = {w_max_s(slo_ms, service_p95_ms):.3f} s <= 0): no concurrency can meet it; "
            "raise the SLO or use a faster instance/image and re-measure",
        )
    if q_max < 1:
        return Finding(
            name="slo_feasible",
            level="stop",
            message=f"no ladder level met the SLO {slo_ms:.0f} ms (Q_max = 0); re-run qmax from concurrency 1",
        )
    return Finding(
        name="slo_feasible",
        level="ok",
        message=f"queueing budget W_max = SLO {slo_ms:.0f} ms - S_p95 {service_p95_ms:.1f} ms "
        f"= {w_max_s(slo_ms, service_p95_ms):.3f} s",
    )


def finding_surge(surge: Surge, c_max: float, q_max: int, planning_total_s: float, surge_ratio: float) -> Finding:
    level: Level = "ok" if surge.survival >= SURVIVAL_OK and surge.utilization <= UTILIZATION_OK else "warn"
    msg = (
        f"at the scale-out point ({c_max:g} in flight) the instance is {_pct(surge.utilization)} utilized "
        f"(arrivals {surge.arrival_rps:.2f} rps); with traffic rising x{surge_ratio:g} over the planning "
        f"T_total {planning_total_s:.1f} s it reaches Q_max {q_max} (gate rejects) with probability "
        f"{_pct(surge.reach_qmax_probability)} (steady traffic: {_pct(surge.reach_qmax_probability_steady)})"
    )
    if level == "warn":
        msg += (
            "; expect 503 queue_saturated during surges: raise Q_max (serve requests concurrently/batch),"
            " lower the surge ratio, or shorten T_total (smaller image, warm pools)"
        )
    return Finding(name="surge_survival", level=level, message=msg)


def finding_scale_in(min_instances: int, safe: int, c_max: float, c_min: float) -> Finding:
    if min_instances >= safe:
        return Finding(
            name="scale_in_safety",
            level="ok",
            message=f"floor {min_instances} >= {safe}: scaling in at {c_min:g} never lifts survivors past {c_max:g}",
        )
    return Finding(
        name="scale_in_safety",
        level="warn",
        message=f"floor {min_instances} < min safe {safe}: scaling in from fewer than {safe} instances at "
        f"C_scale_min {c_min:g} can push survivors past C_scale_max {c_max:g} (scale-out flap); "
        f"safe from {safe} instances (--min-instances {safe})",
    )


def finding_bracketed(q: QmaxArtifact) -> Finding:
    if q.bracketed:
        return Finding(
            name="qmax_bracketed",
            level="ok",
            message=f"Q_max {q.q_max} is bracketed: concurrency {q.first_failing_concurrency} broke the SLO",
        )
    top = q.ladder[-1].concurrency
    return Finding(
        name="qmax_bracketed",
        level="warn",
        message=f"no level failed up to concurrency {top}: Q_max {q.q_max} is a lower bound only; "
        "re-run qmax with higher levels to find where the SLO breaks",
    )


def finding_fleet(
    *,
    peak_rps: float,
    max_instances: int,
    needed: int,
    cap: int | None,
    capacity: Capacity,
    c_max: float,
    service_mean_ms: float,
) -> Finding:
    per = capacity.per_instance_rps or capacity.throughput_at_target_rps
    served = max_instances * per
    base = (
        f"peak {peak_rps:g} rps / {per:.2f} rps per instance at C_scale_max {c_max:g} (measured throughput there "
        f"{capacity.throughput_at_target_rps:.2f} rps) -> {needed} instances"
        + ("" if capacity.refused_share_at_peak is None else
           f" (refused at peak {_pct(capacity.refused_share_at_peak)}, at trough {_pct(capacity.refused_share_at_trough or 0)})")
    )
    if cap is not None and cap < needed:
        return Finding(
            name="fleet_capacity",
            level="stop",
            message=f"{base}, but max_instances is capped at {cap} (serves {served:.0f} rps): raise the cap "
            f"to {needed} or lower peak_rps",
        )
    ratio = needed / capacity.littles_law_instances if capacity.littles_law_instances else float("inf")
    if ratio > LITTLE_LAW_TOLERANCE or ratio < 1 / LITTLE_LAW_TOLERANCE:
        return Finding(
            name="fleet_capacity",
            level="warn",
            message=f"{base}. Little's law on S = {service_mean_ms:.1f} ms (lambda x S / C_scale_max) would "
            f"give {capacity.littles_law_instances}, which serve only {capacity.littles_law_capacity_rps:.0f} "
            f"rps: this server does not complete C/S requests per second (throughput is flat at "
            f"~{capacity.throughput_at_target_rps:.1f} rps), so size by measured throughput",
        )
    return Finding(name="fleet_capacity", level="ok", message=f"{base} (serves {served:.0f} rps)")


def finding_slo_share(
    *,
    slo: SloSizing,
    slo_share: float,
    slo_ms: float,
    q_max: int,
    c_max: float,
    target_rule: str,
    peak_rps: float,
    surge_ratio: float,
    trough_rps: float,
    max_n: int,
    floor_n: int,
    needed: int,
    needed_throughput: int,
    cap: int | None,
    sat_rps: float,
) -> Finding:
    """Whether the fleet answers the SLO share: refused and over-SLO shares at peak and trough, the
    fleet it takes, and what no fleet can do."""
    want = _pct(slo_share)
    if slo.rate_rps is None:
        idle_over = float(slo.over_slo[0]) if len(slo.over_slo) else 1.0
        return Finding(
            name="slo_share",
            level="stop",
            message=f"no fleet keeps {want} within the SLO {slo_ms:g} ms: even one request alone on an instance is over "
            f"it {_pct(idle_over)} of the time (ladder at concurrency 1); loosen the SLO, lower slo_share to at most "
            f"{_pct(1 - idle_over)}, or make the server faster and re-measure",
        )
    within_peak, refused_peak = slo.shares_at(peak_rps / max_n)
    within_trough, refused_trough = slo.shares_at(trough_rps / floor_n)
    util = slo.rate_rps / sat_rps if sat_rps > 0 else 0.0
    body = (
        f"{want} within the SLO allows {slo.rate_rps:.3g} rps per instance ({_pct(util)} of its saturated "
        f"{sat_rps:.3g} rps; mean {slo.occupancy:.3g} in flight, target {c_max:.4g} by the {target_rule}); at peak "
        f"{peak_rps:g} rps over {max_n}: {_pct(within_peak)} within, {_pct(refused_peak)} refused; at trough "
        f"{trough_rps:g} rps over {floor_n}: {_pct(within_trough)} within, {_pct(refused_trough)} refused"
    )
    levers = ("a looser SLO (Q_max grows with it: re-run bench qmax --slo-ms), a queue in front (a client that "
              "retries 503 with backoff absorbs the refused share), or a batch route (priority: batch, hosting: async) "
              "for requests that can wait")
    if cap is not None and cap < needed:
        burst_within, burst_refused = slo.shares_at(peak_rps * surge_ratio / cap)
        return Finding(
            name="slo_share",
            level="stop",
            message=f"{body}. No fleet under the cap of {cap} instances keeps it: at peak {_pct(refused_peak)} will be "
            f"refused, a x{surge_ratio:g} burst refuses {_pct(burst_refused)} ({_pct(burst_within)} within); "
            f"{needed} instances would keep it; else {levers}",
        )
    if within_peak + 1e-9 < slo_share or within_trough + 1e-9 < slo_share:
        return Finding(name="slo_share", level="warn",
                       message=f"{body}: below {want}; the target ({target_rule}) holds instances above the SLO "
                       f"occupancy {slo.occupancy:.3g}: lower target_share or leave it to the plan")
    if needed > ABSURD_FLEET_FACTOR * needed_throughput:
        return Finding(
            name="slo_share",
            level="warn",
            message=f"{body}. That takes {needed} instances at peak, {needed / needed_throughput:.1f}x the "
            f"{needed_throughput} its throughput needs (Q_max {q_max} leaves little room for Poisson bursts): the fleet "
            f"pays mostly for headroom; levers: {levers}",
        )
    return Finding(name="slo_share", level="ok", message=body)


def finding_invocation(q_max: int, sat_rps: float, service_p95_ms: float) -> Finding:
    """Worst wait (a full queue of Q_max drained at saturated throughput) + service within 60 s."""
    worst_s = (q_max / sat_rps if sat_rps > 0 else float("inf")) + service_p95_ms / 1000.0
    if worst_s >= INVOCATION_LIMIT_S:
        level: Level = "stop"
        tail = "lower queue depth (Q_max) or make the server faster"
    elif worst_s >= INVOCATION_LIMIT_S / 2:
        level, tail = "warn", "less than 2x margin to SageMaker's 60 s invocation limit"
    else:
        level, tail = "ok", f"within SageMaker's {INVOCATION_LIMIT_S:.0f} s invocation limit"
    return Finding(
        name="invocation_ceiling",
        level=level,
        message=f"a full queue ({q_max}) drains in {q_max / sat_rps if sat_rps else float('inf'):.1f} s + service "
        f"p95 {service_p95_ms:.0f} ms = {worst_s:.1f} s: {tail}",
    )


def finding_fingerprint(q: QmaxArtifact, t: TtotalArtifact, allow_mismatch: bool) -> Finding:
    if q.fingerprint == t.fingerprint:
        return Finding(
            name="fingerprint", level="ok", message=f"qmax and ttotal both measured on {q.fingerprint.slug}"
        )
    msg = (
        f"qmax was measured on {q.fingerprint.slug} ({q.fingerprint.instance_type}, "
        f"{q.fingerprint.image_digest[:19]}) but ttotal on {t.fingerprint.slug} ({t.fingerprint.instance_type}, "
        f"{t.fingerprint.image_digest[:19]})"
    )
    if not allow_mismatch:
        raise FingerprintMismatch(
            f"{msg}; measure both on the same instance type and image, or pass --allow-config-mismatch"
        )
    return Finding(name="fingerprint", level="warn", message=f"{msg}; planned anyway (--allow-config-mismatch)")


def finding_provenance(q: QmaxArtifact, t: TtotalArtifact) -> Finding:
    origins = {q.provenance.origin, t.provenance.origin}
    if origins == {"measured"}:
        return Finding(name="provenance", level="ok", message="both artifacts were measured on this endpoint")
    return Finding(
        name="provenance",
        level="warn",
        message=f"artifact origins are qmax={q.provenance.origin}, ttotal={t.provenance.origin}: these are not "
        "measurements of your endpoint; run bench qmax and bench ttotal before deploying scaling",
    )


def finding_cloudwatch_ratio(q: QmaxArtifact) -> Finding:
    """The ratio converts client in-flight into ConcurrentRequestsPerModel, the unit of every
    deployed threshold; assumed (CloudWatch never covered a level) is a warn on SageMaker."""
    covered = sum(lv.cloudwatch_concurrency_max is not None for lv in q.ladder)
    if q.cloudwatch_ratio_source == "measured":
        return Finding(
            name="cloudwatch_ratio",
            level="ok",
            message=f"CloudWatch/client ratio {q.cloudwatch_ratio:g} measured on {covered} of {len(q.ladder)} levels: "
            "thresholds in CloudWatch units = client units x ratio",
        )
    if q.cloudwatch_ratio_source == "assumed" and q.fingerprint.instance_type.startswith("ml."):
        where = q.provenance.target or q.fingerprint.slug
        return Finding(
            name="cloudwatch_ratio",
            level="warn",
            message=f"CloudWatch/client ratio assumed 1.0: ConcurrentRequestsPerModel never covered a level of the "
            f"ladder on {where}, so scaling_target_value and the alarm thresholds (CloudWatch units) may not sit at "
            "C_scale_max; re-run bench qmax with a longer --cloudwatch-wait-s, or check with bench validate --live",
        )
    return Finding(
        name="cloudwatch_ratio",
        level="ok",
        message=f"CloudWatch/client ratio {q.cloudwatch_ratio:g} ({q.cloudwatch_ratio_source.replace('_', ' ')}: "
        "measured without CloudWatch)",
    )


def finding_instances(q: QmaxArtifact) -> Finding:
    """Q_max is per instance only when the ladder ran on one instance."""
    if q.instances == 1:
        return Finding(name="qmax_instances", level="ok", message="the ladder ran on one instance")
    if q.instances is None:
        return Finding(
            name="qmax_instances",
            level="warn",
            message="the qmax artifact does not record how many instances served the ladder (schema 1): on N "
            "instances its Q_max is N x the per-instance value; re-measure with bench qmax (it pins one instance)",
        )
    return Finding(
        name="qmax_instances",
        level="stop",
        message=f"the ladder ran on {q.instances} instances: Q_max {q.q_max} is the fleet's, about {q.instances}x "
        "what one instance holds; re-measure with bench qmax (it pins the endpoint to one instance)",
    )


def finding_derate(measured: int, planned: int, qmax_derate: float) -> Finding:
    if qmax_derate >= 1.0:
        return Finding(name="qmax_derate", level="ok", message=f"planned with the measured Q_max {measured}")
    return Finding(
        name="qmax_derate",
        level="warn",
        message=f"planned with Q_max {planned} = floor({measured} x {qmax_derate:g}) until the endpoint is "
        "re-measured (bench qmax, bench ttotal), then plan without --qmax-derate",
    )


def finding_scale_in_step(step: ScaleIn, cooldown_s: int, planning_total_s: float, c_max: float, c_min: float) -> Finding:
    """What the scale-in step, its window and its cooldown each protect."""
    lift = 1.0 / (1.0 - step.step_share) if step.step_share < 1 else float("inf")
    return Finding(
        name="scale_in_step",
        level="ok",
        message=f"a step removes {-step.step_percent}% of the fleet (at least {step.min_removed}): survivors at "
        f"C_scale_min {c_min:.4g} rise by at most x{lift:.3f} to {c_min * lift:.4g} <= C_scale_max {c_max:.4g} (safe "
        f"share <= {100 * step.max_safe_share:.1f}%); window {step.window_s} s of every period at or below C_scale_min "
        f"(a lull between bursts is not a tide); cooldown {cooldown_s} s >= max(window, planning T_total "
        f"{planning_total_s:g} s): the next step sees the smaller fleet, and a share removed too early is back within it",
    )


def clamp_schedule(schedule: FloorSchedule | None, floor_n: int, max_n: int) -> FloorSchedule | None:
    """The schedule in force: each floor within [the fleet floor, max_instances]."""
    if schedule is None:
        return None
    return schedule.model_copy(update={"floors": [
        ScheduledFloor(at=f.at, min_instances=min(max_n, max(floor_n, f.min_instances))) for f in schedule.floors
    ]})


def finding_schedule(asked: FloorSchedule, deployed: FloorSchedule, floor_n: int, max_n: int) -> Finding:
    raised = [f for f in deployed.floors if f.min_instances > floor_n]
    capped = [a for a, d in zip(asked.floors, deployed.floors, strict=True) if a.min_instances > d.min_instances]
    text = ", ".join(f"{f.at} -> {f.min_instances}" for f in deployed.floors)
    if capped:
        return Finding(
            name="schedule",
            level="warn",
            message=f"daily floors ({deployed.timezone}): {text}; "
            + ", ".join(f"{a.at} asks {a.min_instances}" for a in capped)
            + f" above max_instances {max_n}, capped: raise the cap or re-derive the schedule (bench plan --schedule-from)",
        )
    return Finding(
        name="schedule",
        level="ok",
        message=f"daily floors ({deployed.timezone}): {text}; {len(raised)} raise the fleet floor {floor_n}, the rest "
        "release it",
    )


def finding_promise(promise, slo_share: float) -> Finding:
    """The simulated promise against the SLO share the plan is sized for."""
    msg = (f"simulated on trace {promise.trace_sha256[:12]} (seed {promise.seed}, simulator {promise.simulator_version}): "
           f"{_pct(promise.slo_share)} within the SLO, {_pct(promise.rejected_share)} refused, "
           f"{promise.instance_hours:.1f} instance-hours, {promise.cost_vs_oracle:.2f}x the oracle")
    if promise.slo_share + 1e-12 < slo_share:
        return Finding(name="promise", level="warn",
                       message=f"{msg}: below the SLO share {_pct(slo_share)} the plan is sized for; re-run bench tune")
    return Finding(name="promise", level="ok", message=msg)


def tuned_values(inputs: PlanInputs, *, q: int, h: float, c_min: float, c_max: float, measured_total_s: float,
                 planning_s: float, period: int) -> list[TunedValue]:
    """Every input set away from its seed formula: (seed, value, unit, reason)."""
    seeds = {
        "target_share": (target_share_bound(h), inputs.target_share, "x Q_max"),
        "scale_in_step_share": (min(max_safe_step_share(c_max, c_min), seed_step_share(c_max, c_min, 1 + h)),
                                inputs.scale_in_step_share, "of the fleet"),
        "scale_in_window_s": (scale_in_evaluation_periods(period) * period, inputs.scale_in_window_s, "s"),
        "scale_in_cooldown_s": (scale_in_cooldown_s(planning_s), inputs.scale_in_cooldown_s, "s"),
        "scale_out_cooldown_s": (scale_out_cooldown_s(measured_total_s), inputs.scale_out_cooldown_s, "s"),
    }
    out = []
    for name, (seed, value, unit) in seeds.items():
        if value is None:
            continue
        out.append(TunedValue(name=name, seed=round(float(seed), 6), value=float(value), unit=unit,
                              reason=inputs.reasons.get(name, "set in stack config; no reason recorded")))
    return out


def verdict(findings: list[Finding]) -> Level:
    levels = {f.level for f in findings}
    return "stop" if "stop" in levels else "warn" if "warn" in levels else "ok"


def weakest_origin(*origins: str) -> str:
    for o in ("assumption", "reference", "measured"):
        if o in origins:
            return o
    return "assumption"


# --- the plan ----------------------------------------------------------------------------------


def build_plan(
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    inputs: PlanInputs,
    *,
    allow_config_mismatch: bool = False,
    max_instances_cap: int | None = None,
) -> PlanArtifact:
    """Turn measurements and choices into every scaling number, with findings and a verdict.

    Raises :class:`PlanInputError` for inputs that cannot be planned at all (surge ratio out of
    range, artifacts of different models or fingerprints without ``allow_config_mismatch``).
    Infeasible but well-formed inputs give a plan whose verdict is ``stop``.
    """
    if qmax.model != ttotal.model:
        raise PlanInputError(
            f"qmax artifact is for model {qmax.model!r} but ttotal for {ttotal.model!r}; use artifacts of one model"
        )
    fp_finding = finding_fingerprint(qmax, ttotal, allow_config_mismatch)
    h = headroom(inputs.surge_ratio)
    q = derated_q_max(qmax.q_max, inputs.qmax_derate)
    ratio = qmax.cloudwatch_ratio
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    sat = saturation_rps(levels)

    # The SLO share: the per-instance rate the gated chain allows, and the occupancy it holds.
    slo = slo_sizing(qmax, q, inputs.slo_ms, inputs.slo_share)
    c_max, target_rule = scale_out_target(q, h, inputs.target_share, slo.occupancy)
    c_min = c_scale_min(q, h) if target_rule == "surge rule" else tuned_c_scale_min(c_max, h)

    period = inputs.reaction.metric_period_s
    out_cd = tuned_scale_out_cooldown_s(inputs.scale_out_cooldown_s, ttotal.measured_total_s, period)
    t_total = planning_t_total(ttotal.measured_total_s, inputs.reaction, out_cd)
    planning = t_total.planning_s
    in_periods = scale_in_evaluation_periods(period, inputs.scale_in_window_s or SCALE_IN_WINDOW_S)
    in_cd = tuned_scale_in_cooldown_s(inputs.scale_in_cooldown_s, in_periods * period, planning)
    step_in = scale_in(c_max, c_min, inputs.scale_in_step_share, in_periods * period, period, inputs.surge_ratio)

    x_target = throughput_at(levels, c_max)
    x_in = throughput_at(levels, c_min)
    per_instance = per_instance_rps(c_max, x_target, slo.rates)
    # The common sizing the plan is compared with uses the seed target (1 - h) x Q_max.
    little = littles_law_instances(inputs.peak_rps, qmax.service_time.mean_ms / 1000.0, c_scale_max(q, h))
    needed = instances_for(inputs.peak_rps, per_instance)
    needed_throughput = instances_for(inputs.peak_rps, sat)
    safe = min_safe_instances(c_max, c_min) if c_min > 0 else 10**6
    floor_n = min_fleet(inputs.min_instances, inputs.trough_rps, per_instance)
    max_n = max(floor_n, needed if max_instances_cap is None else min(needed, max_instances_cap))
    at_peak = slo.shares_at(inputs.peak_rps / max_n)
    at_trough = slo.shares_at(inputs.trough_rps / floor_n)
    capacity = Capacity(
        throughput_at_target_rps=round(x_target, 4),
        throughput_at_scale_in_rps=round(x_in, 4),
        littles_law_instances=little,
        littles_law_capacity_rps=round(little * x_target, 2),
        per_instance_rps=round(per_instance, 4),
        slo_rate_rps=None if slo.rate_rps is None else round(slo.rate_rps, 4),
        slo_share_at_peak=round(at_peak[0], 6),
        refused_share_at_peak=round(at_peak[1], 6),
        slo_share_at_trough=round(at_trough[0], 6),
        refused_share_at_trough=round(at_trough[1], 6),
    )

    surge = _surge(levels, q, c_max, planning, inputs.surge_ratio)

    findings = [
        finding_slo(inputs.slo_ms, qmax.service_time.p95_ms, q),
        finding_surge(surge, c_max, q, planning, inputs.surge_ratio),
        finding_scale_in(floor_n, safe, c_max, c_min),
        finding_bracketed(qmax),
        finding_fleet(
            peak_rps=inputs.peak_rps,
            max_instances=max_n,
            needed=needed,
            cap=max_instances_cap,
            capacity=capacity,
            c_max=c_max,
            service_mean_ms=qmax.service_time.mean_ms,
        ),
        finding_slo_share(
            slo=slo, slo_share=inputs.slo_share, slo_ms=inputs.slo_ms, q_max=q, c_max=c_max, target_rule=target_rule,
            peak_rps=inputs.peak_rps, surge_ratio=inputs.surge_ratio, trough_rps=inputs.trough_rps, max_n=max_n,
            floor_n=floor_n, needed=needed, needed_throughput=needed_throughput, cap=max_instances_cap, sat_rps=sat,
        ),
        finding_invocation(q, sat, qmax.service_time.p95_ms),
        fp_finding,
        finding_provenance(qmax, ttotal),
        finding_cloudwatch_ratio(qmax),
        finding_instances(qmax),
    ]
    findings.append(finding_scale_in_step(step_in, in_cd, planning, c_max, c_min))
    schedule = clamp_schedule(inputs.schedule, floor_n, max_n)
    if inputs.schedule is not None:
        findings.append(finding_schedule(inputs.schedule, schedule, floor_n, max_n))
    if inputs.promise is not None:
        findings.append(finding_promise(inputs.promise, inputs.slo_share))
    if inputs.qmax_derate < 1.0:
        findings.append(finding_derate(qmax.q_max, q, inputs.qmax_derate))
    if abs(inputs.slo_ms - qmax.slo.ttfab_p95_ms) > 1e-9:
        findings.append(
            Finding(
                name="slo_match",
                level="warn",
                message=f"planning SLO {inputs.slo_ms:g} ms differs from the SLO the ladder judged "
                f"({qmax.slo.ttfab_p95_ms:g} ms): Q_max {q} was found for the latter; re-run qmax with --slo-ms "
                f"{inputs.slo_ms:g}",
            )
        )

    # Concurrency 1 (every ladder of schema 2 measures it); older ladders: their lowest level.
    uncontended = min(qmax.ladder, key=lambda lv: lv.concurrency)
    return PlanArtifact(
        model=qmax.model,
        fingerprint=qmax.fingerprint,
        inputs=PlanInputsRecord(
            slo_ms=inputs.slo_ms,
            surge_ratio=inputs.surge_ratio,
            peak_rps=inputs.peak_rps,
            trough_rps=inputs.trough_rps,
            min_instances=inputs.min_instances,
            metric_period_s=inputs.reaction.metric_period_s,
            datapoints_to_alarm=inputs.reaction.datapoints_to_alarm,
            qmax_sha256=canonical_sha256(qmax),
            ttotal_sha256=canonical_sha256(ttotal),
            qmax_slug=qmax.fingerprint.slug,
            ttotal_slug=ttotal.fingerprint.slug,
            allow_config_mismatch=allow_config_mismatch,
            qmax_derate=inputs.qmax_derate,
            slo_share=inputs.slo_share,
            target_share=inputs.target_share,
            scale_in_step_share=inputs.scale_in_step_share,
            scale_in_window_s=inputs.scale_in_window_s,
            scale_in_cooldown_s=inputs.scale_in_cooldown_s,
            scale_out_cooldown_s=inputs.scale_out_cooldown_s,
        ),
        q_max=q,
        thresholds=Thresholds(
            c_scale_max=round(c_max, 4),
            c_scale_min=round(c_min, 4),
            w_max_s=round(w_max_s(inputs.slo_ms, qmax.service_time.p95_ms), 3),
            scaling_target_value=round(to_cloudwatch(c_max, ratio), 4),
            scale_in_threshold=round(to_cloudwatch(c_min, ratio), 4),
        ),
        fleet=Fleet(min_instances=floor_n, max_instances=max_n, min_safe_instances=safe),
        cooldowns=Cooldowns(scale_out_s=out_cd, scale_in_s=in_cd),
        queue_max_depth=q,
        t_total=t_total,
        alarms=Alarms(
            ttfab_p95_alarm_ms=uncontended.ttfab_p95_ms,
            saturation_concurrency=round(to_cloudwatch(q, ratio), 4),
            metric_period_s=inputs.reaction.metric_period_s,
            datapoints_to_alarm=inputs.reaction.datapoints_to_alarm,
            scale_in_evaluation_periods=in_periods,
        ),
        capacity=capacity,
        surge=surge,
        findings=findings,
        verdict=verdict(findings),
        provenance=Provenance(
            origin=weakest_origin(qmax.provenance.origin, ttotal.provenance.origin),  # type: ignore[arg-type]
            source="bench plan",
            tool="speech.plan.realtime.build_plan",
        ),
        scale_in=step_in,
        schedule=schedule,
        promise=inputs.promise,
        tuning=tuned_values(inputs, q=q, h=h, c_min=c_min, c_max=c_max, measured_total_s=ttotal.measured_total_s,
                            planning_s=planning, period=period),
    )


def _surge(levels: list[tuple[int, float]], q: int, c_max: float, planning_s: float, surge_ratio: float) -> Surge:
    """Utilization and the chance of reaching Q_max within one planning T_total (see survival).

    No measured throughput at saturation (the top level completed nothing) means no chain to
    solve: the surge counts as not survived, rather than a NaN the artifact cannot store."""
    n_max = max(q, levels[-1][0])
    rates = service_rates(levels, n_max)
    if q < 1 or c_max <= 0 or not rates[-1] > 0:
        return Surge(
            utilization=1.0, arrival_rps=0.0, reach_qmax_probability=1.0, survival=0.0, reach_qmax_probability_steady=1.0
        )
    lam = arrival_for_mean_occupancy(c_max, rates)
    util = lam / rates[-1]
    common = dict(start_occupancy=c_max, q_max=q, arrival_rps=lam, rates=rates, horizon_s=planning_s)
    p_ramp = reach_probability(**common, ramp_ratio=surge_ratio)
    p_steady = reach_probability(**common)
    return Surge(
        utilization=round(util, 6),
        arrival_rps=round(lam, 6),
        reach_qmax_probability=round(p_ramp, 6),
        survival=round(1 - p_ramp, 6),
        reach_qmax_probability_steady=round(p_steady, 6),
    )
