"""The plan: measured artifacts + chosen inputs -> thresholds, fleet, cooldowns, findings.

Pure arithmetic, one function (:func:`build_plan`) shared by ``bench plan``, the Pulumi program
and the policy pack, so the three can never disagree. Each step is a small function whose
docstring states the rule and the units (docs/design.md §3).
"""

from __future__ import annotations

from speech.plan.findings import (
    finding_bracketed,
    finding_fleet,
    finding_invocation,
    finding_scale_in,
    finding_scale_in_step,
    finding_slo,
    finding_slo_share,
    finding_surge,
    require_one_model,
    verdict,
    weakest_origin,
)
from speech.plan.formulas import (
    SCALE_IN_WINDOW_S,
    capacity_at,
    instances_for,
    min_fleet,
    planning_t_total,
    scale_in,
    scale_in_evaluation_periods,
    surge_at_target,
    to_cloudwatch,
    tuned_scale_in_cooldown_s,
    tuned_scale_out_cooldown_s,
    unit_sizing,
    w_max_s,
)
from speech.plan.measured_findings import (
    finding_cloudwatch_ratio,
    finding_derate,
    finding_fingerprint,
    finding_instances,
    finding_provenance,
)
from speech.plan.survival import saturation_rps
from speech.plan.tuned_findings import clamp_schedule, finding_promise, finding_schedule, tuned_values
from speech.schema.artifacts import Provenance, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import PlanInputs
from speech.schema.plan_artifacts import (
    Alarms,
    Cooldowns,
    Finding,
    Fleet,
    PlanArtifact,
    PlanInputsRecord,
    Thresholds,
)
from speech.schema.units import EPS

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
    unit = unit_sizing(qmax, inputs)
    h, q, slo, levels = unit.headroom, unit.q_max, unit.slo, unit.levels
    c_max, c_min, target_rule = unit.c_scale_max, unit.c_scale_min, unit.target_rule
    ratio = qmax.cloudwatch_ratio
    sat = saturation_rps(levels)

    period = inputs.reaction.metric_period_s
    out_cd = tuned_scale_out_cooldown_s(inputs.scale_out_cooldown_s, ttotal.measured_total_s, period)
    t_total = planning_t_total(ttotal.measured_total_s, inputs.reaction, out_cd)
    planning = t_total.planning_s
    in_periods = scale_in_evaluation_periods(period, inputs.scale_in_window_s or SCALE_IN_WINDOW_S)
    in_cd = tuned_scale_in_cooldown_s(inputs.scale_in_cooldown_s, in_periods * period, planning)
    step_in = scale_in(c_max, c_min, inputs.scale_in_step_share, in_periods * period, period, inputs.surge_ratio)

    needed = instances_for(inputs.peak_rps, unit.per_unit_rps)
    needed_throughput = instances_for(inputs.peak_rps, sat)
    safe = unit.min_safe_units
    floor_n = min_fleet(inputs.min_instances, inputs.trough_rps, unit.per_unit_rps)
    max_n = max(floor_n, needed if max_instances_cap is None else min(needed, max_instances_cap))
    capacity = capacity_at(unit, peak_rps=inputs.peak_rps, units_at_peak=max_n, trough_rps=inputs.trough_rps,
                           units_at_trough=floor_n)

    surge = surge_at_target(levels, q, c_max, planning, inputs.surge_ratio)

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
    if inputs.schedule is not None and schedule is not None:
        findings.append(finding_schedule(inputs.schedule, schedule, floor_n, max_n))
    if inputs.promise is not None:
        findings.append(finding_promise(inputs.promise, inputs.slo_share, q))
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
        inputs=PlanInputsRecord.of(inputs, qmax_sha256=canonical_sha256(qmax), ttotal_sha256=canonical_sha256(ttotal),
                                   qmax_slug=qmax.fingerprint.slug, ttotal_slug=ttotal.fingerprint.slug,
                                   allow_config_mismatch=allow_config_mismatch),
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
            origin=weakest_origin(qmax.provenance.origin, ttotal.provenance.origin),
            source="bench plan",
            tool="speech.plan.realtime.build_plan",
        ),
        scale_in=step_in,
        schedule=schedule,
        promise=inputs.promise,
        tuning=tuned_values(inputs, q=q, h=h, c_min=c_min, c_max=c_max, measured_total_s=ttotal.measured_total_s,
                            planning_s=planning, period=period),
    )

