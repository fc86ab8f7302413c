"""The terminal report of ``bench simulate``: the trace, one row per policy (share within the SLO,
refusals, latency, instance-hours, cost, actions), the legend, the cost gaps, and a tuned plan's
promise against this trace."""

from __future__ import annotations

import math

from bench.report.tuned import promise_check
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.artifact import TUNED_ROW, SimulationArtifact, cost_gaps


def promise_lines(a: SimulationArtifact, tuned: PlanArtifact) -> list[str]:
    """The tuned plan's promise (its own simulation, bench tune) next to this trace's row, and the
    tuned row against the seed's."""

    row, seed, check = a.result(TUNED_ROW), a.seed_result(), promise_check(tuned, a)
    if row is None or check is None:
        return []
    lines = [f"tuned plan: sized for {100 * check.slo_share:.2f}% within the SLO; on this trace "
             f"{100 * row.within_slo_share:.2f}%: " + ("keeps it" if check.kept else f"MISSES it: {check.why}")]
    pr = tuned.promise
    if pr is not None:
        hours = f"{pr.trace_hours:g} h " if pr.trace_hours else ""
        lines.append(f"  promise (bench tune, {hours}training trace {pr.trace_sha256[:12]}, seed {pr.seed}): "
                     f"{100 * pr.slo_share:.2f}% within the SLO, {100 * pr.rejected_share:.2f}% refused, "
                     f"{pr.instance_hours:.1f} inst-h; this trace: {100 * row.within_slo_share:.2f}%, "
                     f"{100 * row.rejected_share:.2f}% rejected, {row.instance_hours:.1f} inst-h")
        if pr.slo_share_low is not None and pr.slo_share_high is not None:
            where = ("BELOW its low end" if check.below_low else
                     "above its high end" if row.within_slo_share > pr.slo_share_high + EPS else "within it")
            lines.append(f"  promised interval over its draws: {100 * pr.slo_share_low:.2f}-{100 * pr.slo_share_high:.2f}% "
                         f"within the SLO, {pr.instance_hours_low:.1f}-{pr.instance_hours_high:.1f} inst-h; this trace is "
                         f"{where}")
        if pr.slo_share_bound is not None:
            # the promise for a draw it did not see is the bound; below the draws' lowest alone is
            # what one draw in n + 1 does (bench.report.tuned.PromiseCheck.below_low)
            lines.append(f"  promised for a draw it did not see: {100 * pr.slo_share_bound:.2f}% within the SLO; this trace "
                         + ("is BELOW that promise" if check.below_bound else "keeps it"))
    else:
        lines.append("  the tuned plan carries no promise (not written by bench tune): nothing to compare with")
    if seed is not None and seed.instance_hours > 0:
        d = row.instance_hours / seed.instance_hours - 1
        lines.append(f"  vs the seed plan: {100 * d:+.1f}% instance-hours, "
                     f"{100 * (row.within_slo_share - seed.within_slo_share):+.2f} points within the SLO")
    return lines


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def render_simulation(a: SimulationArtifact) -> str:
    tr = a.trace
    lines = [
        f"simulation of {a.model}: trace {tr.spec} ({tr.duration_s / 3600:.2f} h, {tr.requests:,.0f} requests, "
        f"peak minute {tr.peak_rps:,.1f} rps{', seed ' + str(tr.seed) if tr.seed is not None else ''})",
        f"SLO {a.slo_ms:g} ms p95 TTFAB; new instances serve after {a.startup_s:.1f} s; planning T_total "
        f"{a.planning_total_s:.1f} s",
    ]
    if tr.attribution:
        lines.append(f"trace: {tr.attribution}")
    if tr.scaling_detail:
        lines.append(f"rate scaling ({tr.scaling}): {tr.scaling_detail}")
    head = ("policy", "in SLO", "rejected", "p95 ms", "p99 ms", "viol min", "inst-h", "cost", "x floor", "out", "in",
            "refused", "flaps", "peak")
    rows = []
    for r in a.results:
        cost = _fmt(r.cost_usd, ",.2f") if r.cost_usd is not None else "-"
        rows.append((
            r.policy, f"{100 * r.within_slo_share:.2f}%", f"{100 * r.rejected_share:.2f}%", _fmt(r.ttfab_p95_ms, ".0f"),
            _fmt(r.ttfab_p99_ms, ".0f"), str(r.violation_minutes), f"{r.instance_hours:,.1f}", cost,
            _fmt(r.cost_vs_floor, ".2f"), str(r.scale_out_actions), str(r.scale_in_actions), str(r.refused_changes), str(r.flaps),
            str(r.peak_instances),
        ))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    fmt_row = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
    lines += ["", fmt_row(head), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in rows]
    lines += [
        "",
        "in SLO: answered within the SLO (a rejected request never is); p95/p99: answered requests; viol min: "
        "minutes with under 95% in SLO; cost without --price-per-hour: instance-hours only; refused: changes asked "
        "for while the endpoint was Updating (SageMaker applies one at a time); flaps: scale-in then scale-out within "
        "the planning T_total; x floor: instance-hours over the floor's",
    ]

    gaps = cost_gaps(a)
    if gaps:
        lines += [""] + gaps
    return "\n".join(lines)
