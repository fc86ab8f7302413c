"""The plan: measured artifacts + chosen inputs -> thresholds, fleet, cooldowns, findings.

Pure arithmetic, one function (:func:`build_plan`) shared by ``bench plan``, the Pulumi program
and the policy pack, so the three can never disagree. Each step is a small function whose
docstring states the rule and the units (docs/design.md §3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from speech.schema.units import EPS, UNBOUNDED
from speech.schema.plan_artifacts import (
    Alarms, Capacity, Cooldowns, Finding, Fleet, PlanArtifact, PlanInputsRecord, Surge, Thresholds, TTotalSummary,
)
from speech.schema.artifacts import Level, Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import MAX_SURGE_RATIO, PlanInputs, ReactionPolicy
from speech.errors import FingerprintMismatch, PlanInputError
from speech.plan.survival import arrival_for_mean_occupancy, reach_probability, saturation_rps, service_rates, throughput_at

INVOCATION_LIMIT_S = 60.0
"""SageMaker closes a real-time invocation after 60 s."""
SURVIVAL_OK = 0.95
"""surge_survival is ok when the chance of reaching Q_max within T_total is at most 5 %."""
UTILIZATION_OK = 0.90
"""... and the instance at the scale-out point is at most 90 % utilized."""
LITTLE_LAW_TOLERANCE = 1.5
"""fleet_capacity warns when Little's law with S is off from measured sizing by more than this."""


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


def planning_t_total(measured_total_s: float, reaction: ReactionPolicy) -> TTotalSummary:
    """Planning T_total, seconds: measured scale-out + reaction bound (metric period x datapoints
    to alarm + the scale-out cooldown clamp(T_measured / 2, 10, 30)). The one place it is
    computed: the plan, the Pulumi program, the policy pack and ``bench ttotal``'s report use it."""
    cooldown = scale_out_cooldown_s(measured_total_s)
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
    """max(300, 3 x planning T_total) in whole seconds: never give back what takes T_total to get."""
    return int(max(300.0, math.floor(3.0 * planning_total_s)))


def scale_in_evaluation_periods(metric_period_s: int) -> int:
    """Periods at or below C_scale_min before scaling in: a sustained 5-minute window (>= 3)."""
    return max(3, math.ceil(300 / metric_period_s))


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


def littles_law_instances(peak_rps: float, service_mean_s: float, c_max: float) -> int:
    """The common (wrong for queueing servers) sizing: ceil(lambda x S / C_scale_max)."""
    return max(1, math.ceil(peak_rps * service_mean_s / c_max - EPS)) if c_max > 0 else UNBOUNDED


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


@dataclass(frozen=True)
class ScaleInWording:
    """How :func:`scale_in_safety` words its finding for one kind of unit (instances, copies)."""

    ok: str
    """``floor >= safe``: format fields floor, safe, c_min, c_max."""
    warn: str
    """``floor < safe``: the same fields, and the fix."""


INSTANCE_SCALE_IN = ScaleInWording(
    ok="floor {floor} >= {safe}: scaling in at {c_min:g} never lifts survivors past {c_max:g}",
    warn="floor {floor} < min safe {safe}: scaling in from fewer than {safe} instances at C_scale_min {c_min:g} can "
         "push survivors past C_scale_max {c_max:g} (scale-out flap); safe from {safe} instances (--min-instances {safe})",
)


def scale_in_safety(floor: int, safe: int, c_max: float, c_min: float, wording: ScaleInWording) -> Finding:
    """``scale_in_safety``: ok when the floor (units) is at least the smallest safe fleet ``safe``
    (units; removing one unit at C_scale_min ``c_min`` then leaves the rest at or below C_scale_max
    ``c_max``, both in requests per unit), else warn: below it a scale-in can flap back out."""
    fields = {"floor": floor, "safe": safe, "c_min": c_min, "c_max": c_max}
    if floor >= safe:
        return Finding(name="scale_in_safety", level="ok", message=wording.ok.format(**fields))
    return Finding(name="scale_in_safety", level="warn", message=wording.warn.format(**fields))


def finding_scale_in(min_instances: int, safe: int, c_max: float, c_min: float) -> Finding:
    return scale_in_safety(min_instances, safe, c_max, c_min, INSTANCE_SCALE_IN)


def require_one_model(qmax: QmaxArtifact, other: Any, other_name: str) -> None:
    """Raise :class:`PlanInputError` unless ``other`` (the ``other_name`` artifact) measured the same model as ``qmax``."""
    if qmax.model != other.model:
        raise PlanInputError(
            f"qmax artifact is for model {qmax.model!r} but {other_name} for {other.model!r}; use artifacts of one model"
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
    served = max_instances * capacity.throughput_at_target_rps
    base = (
        f"peak {peak_rps:g} rps / measured {capacity.throughput_at_target_rps:.2f} rps per instance at "
        f"C_scale_max {c_max:g} -> {needed} instances"
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
    require_one_model(qmax, ttotal, "ttotal")
    fp_finding = finding_fingerprint(qmax, ttotal, allow_config_mismatch)
    h = headroom(inputs.surge_ratio)
    q = derated_q_max(qmax.q_max, inputs.qmax_derate)
    c_max = c_scale_max(q, h)
    c_min = c_scale_min(q, h)
    ratio = qmax.cloudwatch_ratio

    out_cd = scale_out_cooldown_s(ttotal.measured_total_s)
    t_total = planning_t_total(ttotal.measured_total_s, inputs.reaction)
    planning = t_total.planning_s
    in_cd = scale_in_cooldown_s(planning)

    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    x_target = throughput_at(levels, c_max)
    x_in = throughput_at(levels, c_min)
    sat = saturation_rps(levels)
    little = littles_law_instances(inputs.peak_rps, qmax.service_time.mean_ms / 1000.0, c_max)
    capacity = Capacity(
        throughput_at_target_rps=round(x_target, 4),
        throughput_at_scale_in_rps=round(x_in, 4),
        littles_law_instances=little,
        littles_law_capacity_rps=round(little * x_target, 2),
    )
    needed = instances_for(inputs.peak_rps, x_target)
    safe = min_safe_instances(c_max, c_min) if c_min > 0 else UNBOUNDED
    floor_n = min_fleet(inputs.min_instances, inputs.trough_rps, x_target)
    max_n = max(floor_n, needed if max_instances_cap is None else min(needed, max_instances_cap))

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
        finding_invocation(q, sat, qmax.service_time.p95_ms),
        fp_finding,
        finding_provenance(qmax, ttotal),
        finding_cloudwatch_ratio(qmax),
        finding_instances(qmax),
    ]
    if inputs.qmax_derate < 1.0:
        findings.append(finding_derate(qmax.q_max, q, inputs.qmax_derate))
    if abs(inputs.slo_ms - qmax.slo.ttfab_p95_ms) > EPS:
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
            scale_in_evaluation_periods=scale_in_evaluation_periods(inputs.reaction.metric_period_s),
        ),
        capacity=capacity,
        surge=surge,
        findings=findings,
        verdict=verdict(findings),
        provenance=Provenance(
            origin=weakest_origin(qmax.provenance.origin, ttotal.provenance.origin),
            source="bench plan",
            tool="speech.plan.realtime.build_plan",
        ),
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
    p_ramp = reach_probability(start_occupancy=c_max, q_max=q, arrival_rps=lam, rates=rates, horizon_s=planning_s,
                               ramp_ratio=surge_ratio)
    p_steady = reach_probability(start_occupancy=c_max, q_max=q, arrival_rps=lam, rates=rates, horizon_s=planning_s)
    return Surge(
        utilization=round(util, 6),
        arrival_rps=round(lam, 6),
        reach_qmax_probability=round(p_ramp, 6),
        survival=round(1 - p_ramp, 6),
        reach_qmax_probability_steady=round(p_steady, 6),
    )
