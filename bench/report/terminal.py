"""The terminal report of the commands whose result is one artifact (``bench copies``, ``tcopy``,
``observe``): what the command prints after writing it. The plan's own report is
:mod:`bench.report.text`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.report.text import MARK

if TYPE_CHECKING:
    from speech.schema.artifacts import CopyArtifact
    from speech.schema.copy_plan import CopyPlan
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
