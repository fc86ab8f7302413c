"""The plan's findings about what a team tuned or scheduled: the daily floors in force, the promise
a tuned plan's simulation made and why a share fell short, every input set away from its seed
formula (docs/design.md §3)."""

from __future__ import annotations

from speech.plan.findings import LEVERS, pct
from speech.plan.formulas import (
    max_safe_step_share,
    scale_in_cooldown_s,
    scale_in_evaluation_periods,
    scale_out_cooldown_s,
    seed_step_share,
    target_share_bound,
)
from speech.schema.config import FloorSchedule, PlanInputs, ScheduledFloor
from speech.schema.plan_artifacts import (
    Finding,
    TunedValue,
)


def clamp_schedule(schedule: FloorSchedule | None, floor_n: int, max_n: int) -> FloorSchedule | None:
    """The schedule in force: each floor within [the fleet floor, max_instances]."""
    if schedule is None:
        return None
    return schedule.model_copy(update={"floors": [
        ScheduledFloor(at=f.at, weekday=f.weekday, min_instances=min(max_n, max(floor_n, f.min_instances)))
        for f in schedule.floors
    ]})


def finding_schedule(asked: FloorSchedule, deployed: FloorSchedule, floor_n: int, max_n: int) -> Finding:
    raised = [f for f in deployed.floors if f.min_instances > floor_n]
    capped = [a for a, d in zip(asked.floors, deployed.floors, strict=True) if a.min_instances > d.min_instances]
    text = ", ".join(f"{f.when} -> {f.min_instances}" for f in deployed.floors)
    kind = "weekly" if deployed.weekly else "daily"
    if capped:
        return Finding(
            name="schedule",
            level="warn",
            message=f"{kind} floors ({deployed.timezone}): {text}; "
            + ", ".join(f"{a.when} asks {a.min_instances}" for a in capped)
            + f" above max_instances {max_n}, capped: raise the cap or re-derive the schedule (bench plan --schedule-from)",
        )
    return Finding(
        name="schedule",
        level="ok",
        message=f"{kind} floors ({deployed.timezone}): {text}; {len(raised)} raise the fleet floor {floor_n}, the rest "
        "release it",
    )


def share_shortfall(slo_share: float, within_share: float, rejected_share: float, q_max: int) -> str:
    """Why a simulated share within the SLO fell below ``slo_share`` and what would keep it.

    The missed share (1 - within) splits into requests refused at the admission gate (503 once an
    instance holds Q_max) and requests answered after the SLO. Refusals are traffic that outran the
    fleet: more floor absorbs the rise before a scale-out serves, else the
    :data:`~speech.plan.findings.LEVERS`. Late
    answers are instances held too full: a lower target share, or a looser SLO."""
    missed = max(0.0, 1.0 - within_share)
    late = max(0.0, missed - rejected_share)
    why = (f"{100 * missed:.2f}% missed: {100 * rejected_share:.2f}% refused at the gate (Q_max {q_max} in flight per "
           f"instance) and {100 * late:.2f}% answered after the SLO")
    if rejected_share >= late:
        what = f"more floor (min_instances: instances already serving when traffic rises, not one that serves a T_total later), {LEVERS}"
    else:
        what = ("a lower target_share (instances held further below the SLO occupancy), or a looser SLO (Q_max grows "
                "with it: re-run bench qmax --slo-ms)")
    return f"{why}; what would keep {100 * slo_share:.2f}%: {what}"


def finding_promise(promise, slo_share: float, q_max: int | None = None) -> Finding:
    """The simulated promise against the SLO share the plan is sized for; below it, why and what
    would keep it (:func:`share_shortfall`, given ``q_max``)."""
    msg = (f"simulated on trace {promise.trace_sha256[:12]} (seed {promise.seed}, simulator {promise.simulator_version}): "
           f"{pct(promise.slo_share)} within the SLO, {pct(promise.rejected_share)} refused, "
           f"{promise.instance_hours:.1f} instance-hours, {promise.cost_vs_floor:.2f}x the floor"
           + ("" if promise.slo_share_low is None else
              f"; {pct(promise.slo_share_low)}-{pct(promise.slo_share_high)} within the SLO over its draws"))
    if promise.slo_share + 1e-12 < slo_share:
        why = ("re-run bench tune" if q_max is None else
               share_shortfall(slo_share, promise.slo_share, promise.rejected_share, q_max)
               + "; bench tune searched the deployable knobs and none kept it")
        return Finding(name="promise", level="warn",
                       message=f"{msg}: below the SLO share {pct(slo_share)} the plan is sized for; {why}")
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
