"""The plan's findings: each an ok / warn / stop with the number it rests on (docs/design.md §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from speech.errors import PlanInputError
from speech.plan.formulas import (
    SloSizing,
    w_max_s,
)
from speech.schema.artifacts import Level, QmaxArtifact
from speech.schema.plan_artifacts import (
    Capacity,
    Finding,
    ScaleIn,
    Surge,
)
from speech.schema.units import EPS, UNBOUNDED

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


LEVERS = ("a looser SLO (Q_max grows with it: re-run bench qmax --slo-ms), a queue in front (a client that "
          "retries 503 with backoff absorbs the refused share), or a batch route (priority: batch, hosting: async) "
          "for requests that can wait")
"""What keeps an SLO share that no fleet of this instance keeps by its size alone."""


# --- findings ----------------------------------------------------------------------------------


def pct(x: float) -> str:
    """A share as a percentage with one decimal, as every finding prints it."""
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
        f"at the scale-out point ({c_max:g} in flight) the instance is {pct(surge.utilization)} utilized "
        f"(arrivals {surge.arrival_rps:.2f} rps); with traffic rising x{surge_ratio:g} over the planning "
        f"T_total {planning_total_s:.1f} s it reaches Q_max {q_max} (gate rejects) with probability "
        f"{pct(surge.reach_qmax_probability)} (steady traffic: {pct(surge.reach_qmax_probability_steady)})"
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
    per = capacity.per_instance_rps or capacity.throughput_at_target_rps
    served = max_instances * per
    if per <= 0 or needed >= UNBOUNDED:
        # No instance serves anything within the SLO (Q_max 0, or no throughput at the target): no
        # fleet of any size carries the peak, and the instance count is a placeholder, not a plan.
        return Finding(
            name="fleet_capacity",
            level="stop",
            message=f"an instance serves 0 rps within the SLO at C_scale_max {c_max:g} (Q_max 0 or no measured "
            f"throughput there): no fleet carries peak {peak_rps:g} rps; re-run bench qmax with a level that meets the "
            "SLO (a higher --slo-ms, a faster instance or image)",
        )
    base = (
        f"peak {peak_rps:g} rps / {per:.2f} rps per instance at C_scale_max {c_max:g} (measured throughput there "
        f"{capacity.throughput_at_target_rps:.2f} rps) -> {needed} instances"
        + ("" if capacity.refused_share_at_peak is None else
           f" (refused at peak {pct(capacity.refused_share_at_peak)}, at trough {pct(capacity.refused_share_at_trough or 0)})")
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
    want = pct(slo_share)
    if slo.rate_rps is None:
        idle_over = float(slo.over_slo[0]) if len(slo.over_slo) else 1.0
        return Finding(
            name="slo_share",
            level="stop",
            message=f"no fleet keeps {want} within the SLO {slo_ms:g} ms: even one request alone on an instance is over "
            f"it {pct(idle_over)} of the time (ladder at concurrency 1); loosen the SLO, lower slo_share to at most "
            f"{pct(1 - idle_over)}, or make the server faster and re-measure",
        )
    within_peak, refused_peak = slo.shares_at(peak_rps / max_n)
    within_trough, refused_trough = slo.shares_at(trough_rps / floor_n)
    util = slo.rate_rps / sat_rps if sat_rps > 0 else 0.0
    body = (
        f"{want} within the SLO allows {slo.rate_rps:.3g} rps per instance ({pct(util)} of its saturated "
        f"{sat_rps:.3g} rps; mean {slo.occupancy:.3g} in flight, target {c_max:.4g} by the {target_rule}); at peak "
        f"{peak_rps:g} rps over {max_n}: {pct(within_peak)} within, {pct(refused_peak)} refused; at trough "
        f"{trough_rps:g} rps over {floor_n}: {pct(within_trough)} within, {pct(refused_trough)} refused"
    )
    levers = LEVERS
    if cap is not None and cap < needed:
        burst_within, burst_refused = slo.shares_at(peak_rps * surge_ratio / cap)
        return Finding(
            name="slo_share",
            level="stop",
            message=f"{body}. No fleet under the cap of {cap} instances keeps it: at peak {pct(refused_peak)} will be "
            f"refused, a x{surge_ratio:g} burst refuses {pct(burst_refused)} ({pct(burst_within)} within); "
            f"{needed} instances would keep it; else {levers}",
        )
    if within_peak + EPS < slo_share or within_trough + EPS < slo_share:
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


def verdict(findings: list[Finding]) -> Level:
    levels = {f.level for f in findings}
    return "stop" if "stop" in levels else "warn" if "warn" in levels else "ok"


def weakest_origin(*origins: str) -> str:
    for o in ("assumption", "reference", "measured"):
        if o in origins:
            return o
    return "assumption"


