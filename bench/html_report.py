"""One self-contained HTML page: ladder plot, phase waterfall, plan numbers with formulas, findings
and policy verdicts. Images are embedded (base64) so the page can be mailed or attached to CI."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Iterable

from speech.artifacts import PlanArtifact, QmaxArtifact, TtotalArtifact
from speech.files import atomic_write_text

from .report import plan_rows

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.warn{color:#9a6700;font-weight:600}.stop,.mandatory{color:#cf222e;font-weight:600}
.advisory{color:#9a6700;font-weight:600}.badge{display:inline-block;padding:.15em .6em;border-radius:1em;color:#fff}
.badge.ok{background:#1a7f37}.badge.warn{background:#bf8700}.badge.stop{background:#cf222e}
img{max-width:100%;border:1px solid #eee}.muted{color:#666;font-size:.9em}code{background:#f6f8fa;padding:0 .3em}
"""


@dataclass(frozen=True)
class PolicyViolation:
    level: str
    """mandatory | advisory."""
    policy: str
    resource: str
    message: str


def _img(path: Path | None, alt: str) -> str:
    if path is None or not Path(path).exists():
        return f'<p class="muted">({html.escape(alt)}: no image)</p>'
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: Iterable[str], rows: Iterable[Iterable[object]], num_cols: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="num"' if i in num_cols else ""
            cells.append(f"<td{cls}>{v if isinstance(v, Markup) else html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


class Markup(str):
    """Already-escaped HTML."""


def render_report(
    *,
    plan: PlanArtifact,
    qmax: QmaxArtifact,
    ttotal: TtotalArtifact,
    ladder_png: Path | None = None,
    waterfall_png: Path | None = None,
    violations: list[PolicyViolation] | None = None,
    policy_ran: bool = False,
    policy_note: str | None = None,
    next_steps: Iterable[str] = (),
    title: str = "speech-endpoints: measured autoscaling",
) -> str:
    v = plan.verdict
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Model <b>{html.escape(plan.model)}</b> on <code>{html.escape(plan.fingerprint.instance_type)}</code> "
        f"(<code>{html.escape(plan.fingerprint.slug)}</code>), origin <b>{html.escape(plan.provenance.origin)}</b>. "
        f"Plan verdict <span class='badge {v}'>{v.upper()}</span> &middot; Q_max <b>{plan.q_max}</b> &middot; "
        f"T_total <b>{plan.t_total.planning_s:.1f} s</b> &middot; target <b>{plan.thresholds.scaling_target_value:g}</b>"
        f" / scale-in <b>{plan.thresholds.scale_in_threshold:g}</b> &middot; fleet "
        f"<b>{plan.fleet.min_instances}-{plan.fleet.max_instances}</b></p>",
        f"<p class='muted'>Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.</p>",
        "<h2>Q_max: the concurrency ladder</h2>",
        _img(ladder_png, "p95 TTFAB vs concurrency"),
        _table(
            ["concurrency", "completed", "ok", "rejected", "errors", "p50 ms", "p95 ms", "p99 ms", "rps", "meets SLO"],
            [
                (
                    lv.concurrency, lv.completed, lv.ok, lv.rejected, lv.errors, f"{lv.ttfab_p50_ms:.1f}",
                    f"{lv.ttfab_p95_ms:.1f}", f"{lv.ttfab_p99_ms:.1f}", f"{lv.throughput_rps:.2f}",
                    Markup("<span class='ok'>yes</span>" if lv.meets_slo else "<span class='stop'>no</span>"),
                )
                for lv in qmax.ladder
            ],
            num_cols={0, 1, 2, 3, 4, 5, 6, 7, 8},
        ),
        f"<p>SLO p95 TTFAB {qmax.slo.ttfab_p95_ms:g} ms; Q_max {qmax.q_max} "
        + (f"(bracketed: {qmax.first_failing_concurrency} failed)" if qmax.bracketed else "(lower bound: no level failed)")
        + f"; uncontended service {qmax.service_time.mean_ms:.1f} ms mean, {qmax.service_time.p95_ms:.1f} ms p95.</p>",
        "<h2>T_total: how long a scale-out takes</h2>",
        _img(waterfall_png, "scale-out phase waterfall"),
        _table(
            ["phase", "offset s", "source", "bounded"],
            [
                (ph.name, f"{ph.offset_s:.3f}" if ph.offset_s is not None else "n/a", ph.source,
                 "yes" if ph.bounded else "no")  # fmt: skip
                for ph in ttotal.phases
            ],
            num_cols={1},
        ),
        f"<p>Measured {ttotal.measured_total_s:.1f} s + reaction bound {plan.t_total.reaction_bound_s:g} s = planning "
        f"{plan.t_total.planning_s:.1f} s.{_dominant(ttotal)}</p>",
        "<h2>The plan</h2>",
        _table(["name", "value", "formula"], plan_rows(plan), num_cols={1}),
        "<h2>Findings</h2>",
        _table(
            ["level", "finding", "why"],
            [(Markup(f"<span class='{f.level}'>{f.level}</span>"), f.name, f.message) for f in plan.findings],
        ),
        "<h2>Policy pack</h2>",
    ]
    if not policy_ran:
        parts.append("<p class='muted'>The policy pack was not run.</p>")
    elif not violations:
        parts.append("<p class='ok'>No violations: the stack passes every policy.</p>")
    else:
        mandatory = sum(1 for x in violations if x.level == "mandatory")
        parts.append(f"<p>{mandatory} mandatory, {len(violations) - mandatory} advisory.</p>")
        parts.append(
            _table(
                ["level", "policy", "resource", "message"],
                [(Markup(f"<span class='{x.level}'>{x.level}</span>"), x.policy, x.resource, x.message) for x in violations],
            )
        )
    if policy_note:
        parts.append(f"<p class='muted'>{html.escape(policy_note)}</p>")
    steps = list(next_steps)
    if steps:
        parts.append("<h2>Next</h2><ol>" + "".join(f"<li><code>{html.escape(s)}</code></li>" for s in steps) + "</ol>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: Path, **kwargs) -> Path:
    atomic_write_text(Path(path), render_report(**kwargs))
    return Path(path)


def _dominant(ttotal) -> str:
    from .ttotal_cmd import dominant_phase

    d = dominant_phase(ttotal)
    if d is None:
        return ""
    return html.escape(f" Dominant phase: {d.name} ({d.what}), {d.seconds:.1f} s = {100 * d.share:.0f}% of the measured "
                       f"T_total; shortened by {d.shortens}.")
