"""The terminal report of the commands whose result is one artifact (``bench qmax``, ``ttotal``,
``tcopy``, ``copies``, ``capacity``, ``forecast``, ``observe``, ``replay``, ``validate``): what the command prints after
writing it. The plan's own report is
:mod:`bench.report.text`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.report.plots import why_level_failed
from bench.report.text import MARK, dominant_phase
from speech.plan.formulas import planning_t_total
from speech.plan.placement import RESOURCES, describe
from speech.schema.config import ReactionPolicy

LATE_WARN_MS = 50.0
"""A replay whose p99 send lateness is above this understates the offered load (the client fell behind)."""

if TYPE_CHECKING:
    from bench.aws.scaling_check import Issue
    from speech.plan.capacity import CapacityEvaluation
    from speech.plan.fleet import FleetState
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, ReplayArtifact, TtotalArtifact
    from speech.schema.copy_plan import CopyPlan
    from speech.schema.forecast_artifact import ForecastArtifact
    from speech.schema.plan_artifacts import CalibrationArtifact


def copy_plan_rows(p: CopyPlan) -> list[tuple[str, str, str]]:
    """(name, value, rule) rows of the report."""
    t, pk, c, i = p.thresholds, p.packing, p.copies, p.instances
    spec = pk.instance
    out = [
        ("Q_max per copy", f"{p.q_max_per_copy}", "highest ladder level against one copy with p95 TTFAB <= SLO"),
        ("C_scale_max / copy", f"{t.c_scale_max:g}", "(1 - h) x Q_max"),
        ("C_scale_min / copy", f"{t.c_scale_min:g}", "(1 - 2h) x Q_max"),
        ("copy target value", f"{p.scaling.target_value:g}", f"C_scale_max x CloudWatch ratio, {p.scaling.metric_type}"),
        ("T_copy (planning)", f"{p.t_copy.planning_s:.1f} s",
         f"measured {p.t_copy.measured_s:.1f} s + reaction {p.t_copy.reaction_bound_s:g} s"),
    ]
    if p.t_total is not None:
        out.append(("T_total (planning)", f"{p.t_total.planning_s:.1f} s", "a new instance, for comparison"))
    out += [
        ("scale-out cooldown", f"{p.cooldowns.scale_out_s} s", "clamp(T_copy / 2, 10, 30)"),
        ("scale-in cooldown", f"{p.cooldowns.scale_in_s} s", "max(300, 3 x planning T_copy)"),
        ("copies at peak", f"{c.at_peak}",
         f"ceil({p.inputs.peak_rps:g} rps / X_copy(C_scale_max) {p.capacity.throughput_at_target_rps:.2f})"),
        ("copies min..max", f"{c.min_copies}..{c.max_copies}", "floor (0 = scale to zero) .. peak need"),
        ("copies per instance", f"{pk.copies_per_instance}", f"{spec.instance_type}, limited by {pk.limited_by.replace('_', ' ')}"),
    ]
    if pk.accelerator_devices_per_copy is not None:
        out.append(("devices per copy", f"{pk.accelerator_devices_per_copy}",
                    f"ceil({pk.reserved_accelerator_memory_mib:g} MiB / {spec.accelerator_memory_mib} MiB per {spec.accelerator})"))
    out += [
        ("instances min..max", f"{i.min_instances}..{i.max_instances}", "managed instance scaling: copies / copies per instance"),
        ("compute requirements", ", ".join(f"{k}={v:g}" for k, v in p.compute.aws().items()),
         f"footprint x (1 + {p.inputs.footprint_margin:g})"),
    ]
    return out


def render_copy_plan(p: CopyPlan) -> str:
    """``bench copies``: every number of the copy plan with its rule, the findings, the verdict."""
    r = copy_plan_rows(p)
    wn = max(len(x[0]) for x in r)
    wv = max(len(x[1]) for x in r)
    lines = [f"copy plan for {p.model} on {p.packing.instance.instance_type} (measured on {p.fingerprint.slug}), "
             f"origin {p.provenance.origin}", ""]
    lines += [f"  {n:<{wn}}  {v:>{wv}}   {rule}" for n, v, rule in r]
    lines += ["", "findings:"] + [f"  [{MARK[f.level]}] {f.name}: {f.message}" for f in p.findings]
    lines += ["", f"verdict: {p.verdict.upper()}"]
    return "\n".join(lines)


def render_copy(a: CopyArtifact) -> str:
    """``bench tcopy``: each start's phases, T_copy's statistics and one copy's footprint."""
    rows = [f"T_copy for {a.model} on {a.fingerprint.slug} ({len(a.starts)} starts)",
            "start  framework_init s  weights_ready s  ready (/ping 200) s  warm-up s"]
    for i, s in enumerate(a.starts, 1):
        fw = f"{s.framework_init_s:16.3f}" if s.framework_init_s is not None else "             n/a"
        rows.append(f"{i:>5}  {fw}  {s.weights_ready_s:15.3f}  {s.ready_s:18.3f}  {s.warmup_s:9.3f}")
    rows.append(f"T_copy p50 {a.t_copy_p50_s:.3f} s, p95 {a.t_copy_p95_s:.3f} s, max {a.t_copy_max_s:.3f} s; "
                f"planning T_copy = {a.planning_statistic} = {a.t_copy_s:.3f} s")
    fp = a.footprint
    line = f"footprint: {fp.device}, peak host memory {fp.host_memory_mib:.0f} MiB"
    if fp.accelerator_memory_mib is not None:
        line += f", accelerator memory {fp.accelerator_memory_mib:.0f} MiB ({fp.accelerator_memory_source})"
    rows.append(line + f"; copies are packed by {fp.packing_memory_mib:.0f} MiB each")
    return "\n".join(rows)


def render_calibration(c: CalibrationArtifact) -> str:
    """``bench observe``: occupancy against the ladder, the findings, the verdict and what to do."""
    rows = [f"calibration of {c.model} on {c.endpoint}: {c.window_start:%Y-%m-%d %H:%M} to {c.window_end:%H:%M} UTC "
            f"({c.since}), plan Q_max {c.q_max}, C_scale_max {c.c_scale_max:g}, SLO {c.slo_ms:g} ms",
            "", "occupancy  periods  observed p95 ms  ladder p95 ms  judged"]
    for o in c.occupancy:
        obs = f"{o.observed_ttfab_p95_ms:.1f}" if o.observed_ttfab_p95_ms is not None else "-"
        rows.append(f"{o.occupancy_mean:9.2f}  {o.periods:7d}  {obs:>15}  {o.ladder_ttfab_p95_ms:13.1f}  "
                    f"{('ok' if o.ok else 'DRIFTED') if o.judged else 'too few periods'}")
    rows.append("")
    rows += [f"  [{'ok  ' if f.level == 'ok' else f.level.upper()}] {f.name}: {f.message}" for f in c.findings]
    rows += ["", f"verdict: {c.verdict.upper()}"]
    for r in c.recommendations:
        rows.append(f"  - {r.message}")
        if r.command:
            rows.append(f"    {r.command}")
    return "\n".join(rows)


def render_qmax(a: QmaxArtifact) -> str:
    rows = ["concurrency  completed  ok  p50 ms  p95 ms  p99 ms  rps  in-flight  cw max  meets"]
    for lv in a.ladder:
        cw = f"{lv.cloudwatch_concurrency_max:g}" if lv.cloudwatch_concurrency_max is not None else "-"
        rows.append(
            f"{lv.concurrency:>11}  {lv.completed:>9}  {lv.ok:>2}  {lv.ttfab_p50_ms:6.1f}  {lv.ttfab_p95_ms:6.1f}  "
            f"{lv.ttfab_p99_ms:6.1f}  {lv.throughput_rps:.2f}  {lv.client_concurrency_mean:9.2f}  {cw:>6}  "
            f"{'yes' if lv.meets_slo else 'no'}"
        )
    bracket = f"bracketed ({a.first_failing_concurrency} fails)" if a.bracketed else "NOT bracketed (lower bound only)"
    rows.append(
        f"Q_max = {a.q_max}, {bracket}; service time mean {a.service_time.mean_ms:.1f} ms, p95 "
        f"{a.service_time.p95_ms:.1f} ms (concurrency 1); CloudWatch/client ratio {a.cloudwatch_ratio:g} "
        f"({a.cloudwatch_ratio_source.replace('_', ' ')}); {a.instances or '?'} instance(s)"
    )
    if a.client_overhead:
        rows.append(f"client overhead: event-loop lag p99 {a.client_overhead.loop_lag_p99_ms:.2f} ms, "
                    f"CPU {100 * (a.client_overhead.cpu_fraction or 0):.0f}% of one core")
    return "\n".join(rows)


def no_qmax_message(a: QmaxArtifact) -> str:
    """Why Q_max is 0, with the lowest level's figures, and what to change."""

    lv = a.ladder[0]
    slo = a.slo.ttfab_p95_ms
    fix = (f"an SLO above the uncontended p95 (--slo-ms {max(slo, lv.ttfab_p95_ms) * 1.25:.0f} or more), or a faster "
           "instance or image" if lv.ttfab_p95_ms > slo else
           "the server's capacity: it refused or failed requests at one in flight (check its logs and queue depth)")
    return (f"FAILED: Q_max = 0: no level met the SLO {slo:g} ms. The lowest level, concurrency {lv.concurrency}: "
            f"p50 {lv.ttfab_p50_ms:.1f} ms, p95 {lv.ttfab_p95_ms:.1f} ms, {lv.ok} ok of {lv.completed}, "
            f"{lv.rejected} rejected, {lv.errors} errors ({why_level_failed(lv, slo)}). "
            f"Change {fix}, then re-run bench qmax.")


def t_total_line(a: TtotalArtifact) -> str:
    """measured + reaction = planning, computed by the plan's own function (default reaction policy)."""

    policy = ReactionPolicy()
    t = planning_t_total(a.measured_total_s, policy)
    return (f"measured {t.measured_s:.3f} s + reaction bound {t.reaction_bound_s:g} s (period {policy.metric_period_s} s x "
            f"{policy.datapoints_to_alarm} datapoints + scale-out cooldown) = planning {t.planning_s:.3f} s, as bench plan "
            "computes it with the default reaction policy")


def render_ttotal(a: TtotalArtifact) -> str:
    rows = [f"T_total for {a.model} ({a.trigger}) on {a.fingerprint.slug}", "phase               offset s  bounded  source"]
    for p in a.phases:
        off = f"{p.offset_s:8.3f}" if p.offset_s is not None else "     n/a"
        rows.append(f"{p.name:<18}  {off}  {'yes' if p.bounded else 'no ':<7}  {p.source}")
    rows.append(t_total_line(a))
    d = dominant_phase(a)
    if d is not None:
        rows.append(f"dominant phase: {d.name} ({d.what}), {d.seconds:.1f} s = {100 * d.share:.0f}% of the measured "
                    f"T_total; shortened by {d.shortens}")
    return "\n".join(rows)


def render_forecast(a: ForecastArtifact) -> str:
    s = a.schedule
    prov = s.forecast if s is not None else None
    lines = [f"bench forecast: {a.history} ({a.history_hours:g} h of history)"]
    if prov is not None:
        naive = prov.backtest_loss.get("seasonal-naive")
        mine = prov.backtest_loss.get(prov.model)
        losses = ", ".join(f"{k} {v:.2f}" for k, v in prov.backtest_loss.items())
        verdict = ("seasonal-naive kept: no model beat it" if prov.model == "seasonal-naive" else
                   f"{prov.model} beats seasonal-naive ({mine:.2f} < {naive:.2f})")
        lines += [f"model: {prov.model} at the {prov.quantile:g} quantile; backtest pinball loss (requests/s): {losses}: {verdict}",
                  f"valid until {prov.valid_until} (history ends {prov.history_end}); refresh: {prov.refresh}"]
    if s is None:
        lines.append("no minute of the forecast needs more than the plan's floor: no floors written")
        return "\n".join(lines)
    kind = "weekly" if s.weekly else "daily"
    lines.append(f"{len(s.floors)} {kind} scheduled floors ({s.timezone}), capacity {a.lead_s:g} s ahead at {a.per_instance_rps:g} "
                 "requests/s an instance:")
    lines.append("  " + ", ".join(f"{f.when} {f.min_instances}" for f in s.floors))
    return "\n".join(lines)


def render_capacity(ev: CapacityEvaluation, fleet: FleetState) -> None:
    """Tables for a person: the fleet before and after, the parts and when they serve, findings."""

    console = Console()
    m = fleet.models[ev.model]
    console.print(
        f"[bold]{escape(ev.model)}[/]: +{ev.delta_concurrency:g} in flight = {ev.copies_needed} "
        f"cop{'y' if ev.copies_needed == 1 else 'ies'} of {describe(m.request)} at {ev.concurrency_per_copy:g} in flight each"
    )
    placed = {p.instance: p for p in ev.placements}
    shown = [r for r, need in zip(RESOURCES, m.request, strict=True) if need > 0]
    heading = {"accelerator_memory_mib": "accel. MiB free", "cpu_cores": "cores free", "host_memory_mib": "host MiB free"}
    t = Table(title=f"running instances ({fleet.placement} placement)")
    for col in ("instance", "type", "copies added", *(heading[r] for r in shown)):
        t.add_column(col, justify="left" if col in ("instance", "type") else "right")
    for inst in fleet.candidates(ev.model):
        p = placed.get(inst.name)
        cells = []
        for r in shown:
            before = getattr(inst.free, r)
            after = getattr(p.free_after, r) if p else before
            cells.append(f"{before:g} -> {after:g}" if p else f"{before:g}")
        t.add_row(inst.name, inst.instance_type, str(p.copies) if p else "0", *cells)
    console.print(t)
    s = Table(title="serving")
    for col in ("part", "copies", "in flight", "serving after"):
        s.add_column(col, justify="left" if col == "part" else "right")
    for part in ev.serving:
        s.add_row(part.part, str(part.copies), f"{part.concurrency:g}", f"{part.serving_after_s:g} s")
    if ev.new_instances:
        s.caption = f"{ev.new_instances} new instance(s), {ev.copies_per_new_instance} copies each"
    console.print(s)
    mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]WARN[/]", "stop": "[red]STOP[/]"}
    for f in ev.findings:
        console.print(f"{mark[f.level]} {f.name}: {escape(f.message)}", highlight=False)
    console.print(f"verdict: {ev.verdict}")


def render_replay(art: ReplayArtifact) -> str:
    """``bench replay``: the requests' outcome, TTFAB percentiles and share within the SLO, how late
    the client sent (a warning past 50 ms p99), the engine's workers."""
    lines: list[str] = []
    p = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
    lines.append(f"{art.requests} requests: {art.ok} ok, {art.rejected} rejected ({100 * art.rejected / art.requests:.2f}%), "
                 f"{art.errors} errors")
    lines.append(f"TTFAB p50 / p95 / p99: {p(art.ttfab_p50_ms)} / {p(art.ttfab_p95_ms)} / {p(art.ttfab_p99_ms)} ms"
                 + (f"; within SLO {100 * art.within_slo_share:.2f}%" if art.within_slo_share is not None else ""))
    warn = "  (client fell behind: results understate the offered load)" if art.send_late_p99_ms > LATE_WARN_MS else ""
    lines.append(f"sent late p99 {art.send_late_p99_ms:.1f} ms{warn}")
    if art.engine == "locust":
        lines.append(f"engine locust, {art.workers} worker(s); {art.requests} of {art.scheduled} scheduled requests measured")
    for dead in art.dead_workers:
        lines.append(f"dead worker: {dead}")
    return "\n".join(lines)


def render_validation(issues: list[Issue], live_rows: list[dict]) -> str:
    """``bench validate``: each issue with its kind, each live check's row, the verdict."""
    lines = [f"[{i.kind}] {i.message}" for i in issues]
    for row in live_rows:
        cw = (f", CloudWatch max {row['cloudwatch_max']:g} at {row['client_inflight_per_instance']:g} in flight per "
              f"instance" if row.get("cloudwatch_max") is not None else f", {row['cloudwatch']}" if "cloudwatch" in row else "")
        lines.append(f"live {row['check']}: concurrency {row['concurrency']}, p95 {row['p95_ms']:.1f} ms, "
                     f"rejected {row['rejected']}, errors {row['errors']}{cw}")
    lines.append("validate: pass" if not issues else f"validate: FAIL ({len(issues)} issue(s))")
    return "\n".join(lines)
