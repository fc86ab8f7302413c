"""Each measuring or simulating command's run as a :class:`bench.report.outputs.RunReport`: the
summary its ``--threshold`` s are judged on (metric names carry their unit), the rows its ``--csv``
writes (one file per table, header documented in docs/cli.md) and the figures its ``--html``
embeds. Each summary has exactly the keys :data:`bench.cli.results.METRICS` lists for its command
(the metrics a threshold may name, known when the command line is parsed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report.outputs import RunReport, Table


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def qmax_report(a) -> RunReport:
    from bench.report.plots import qmax_figure

    at_q = next((lv for lv in a.ladder if lv.concurrency == a.q_max), None)
    summary = {
        "q_max": a.q_max, "bracketed": int(a.bracketed),
        "ttfab_p95_ms_at_qmax": at_q.ttfab_p95_ms if at_q else None,
        "throughput_rps_at_qmax": at_q.throughput_rps if at_q else None,
        "service_p95_ms": a.service_time.p95_ms, "service_mean_ms": a.service_time.mean_ms,
        "levels": len(a.ladder), "cloudwatch_ratio": a.cloudwatch_ratio,
    }
    rows = [(lv.concurrency, lv.completed, lv.ok, lv.rejected, lv.errors, lv.ttfab_p50_ms, lv.ttfab_p95_ms, lv.ttfab_p99_ms,
             lv.throughput_rps, lv.client_concurrency_mean, lv.cloudwatch_concurrency_max, int(lv.meets_slo))
            for lv in a.ladder]
    bracket = (f"bracketed: concurrency {a.first_failing_concurrency} failed" if a.bracketed
               else "a lower bound: no level failed")
    return RunReport(
        command="qmax", title=f"bench qmax: {a.model} ({a.transport}) on {a.fingerprint.slug}", summary=summary,
        status="ok" if a.q_max >= 1 else "stop",
        headline=[("Q_max", f"{a.q_max} requests in flight ({bracket})" if a.q_max >= 1
                   else "0: no level met the SLO (a failed run)"),
                  ("SLO", f"p95 TTFAB {a.slo.ttfab_p95_ms:g} ms"),
                  ("Service", f"uncontended mean {a.service_time.mean_ms:.1f} ms, p95 {a.service_time.p95_ms:.1f} ms")],
        tables=[Table("levels", "The ladder, one row per level", LEVEL_HEADER, rows)],
        figures=[("p95 TTFAB vs concurrency, the SLO and Q_max", lambda: qmax_figure(a))],
    )


LEVEL_HEADER = ("concurrency", "completed", "ok", "rejected", "errors", "ttfab_p50_ms", "ttfab_p95_ms", "ttfab_p99_ms",
                "throughput_rps", "client_inflight_mean", "cloudwatch_concurrency_max", "meets_slo")


def ttotal_report(a) -> RunReport:
    from bench.report.plots import ttotal_figure
    from bench.report.text import dominant_phase
    from speech.plan.formulas import planning_t_total
    from speech.schema.config import ReactionPolicy

    d = dominant_phase(a)
    t = planning_t_total(a.measured_total_s, ReactionPolicy())
    rows = [(p.name, p.offset_s, p.source, int(p.bounded), int(p.applicable),
             p.at.isoformat() if p.at is not None else None) for p in a.phases]
    return RunReport(
        command="ttotal", title=f"bench ttotal: {a.model} on {a.fingerprint.slug} ({a.trigger})",
        summary={"t_total_s": a.measured_total_s, "planning_t_total_s": t.planning_s,
                 "dominant_phase_s": d.seconds if d else None, "dominant_phase_share": d.share if d else None},
        headline=[("T_total", f"measured {a.measured_total_s:.1f} s; planning {t.planning_s:.1f} s with the default "
                              f"reaction bound {t.reaction_bound_s:g} s")]
        + ([("Dominant phase", f"{d.name} ({d.what}) {d.seconds:.1f} s = {100 * d.share:.0f}%; shortened by {d.shortens}")]
           if d else []),
        tables=[Table("phases", "Phases, in order", ("phase", "offset_s", "source", "bounded", "applicable", "at"), rows)],
        figures=[("the scale-out phase waterfall", lambda: ttotal_figure(a))],
    )


def copy_report(a) -> RunReport:
    f = a.footprint
    rows = [(i + 1, s.framework_init_s, s.weights_ready_s, s.ready_s, s.source) for i, s in enumerate(a.starts)]
    return RunReport(
        command="tcopy", title=f"bench tcopy: {a.model} on {a.fingerprint.slug}",
        summary={"t_copy_s": a.t_copy_s, "t_copy_p50_s": a.t_copy_p50_s, "t_copy_p95_s": a.t_copy_p95_s,
                 "t_copy_max_s": a.t_copy_max_s, "starts": len(a.starts),
                 "accelerator_memory_mib": f.accelerator_memory_mib, "host_memory_mib": f.host_memory_mib},
        headline=[("T_copy", f"{a.t_copy_s:.2f} s to plan with ({a.planning_statistic} of {len(a.starts)} starts; "
                             f"p50 {a.t_copy_p50_s:.2f} s)"),
                  ("Footprint", f"{f.device}: host {f.host_memory_mib:,.0f} MiB"
                   + (f", accelerator {f.accelerator_memory_mib:,.0f} MiB" if f.accelerator_memory_mib else ""))],
        tables=[Table("starts", "One row per start", ("start", "framework_init_s", "weights_ready_s", "ready_s", "source"), rows)],
    )


def plan_report(p) -> RunReport:
    from bench.report.text import plan_rows

    levels = [f.level for f in p.findings]
    c = p.capacity
    summary = {"stop_findings": levels.count("stop"), "warn_findings": levels.count("warn"), "q_max": p.q_max,
               "c_scale_max": p.thresholds.c_scale_max, "min_instances": p.fleet.min_instances,
               "max_instances": p.fleet.max_instances, "per_instance_rps": c.per_instance_rps,
               "slo_share_at_peak": c.slo_share_at_peak, "refused_share_at_peak": c.refused_share_at_peak,
               "planning_t_total_s": p.t_total.planning_s, "reach_qmax_probability": p.surge.reach_qmax_probability}
    stop = next((f for f in p.findings if f.level == "stop"), None)
    return RunReport(
        command="plan", title=f"bench plan: {p.model} on {p.fingerprint.instance_type} ({p.fingerprint.slug})",
        summary=summary, status=p.verdict,
        headline=[("Verdict", p.verdict.upper() + (f": {stop.name}: {stop.message}" if stop else "")),
                  ("Fleet", f"{p.fleet.min_instances}-{p.fleet.max_instances} instances, target "
                            f"{p.thresholds.scaling_target_value:g} in flight per instance (Q_max {p.q_max})"),
                  ("Inputs", f"SLO {p.inputs.slo_ms:g} ms p95 TTFAB at {100 * p.inputs.slo_share:g}%, peak "
                             f"{p.inputs.peak_rps:g} rps, trough {p.inputs.trough_rps:g} rps, surge x{p.inputs.surge_ratio:g}")],
        tables=[Table("numbers", "Every number with its formula", ("name", "value", "formula"), plan_rows(p)),
                Table("findings", "Findings", ("level", "finding", "message"),
                      [(f.level, f.name, f.message) for f in p.findings])],
    )


def batch_plan_report(p) -> RunReport:
    """A batch plan under the plan's metrics: what a backlog-scaled route has no value for (its
    scale-out target, the SLO-share figures, the surge chance) is empty."""
    from bench.report.text import batch_plan_rows

    levels = [f.level for f in p.findings]
    summary = {"stop_findings": levels.count("stop"), "warn_findings": levels.count("warn"), "q_max": p.q_max,
               "c_scale_max": None, "min_instances": p.min_instances, "max_instances": p.max_instances,
               "per_instance_rps": p.throughput_per_instance_rps, "slo_share_at_peak": None,
               "refused_share_at_peak": None, "planning_t_total_s": p.cold_start.total_s, "reach_qmax_probability": None}
    return RunReport(
        command="plan", title=f"bench plan: batch route {p.model} on {p.fingerprint.instance_type} ({p.fingerprint.slug})",
        summary=summary, status=p.verdict,
        headline=[("Verdict", p.verdict.upper()),
                  ("Fleet", f"{p.min_instances}-{p.max_instances} instances, backlog target "
                            f"{p.backlog_target_per_instance} per instance (Q_max {p.q_max})")],
        tables=[Table("numbers", "Every number with its formula", ("name", "value", "formula"), batch_plan_rows(p)),
                Table("findings", "Findings", ("level", "finding", "message"),
                      [(f.level, f.name, f.message) for f in p.findings])],
    )


def stack_plan_report(stack: str, deployments: dict, allocation) -> RunReport:
    """``bench plan --stack NAME`` over every model: findings counted over the plans and the budget,
    the fleet's floor and cap summed over the models; the per-model figures (Q_max, target, rate,
    shares, T_total) have no single value here and are empty (they are in the ``models`` table)."""
    plans = {n: d.plan for n, d in deployments.items() if d.plan is not None}
    batches = {n: d.batch for n, d in deployments.items() if d.batch is not None}
    findings = [(n, f) for n, p in [*plans.items(), *batches.items()] for f in p.findings]
    findings += [("budget", f) for f in (allocation.findings if allocation is not None else [])]
    levels = [f.level for _, f in findings]
    fleets = {n: (p.fleet.min_instances, p.fleet.max_instances) for n, p in plans.items()}
    fleets |= {n: (b.min_instances, b.max_instances) for n, b in batches.items()}
    rows = []
    for name, dep in deployments.items():
        plan, batch = dep.plan, dep.batch
        lo, hi = fleets.get(name, (dep.min_instances, dep.min_instances))
        rows.append((name, dep.config.priority, plan.verdict if plan else batch.verdict if batch else "unmeasured", lo, hi,
                     plan.q_max if plan else batch.q_max if batch else None,
                     plan.thresholds.c_scale_max if plan else None,
                     plan.capacity.per_instance_rps if plan else batch.throughput_per_instance_rps if batch else None,
                     dep.budget.daily_usd_at_max if dep.budget else None))
    verdicts = [r[2] for r in rows] + ([allocation.verdict] if allocation is not None else [])
    status = "stop" if "stop" in verdicts else "warn" if "warn" in verdicts else "ok"
    summary = {"stop_findings": levels.count("stop"), "warn_findings": levels.count("warn"), "q_max": None,
               "c_scale_max": None, "min_instances": sum(lo for lo, _ in fleets.values()) if fleets else None,
               "max_instances": sum(hi for _, hi in fleets.values()) if fleets else None, "per_instance_rps": None,
               "slo_share_at_peak": None, "refused_share_at_peak": None, "planning_t_total_s": None,
               "reach_qmax_probability": None}
    return RunReport(
        command="plan", title=f"bench plan: stack {stack}, {len(deployments)} model(s)", summary=summary, status=status,
        headline=[("Verdict", status.upper()), ("Models", ", ".join(deployments))]
        + ([("Budget", f"${allocation.daily_budget_usd:,.2f}/day, {allocation.verdict}")] if allocation is not None else []),
        tables=[Table("models", "Every model of the stack", ("model", "priority", "verdict", "min_instances", "max_instances",
                                                              "q_max", "c_scale_max", "per_instance_rps", "daily_usd_at_max"),
                      rows),
                Table("findings", "Findings", ("model", "level", "finding", "message"),
                      [(n, f.level, f.name, f.message) for n, f in findings])],
    )


RESULT_HEADER = ("policy", "within_slo_share", "rejected_share", "ttfab_p95_ms", "ttfab_p99_ms", "violation_minutes",
                 "instance_hours", "cost_usd", "cost_vs_floor", "scale_out_actions", "scale_in_actions", "refused_changes",
                 "flaps", "peak_instances")


def simulation_report(art, runs=None, model=None, plan=None) -> RunReport:
    from speech.sim.artifact import TUNED_ROW

    r = art.seed_result() or art.results[0]
    tuned = art.result(TUNED_ROW)
    summary = {"within_slo_share": r.within_slo_share, "rejected_share": r.rejected_share, "ttfab_p95_ms": r.ttfab_p95_ms,
               "ttfab_p99_ms": r.ttfab_p99_ms, "violation_minutes": r.violation_minutes, "instance_hours": r.instance_hours,
               "cost_vs_floor": r.cost_vs_floor, "flaps": r.flaps, "peak_instances": r.peak_instances,
               "tuned_within_slo_share": tuned.within_slo_share if tuned else None,
               "tuned_instance_hours": tuned.instance_hours if tuned else None}
    rows = [tuple(getattr(x, k) for k in RESULT_HEADER) for x in art.results]
    tables = [Table("policies", "Every policy on the trace", RESULT_HEADER, rows)]
    figures: list = []
    if runs is not None and plan is not None:
        import numpy as np

        from bench.report.plots import cost_vs_slo_figure, timeline_figure
        from speech.sim.fleet import minute_p95_ms

        minute_rows = []
        for run in runs:
            idx = np.arange(run.arrivals.size) // 60
            n = int(idx[-1]) + 1 if idx.size else 0
            offered = np.bincount(idx, run.arrivals, minlength=n)
            rejected = np.bincount(idx, run.rejected, minlength=n)
            serving = np.bincount(idx, run.serving, minlength=n) / np.bincount(idx, minlength=n)
            p95 = np.asarray(minute_p95_ms(run, model), dtype=float) if model is not None else np.full(n, np.nan)
            minute_rows += [(run.policy, m, float(offered[m]), float(rejected[m]), round(float(serving[m]), 3),
                             None if not np.isfinite(p95[m]) else round(float(p95[m]), 3)) for m in range(n)]
        tables.append(Table("minutes", "Every policy minute by minute",
                            ("policy", "minute", "offered", "rejected", "serving_mean", "ttfab_p95_ms"), minute_rows))
        figures = [("every policy over time", lambda: timeline_figure(art, runs, model, plan)),
                   ("cost vs SLO, the plan's SLO share as the target", lambda: cost_vs_slo_figure(art, plan))]
    tr = art.trace
    return RunReport(
        command="simulate", title=f"bench simulate: {art.model} on {tr.spec}", summary=summary,
        headline=[("Plan", f"{r.policy}: {100 * r.within_slo_share:.2f}% within the SLO ({art.slo_ms:g} ms), "
                           f"{100 * r.rejected_share:.2f}% rejected, {r.instance_hours:,.1f} instance-hours")]
        + ([("Tuned plan", f"{100 * tuned.within_slo_share:.2f}% within the SLO, {tuned.instance_hours:,.1f} "
                           "instance-hours")] if tuned else [])
        + [("Trace", f"{tr.duration_s / 3600:.2f} h, {tr.requests:,.0f} requests, busiest minute {tr.peak_rps:,.1f} rps")],
        tables=tables, figures=figures,
    )


def tune_report(a) -> RunReport:
    p, s = a.promise, a.seed
    summary = {"within_slo_share": p.slo_share, "within_slo_share_worst_day": p.within_slo_share_worst_day,
               "rejected_share": p.rejected_share, "instance_hours": p.instance_hours, "cost_vs_floor": p.cost_vs_floor,
               "instance_hours_vs_seed": _share(p.instance_hours, s.instance_hours),
               "checks_failed": sum(1 for c in a.checks if not c.tuned_keeps_share)}
    return RunReport(
        command="tune", title=f"bench tune: {a.model} on {p.trace}", summary=summary, status="ok" if a.held else "stop",
        headline=[("Tuned plan", f"{100 * p.slo_share:.2f}% within the SLO (worst day "
                                 f"{100 * p.within_slo_share_worst_day:.2f}%), {p.instance_hours:,.1f} instance-hours vs the "
                                 f"seed's {s.instance_hours:,.1f}"),
                  ("Held", "on every check" if a.held else "NOT on every check")],
        tables=[Table("knobs", "Each knob, seed and tuned", ("knob", "seed", "tuned", "reason"),
                      [(v.knob, v.seed, v.tuned, v.reason) for v in a.values]),
                Table("checks", "Held-out and perturbed days",
                      ("day", "seed_within_slo_share", "seed_instance_hours", "tuned_within_slo_share",
                       "tuned_instance_hours", "tuned_keeps_share"),
                      [(c.day, c.seed_within_slo_share, c.seed_instance_hours, c.tuned_within_slo_share,
                        c.tuned_instance_hours, int(c.tuned_keeps_share)) for c in a.checks])],
    )


def replay_report(a) -> RunReport:
    n = a.requests
    summary = {"within_slo_share": a.within_slo_share, "rejected_share": _share(a.rejected, n),
               "error_share": _share(a.errors, n), "ttfab_p50_ms": a.ttfab_p50_ms, "ttfab_p95_ms": a.ttfab_p95_ms,
               "ttfab_p99_ms": a.ttfab_p99_ms, "requests": n, "send_late_p99_ms": a.send_late_p99_ms}
    rows = [(r.due_s, r.late_ms, r.ttfab_ms, r.status) for r in a.per_request]
    figures: list[tuple[str, Callable[[], Any] | Path]] = (
        [("TTFAB of every request over the replay", lambda: replay_figure(a))] if a.per_request else [])
    return RunReport(
        command="replay", title=f"bench replay: {a.trace_spec} against {a.target}", summary=summary,
        headline=[("Requests", f"{n:,}: {a.ok:,} ok, {a.rejected:,} rejected, {a.errors:,} errors")]
        + ([("Within the SLO", f"{100 * a.within_slo_share:.2f}% within {a.slo_ms:g} ms")]
           if a.within_slo_share is not None else []),
        tables=[Table("requests", "One row per request", ("due_s", "late_ms", "ttfab_ms", "status"), rows)],
        figures=figures,
    )


def replay_figure(a):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.8), dpi=100)
    ok = [(r.due_s, r.ttfab_ms) for r in a.per_request if r.ttfab_ms is not None]
    bad = [r.due_s for r in a.per_request if r.ttfab_ms is None]
    if ok:
        ax.scatter(*zip(*ok, strict=True), s=4, alpha=0.5, color="tab:blue", label="answered: TTFAB")
    if bad:
        top = max([t for _, t in ok] or [a.slo_ms or 1.0])
        ax.scatter(bad, [top * 1.05] * len(bad), s=8, marker="x", color="tab:red", label="rejected or failed")
    if a.slo_ms:
        ax.axhline(a.slo_ms, color="tab:red", ls=":", lw=1, label=f"SLO {a.slo_ms:g} ms")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the start (due time)")
    ax.set_ylabel("TTFAB, ms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def validate_report(ok: bool, issues: list, live_rows: list[dict], endpoint: str | None) -> RunReport:
    live = [i for i in issues if getattr(i, "kind", "") == "live"]
    first = live_rows[0] if live_rows else None
    gate = live_rows[1] if len(live_rows) > 1 else None
    summary = {"issues": len(issues), "policy_issues": len(issues) - len(live), "live_issues": len(live),
               "live_p95_ms": first["p95_ms"] if first else None, "gate_rejected": gate["rejected"] if gate else None}
    return RunReport(
        command="validate", title=f"bench validate: {endpoint or 'local server'}", summary=summary,
        status="ok" if ok else "stop",
        headline=[("Result", "pass" if ok else f"FAIL: {len(issues)} issue(s)")],
        tables=[Table("issues", "Issues", ("kind", "message"), [(i.kind, i.message) for i in issues]),
                Table("live", "Live checks", ("check", "concurrency", "p95_ms", "rejected", "errors", "cloudwatch_max"),
                      [(r["check"], r["concurrency"], r["p95_ms"], r["rejected"], r["errors"], r.get("cloudwatch_max"))
                       for r in live_rows])],
    )


def observe_report(c) -> RunReport:
    summary = {"findings_not_ok": sum(1 for f in c.findings if f.level != "ok"), "rejected_share": c.rejections.fraction,
               "occupancy_levels_drifted": sum(1 for o in c.occupancy if o.judged and not o.ok),
               "flaps": c.scaling.flaps, "cooldown_violations": c.scaling.cooldown_violations}
    return RunReport(
        command="observe", title=f"bench observe: {c.model} on {c.endpoint} ({c.since})", summary=summary,
        status="ok" if c.verdict == "holds" else "warn",
        headline=[("Verdict", c.verdict.upper())] + [(f.name, f"[{f.level}] {f.message}") for f in c.findings],
        tables=[Table("occupancy", "Observed p95 by occupancy vs the ladder",
                      ("concurrency", "occupancy_mean", "periods", "observed_ttfab_p95_ms", "ladder_ttfab_p95_ms", "judged",
                       "ok"),
                      [(o.concurrency, o.occupancy_mean, o.periods, o.observed_ttfab_p95_ms, o.ladder_ttfab_p95_ms,
                        int(o.judged), int(o.ok)) for o in c.occupancy]),
                Table("scaling", "Scaling activities", ("at", "direction", "desired", "cause"),
                      [(e.at.isoformat(), e.direction, e.desired, e.cause) for e in c.scaling.events])],
    )


def report_of(artifact: Any) -> RunReport | None:
    """The report of an artifact that :func:`bench.report.publish.publish` writes (qmax, ttotal, copy)."""
    reports: dict[str, Callable[[Any], RunReport]] = {"qmax": qmax_report, "ttotal": ttotal_report, "copy": copy_report}
    build = reports.get(str(getattr(artifact, "kind", "")))
    return build(artifact) if build is not None else None
