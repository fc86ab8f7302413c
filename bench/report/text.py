"""Human-readable plan report: every number with its name and formula, every finding with why."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a command's --help imports this module without pydantic's models
    from pathlib import Path

    from speech.deploy.gate import ModelDeployment
    from speech.plan.batch import BatchPlan
    from speech.schema.artifacts import TtotalArtifact
    from speech.schema.config import ArtifactRef
    from speech.schema.plan_artifacts import BudgetAllocation, PlanArtifact

MARK = {"ok": "ok  ", "warn": "WARN", "stop": "STOP"}


def target_rule(p: PlanArtifact) -> str:
    """Which rule set C_scale_max: a tuned share, the SLO share's occupancy, or the surge rule."""
    h = p.inputs.surge_ratio - 1
    if p.inputs.target_share is not None:
        return f"target_share {p.inputs.target_share:g} x Q_max (tuned)"
    if p.thresholds.c_scale_max < (1 - h) * p.q_max - 1e-3:
        return (f"mean in flight at the SLO-share rate (< (1 - h) x Q_max = {(1 - h) * p.q_max:g}: an instance held "
                "there would refuse more than the share allows)")
    return f"(1 - h) x Q_max = {1 - h:g} x {p.q_max}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def plan_rows(p: PlanArtifact) -> list[tuple[str, str, str]]:
    """(name, value, formula) rows shared by the terminal and the HTML report."""
    i, t, f, c, tt, a = p.inputs, p.thresholds, p.fleet, p.cooldowns, p.t_total, p.alarms
    h = i.surge_ratio - 1
    ratio = t.scaling_target_value / t.c_scale_max if t.c_scale_max else 1.0
    cap = p.capacity
    per = cap.per_instance_rps or cap.throughput_at_target_rps
    sizing = [] if cap.slo_rate_rps is None and cap.per_instance_rps is None else [
        ("SLO-share rate", f"{cap.slo_rate_rps:.3f} rps" if cap.slo_rate_rps is not None else "none",
         f"highest Poisson rate per instance keeping {100 * i.slo_share:g}% within the SLO (gated chain)"),
        ("per-instance rate", f"{per:.3f} rps", "rate the chain holds at C_scale_max, <= X(C_scale_max)"),
        ("within SLO / refused at peak", f"{_pct(cap.slo_share_at_peak)} / {_pct(cap.refused_share_at_peak)}",
         f"peak {i.peak_rps:g} rps over {f.max_instances}"),
        ("within SLO / refused at trough", f"{_pct(cap.slo_share_at_trough)} / {_pct(cap.refused_share_at_trough)}",
         f"trough {i.trough_rps:g} rps over {f.min_instances}"),
    ]
    step = [] if p.scale_in is None else [
        ("scale-in step", f"{p.scale_in.step_percent}% (>= {p.scale_in.min_removed})",
         f"share {p.scale_in.step_share:.4g} of the fleet; safe <= 1 - C_scale_min/C_scale_max = "
         f"{p.scale_in.max_safe_share:.4g}"),
    ]
    return [
        ("h (headroom)", f"{h:g}", f"surge_ratio - 1 = {i.surge_ratio:g} - 1"),
        ("Q_max", f"{p.q_max}", "highest ladder level with p95 TTFAB <= SLO (measured)"
         + (f" x qmax_derate {i.qmax_derate:g}, floored" if i.qmax_derate < 1 else "")),
        ("C_scale_max", f"{t.c_scale_max:g}", target_rule(p)),
        ("C_scale_min", f"{t.c_scale_min:g}", f"C_scale_max x (1 - 2h) / (1 - h) (= (1 - 2h) x Q_max {(1 - 2 * h) * p.q_max:g} "
         "at the seed target)"),
        ("W_max", f"{t.w_max_s:.3f} s", f"SLO - S_p95 = {i.slo_ms:g} ms - uncontended p95"),
        ("scaling_target_value", f"{t.scaling_target_value:g}", f"C_scale_max x CloudWatch/client ratio {ratio:g}"),
        ("scale_in_threshold", f"{t.scale_in_threshold:g}", f"C_scale_min x CloudWatch/client ratio {ratio:g}"),
        ("scale_out_cooldown", f"{c.scale_out_s} s", "tuned (bench tune)" if i.scale_out_cooldown_s is not None
         else f"clamp(T_measured / 2, 10, 30) = clamp({tt.measured_s:.1f} / 2)"),
        (
            "reaction bound",
            f"{tt.reaction_bound_s:g} s",
            f"period {a.metric_period_s} s x {a.datapoints_to_alarm} datapoints + {c.scale_out_s} s cooldown",
        ),
        ("T_total (planning)", f"{tt.planning_s:.1f} s", f"measured {tt.measured_s:.1f} s + reaction {tt.reaction_bound_s:g} s"),
        ("scale_in_cooldown", f"{c.scale_in_s} s", "tuned, >= max(window, T_total)" if i.scale_in_cooldown_s is not None
         else f"max(300, 3 x T_total) = max(300, 3 x {tt.planning_s:.1f})"),
        ("queue_max_depth", f"{p.queue_max_depth}", "Q_max, enforced by the container (503 queue_saturated)"),
        ("min_instances", f"{f.min_instances}", f"max(floor {i.min_instances}, trough {i.trough_rps:g} rps / {per:.2f} rps)"),
        (
            "max_instances",
            f"{f.max_instances}",
            f"peak {i.peak_rps:g} rps / per-instance rate {per:.2f} rps (X(C_scale_max) {cap.throughput_at_target_rps:.2f})",
        ),
        *sizing,
        ("min_safe_instances", f"{f.min_safe_instances}", "smallest N with N/(N-1) <= C_scale_max/C_scale_min"),
        ("utilization at target", f"{100 * p.surge.utilization:.1f}%", "lambda / X_sat, lambda giving mean occupancy C_scale_max"),
        (
            "P(reach Q_max in T_total)",
            f"{100 * p.surge.reach_qmax_probability:.1f}%",
            f"birth-death chain on the measured X(n), traffic x{i.surge_ratio:g} ramp",
        ),
        ("TTFAB alarm", f"{a.ttfab_p95_alarm_ms:.1f} ms", "measured uncontended p95 TTFAB (concurrency 1)"),
        ("saturation alarm", f"{a.saturation_concurrency:g}", "Q_max x CloudWatch/client ratio"),
        (
            "scale-in window",
            f"{a.scale_in_evaluation_periods} x {a.metric_period_s} s",
            "periods at or below C_scale_min before a scale-in step",
        ),
        *step,
    ]


def tuning_lines(p: PlanArtifact) -> list[str]:
    """Tuned values next to their seed formulas, with the reason; the promise, when there is one."""
    out: list[str] = []
    if p.tuning:
        out += ["", "tuned (seed -> value, why):"]
        out += [f"  {v.name}: {v.seed:g} -> {v.value:g} {v.unit}: {v.reason}" for v in p.tuning]
    if p.schedule is not None:
        out += ["", f"scheduled floors ({p.schedule.timezone}, {'weekly' if p.schedule.weekly else 'daily'}):"]
        out += ["  " + ", ".join(f"{f.when} -> {f.min_instances}" for f in p.schedule.floors)]
    if p.promise is not None:
        pr = p.promise
        out += ["", "promise (simulated):",
                f"  {100 * pr.slo_share:.2f}% within the SLO, {100 * pr.rejected_share:.2f}% refused, "
                f"{pr.instance_hours:.1f} instance-hours, {pr.cost_vs_floor:.2f}x the floor"
                + ("" if pr.slo_share_low is None or pr.slo_share_high is None else
                   f"; over its draws {100 * pr.slo_share_low:.2f}-{100 * pr.slo_share_high:.2f}% within the SLO, "
                   f"{pr.instance_hours_low:.1f}-{pr.instance_hours_high:.1f} instance-hours"),
                f"  trace sha256 {pr.trace_sha256}, seed {pr.seed}, simulator {pr.simulator_version}"]
    else:
        out += ["", "promise: none (advisory plan: no simulation recorded; bench tune makes one)"]
    return out


def render_plan(p: PlanArtifact) -> str:
    rows = plan_rows(p)
    w_name = max(len(r[0]) for r in rows)
    w_val = max(len(r[1]) for r in rows)
    lines = [
        f"plan for {p.model} on {p.fingerprint.instance_type} ({p.fingerprint.slug}), origin {p.provenance.origin}",
        f"inputs: SLO {p.inputs.slo_ms:g} ms p95 TTFAB, surge x{p.inputs.surge_ratio:g}, "
        f"peak {p.inputs.peak_rps:g} rps, trough {p.inputs.trough_rps:g} rps, floor {p.inputs.min_instances}",
        "",
    ]
    lines += [f"  {n:<{w_name}}  {v:>{w_val}}   {fm}" for n, v, fm in rows]
    lines += tuning_lines(p)
    lines += ["", "findings:"]
    lines += [f"  [{MARK[f.level]}] {f.name}: {f.message}" for f in p.findings]
    lines += ["", f"verdict: {p.verdict.upper()}" + ("  (no scaling will be deployed)" if p.verdict == "stop" else "")]
    return "\n".join(lines)


def batch_plan_rows(p: BatchPlan) -> list[tuple[str, str, str]]:
    """(name, value, formula) rows of a batch plan, as :func:`plan_rows` for a real-time one."""
    i, c = p.inputs, p.cold_start
    x = p.throughput_per_instance_rps
    return [
        ("Q_max", f"{p.q_max}", "highest ladder level with p95 TTFAB <= SLO (measured)"),
        ("MaxConcurrentInvocations", f"{p.max_concurrent_invocations_per_instance}", "per instance = Q_max"),
        ("X(Q_max)", f"{x:.2f} rps", "ladder throughput at Q_max in flight: one instance with a backlog"),
        ("cold start", f"{c.total_s:.1f} s", f"wake alarm {c.wake_reaction_s:g} s + measured T_total {c.measured_total_s:.1f} s"),
        ("drain budget", f"{p.drain_budget_s:.1f} s", f"max_delay_s {i.max_delay_s:g} - cold start"),
        ("backlog target", f"{p.backlog_target_per_instance}", "ApproximateBacklogSizePerInstance = floor(X x drain budget)"),
        ("peak instances", f"{p.peak_instances}", f"ceil(peak {i.peak_rps:g} rps / X)"),
        ("min / max instances", f"{p.min_instances} / {p.max_instances}",
         "scales to zero when idle; max = peak instances" + (f", capped at {i.max_instances_cap}" if i.max_instances_cap else "")),
        ("scale-out cooldown", f"{p.cooldowns.scale_out_s} s", "max(60, ceil(T_total)): one step per start-up"),
        ("scale-in cooldown", f"{p.cooldowns.scale_in_s} s", "max(300, 3 x cold start)"),
        ("wake", f"+{p.wake.instances_added}", f"HasBacklogWithoutCapacity >= 1 for {p.wake.datapoints_to_alarm} x "
         f"{p.wake.period_s} s"),
    ]


def render_batch_plan(p: BatchPlan) -> str:
    """The batch plan as the plan report shows a real-time one: each number with its rule."""
    i = p.inputs
    rows = batch_plan_rows(p)
    w_name = max(len(r[0]) for r in rows)
    w_val = max(len(r[1]) for r in rows)
    lines = [f"batch plan for {p.model} on {p.fingerprint.instance_type} ({p.fingerprint.slug}), origin "
             f"{p.provenance.origin}",
             f"inputs: max delay {i.max_delay_s:g} s, peak {i.peak_rps:g} rps, trough {i.trough_rps:g} rps", ""]
    lines += [f"  {n:<{w_name}}  {v:>{w_val}}   {fm}" for n, v, fm in rows]
    lines += ["", "findings:"]
    lines += [f"  [{MARK[f.level]}] {f.name}: {f.message}" for f in p.findings]
    lines += ["", f"verdict: {p.verdict.upper()}" + ("  (no scaling will be deployed)" if p.verdict == "stop" else "")]
    return "\n".join(lines)


# --- T_total: the phase that dominates a scale-out ----------------------------------------------

PHASE_ADVICE: dict[str, tuple[str, str]] = {
    "instance_logging": ("instance provisioning and image pull",
                         "a smaller image (slim base, no build tools, weights outside the image) or a higher instance floor"),
    "container_started": ("image extraction and container start", "a smaller image with fewer, smaller layers"),
    "framework_init": ("framework import and initialisation", "import less at start-up; initialise the runtime once"),
    "weights_ready": ("loading the weights",
                      "weights from S3 in the endpoint's region (or in the model data), smaller or quantized weights"),
    "warmup_done": ("warm-up", "fewer or shorter warm-up passes"),
    "ready": ("readiness after warm-up", "report ready as soon as warm-up ends"),
    "in_service": ("the health check until SageMaker routes traffic",
                   "answer /ping 200 the moment the model is ready, with nothing slow behind it"),
    "traffic_recovered": ("traffic shifting and the backlog draining", "a larger surge step, so queues drain sooner"),
}
"""Phase (named by the step that ends it) -> (what the time is spent on, what shortens it)."""


@dataclass(frozen=True)
class DominantPhase:
    name: str
    seconds: float
    share: float
    """Of the measured T_total."""
    what: str
    shortens: str


def dominant_phase(a: TtotalArtifact) -> DominantPhase | None:
    """The longest step between consecutive applicable phases (named by the phase that ends it)."""
    phases = [p for p in a.phases if p.applicable and p.offset_s is not None]
    steps = [(b.name, b.offset_s - prev.offset_s) for prev, b in zip(phases, phases[1:], strict=False)]  # type: ignore[operator]
    if not steps:
        return None
    name, seconds = max(steps, key=lambda s: s[1])
    what, shortens = PHASE_ADVICE.get(name, (name, "see the phase's source"))
    return DominantPhase(name, round(seconds, 3), seconds / a.measured_total_s, what, shortens)


def render_stack_plan(stack: str, deployments: dict[str, ModelDeployment], allocation: BudgetAllocation | None) -> str:
    """``bench plan --stack NAME`` (every model re-planned): one line per model, then the budget."""
    lines = [f"stack {stack!r}: {len(deployments)} model(s)", ""]
    head = f"  {'model':<18} {'priority':<9} {'verdict':<8} {'fleet':>9} {'peak':>6} {'USD/day at max':>15}  scaling"
    lines.append(head)
    for name, dep in deployments.items():
        plan, batch, alloc = dep.plan, dep.batch, dep.budget
        fleet = (f"{plan.fleet.min_instances}..{plan.fleet.max_instances}" if plan
                 else f"{batch.min_instances}..{batch.max_instances}" if batch else f"{dep.min_instances} fixed")
        peak = (str(alloc.peak_instances) if alloc else str(plan.fleet.max_instances) if plan
                else str(batch.peak_instances) if batch else "-")
        usd = f"{alloc.daily_usd_at_max:,.2f}" if alloc else "-"
        verdict = plan.verdict if plan else batch.verdict if batch else "unmeasured"
        lines.append(f"  {name:<18} {dep.config.priority:<9} {verdict:<8} {fleet:>9} {peak:>6} {usd:>15}  "
                     f"{'on' if dep.gate.enabled else 'off'} ({dep.gate.code})")
    if allocation is not None:
        lines += ["", f"daily budget ${allocation.daily_budget_usd:,.2f}: required (critical at peak, others at floor) "
                  f"${allocation.required_daily_usd:,.2f}, at maximum scale ${allocation.total_daily_usd:,.2f}"]
        for f in allocation.findings:
            lines.append(f"  [{MARK[f.level]}] {f.name}: {f.message}")
        lines.append(f"budget verdict: {allocation.verdict.upper()}")
    else:
        lines += ["", "no daily budget (speech-endpoints:budget): every model scales to its plan"]
    return "\n".join(lines)


def stack_plan_json(stack: str, deployments: dict[str, ModelDeployment], allocation: BudgetAllocation | None) -> str:
    """``bench plan --stack NAME --json``: every model's plan (real-time and batch) and the allocation."""
    plans = {n: d.plan for n, d in deployments.items() if d.plan is not None}
    batches = {n: d.batch for n, d in deployments.items() if d.batch is not None}
    return json.dumps({
        "stack": stack,
        "plans": {n: json.loads(p.model_dump_json()) for n, p in plans.items()},
        "batch_plans": {n: json.loads(b.model_dump_json()) for n, b in batches.items()},
        "budget": json.loads(allocation.model_dump_json()) if allocation is not None else None,
    }, indent=2)


def render_migration(stack: str, path: Path, bytes_before: int, bytes_after: int,
                     changes: list[tuple[str, ArtifactRef, Path | None]], as_json: bool) -> str:
    """``bench plan --stack NAME --migrate-config``: each embedded artifact now a reference (key ->
    path, sha256, whether its file was written), the file's size before and after."""
    if as_json:
        return json.dumps({"stack": stack, "file": str(path), "bytes_before": bytes_before, "bytes_after": bytes_after,
                           "references": [{"key": k, "path": r.path, "sha256": r.sha256, "written": w is not None}
                                          for k, r, w in changes]}, indent=2)
    if not changes:
        return f"{path}: no embedded artifact; nothing to migrate"
    lines = [f"{key} -> {ref.path} ({ref.sha256}){' written' if written else ', already in the repository'}"
             for key, ref, written in changes]
    lines.append(f"\nwrote {path}: {bytes_before:,} -> {bytes_after:,} bytes; the stack loads to the same config. "
                 "Commit the artifact files with it")
    return "\n".join(lines)
