"""One self-contained HTML page that answers first: can this stack deploy (the pack's verdict and
its one reason), the planned fleet, the simulated SLO and rejected shares with why, and the cost
in USD/day; then the policy verdicts, ladder plot, phase waterfall, plan numbers with formulas,
the simulated comparison of scaling policies and the findings. Images are embedded
(base64) so the page can be mailed or attached to CI."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Iterable, Sequence

from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.files import atomic_write_text
from speech.sim.artifact import SEED_ROW, TUNED_ROW, SimulationArtifact, TuneArtifact, cost_gaps

from bench.report.markup import Markup, table
from bench.report.text import plan_rows
from bench.report.tuned import tuned_section, tuned_summary

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.warn{color:#9a6700;font-weight:600}.stop,.mandatory{color:#cf222e;font-weight:600}
.advisory{color:#9a6700;font-weight:600}.badge{display:inline-block;padding:.15em .6em;border-radius:1em;color:#fff}
.badge.ok{background:#1a7f37}.badge.warn{background:#bf8700}.badge.stop{background:#cf222e}
img{max-width:100%;border:1px solid #eee}.muted{color:#666;font-size:.9em}code{background:#f6f8fa;padding:0 .3em}
.answer{border:2px solid #ddd;border-radius:.5em;padding:.6em 1em;margin:1em 0}
.answer.blocked{border-color:#cf222e;background:#fff5f5}.answer.deployable{border-color:#1a7f37;background:#f3fbf5}
.answer table{width:100%;font-size:1em}.answer td{border:0;border-bottom:1px solid #eee;vertical-align:top}
.answer td:first-child{width:9em;font-weight:600;color:#444}.big{font-size:1.25em;font-weight:700}
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


@dataclass(frozen=True)
class Answer:
    """What the top of the report answers, each with its reason: can the stack deploy, the fleet,
    what the simulation says of the plan, and what it costs."""

    deploy: str
    deploy_reason: str
    blocked: bool | None
    """True: a mandatory violation; False: none; None: the pack was not run."""
    fleet: str
    simulated: str
    simulated_reason: str
    cost: str
    cost_reason: str
    tuned: str | None = None
    """The tuned plan's simulated row and whether it keeps its share (bench.report.tuned); None: no tuned plan."""
    tuned_reason: str | None = None


def usd_per_day(instances: float, price_per_hour_usd: float) -> float:
    """Instances held all day at an hourly price: instances x USD/h x 24 h."""
    from speech.schema.prices import HOURS_PER_DAY

    return instances * price_per_hour_usd * HOURS_PER_DAY


def rejection_reason(plan: PlanArtifact, a: SimulationArtifact) -> str:
    """Why the simulated plan rejected what it rejected: the fleet at its ceiling, or arrivals over
    Q_max per instance while a scale-out was under way (T_total), compared with the floor."""
    r = a.seed_result() or a.results[0]
    floor = next((x for x in a.results if x.policy == "floor"), None)
    gate = f"the admission gate answers 503 once an instance holds Q_max {plan.q_max} in flight"
    if r.rejected_share <= 0:
        return f"nothing rejected: {gate}, and the fleet always grew before that"
    if r.peak_instances >= plan.fleet.max_instances:
        why = (f"the fleet reached its maximum of {plan.fleet.max_instances} instances (peak {plan.inputs.peak_rps:g} rps "
               f"planned, busiest minute {a.trace.peak_rps:,.1f} rps), so beyond it {gate}")
    else:
        why = (f"traffic grew faster than instances start: a scale-out serves only after T_total {plan.t_total.planning_s:.0f} s "
               f"(measured {plan.t_total.measured_s:.0f} s), and meanwhile {gate}")
        surge = next((f for f in plan.findings if f.name == "surge_survival"), None)
        if surge is not None and surge.level != "ok":
            why += " (the plan's surge_survival finding predicted it)"
    if floor is not None:
        why += (f"; the floor (the fewest instances that keep the share, clairvoyant, no start-up) rejects "
                f"{100 * floor.rejected_share:.2f}%, so "
                + ("part of it is capacity no policy has" if floor.rejected_share > 0 else "start-up time is the cause"))
    return why


def answer(plan: PlanArtifact, violations: list[PolicyViolation] | None, policy_ran: bool,
           simulation: SimulationArtifact | None, prices: dict[str, float] | None = None,
           instance_type: str | None = None, tuned_plan: PlanArtifact | None = None) -> Answer:
    """The top block's numbers and reasons (pure: tests read them without the HTML).

    ``instance_type``: what the stack deploys, when not what was measured (the demo measures this
    machine and writes an ``ml.*`` entry); fleet and cost are in it. ``tuned_plan``: bench tune's
    plan, simulated beside the seed (``Answer.tuned``)."""
    from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR, PRICE_REGION, PRICES_TAKEN

    mandatory = [v for v in violations or [] if v.level == "mandatory"]
    advisory = [v for v in violations or [] if v.level != "mandatory"]
    if not policy_ran:
        deploy, reason, blocked = "not checked", "the policy pack was not run", None
    elif mandatory:
        first = mandatory[0]
        policies = sorted({v.policy for v in mandatory})
        more = f" ({len(mandatory)} mandatory violations of {', '.join(policies)}; all below)" if len(mandatory) > 1 else ""
        deploy = f"BLOCKED: cannot deploy ({first.policy})"
        reason, blocked = f"{first.resource}: {first.message}{more}", True
    else:
        deploy, blocked = "CAN DEPLOY", False
        reason = f"the policy pack finds no mandatory violation ({len(advisory)} advisory)"
    f = plan.fleet
    itype = instance_type or plan.fingerprint.instance_type
    stop = next((x for x in plan.findings if x.level == "stop"), None)
    if plan.verdict == "stop":
        fleet = (f"no scaling: the plan stops ({stop.name}: {stop.message})" if stop is not None
                 else "no scaling: the plan stops")
    else:
        fleet = (f"{f.min_instances}-{f.max_instances} x {itype}: target {plan.thresholds.scaling_target_value:g} in "
                 f"flight per instance (Q_max {plan.q_max}), plan verdict {plan.verdict.upper()}")
    if simulation is not None:
        r = simulation.seed_result() or simulation.results[0]
        simulated = (f"{100 * r.within_slo_share:.2f}% within the SLO ({simulation.slo_ms:g} ms p95 TTFAB), "
                     f"{100 * r.rejected_share:.2f}% rejected")
        simulated_reason = f"on {simulation.trace.spec}: {rejection_reason(plan, simulation)}"
    else:
        simulated, simulated_reason = "not simulated", "bench simulate did not run"
    price_table = {**DEFAULT_PRICES_USD_PER_HOUR, **(prices or {})}
    price = price_table.get(itype)
    if plan.verdict == "stop":
        cost, cost_reason = "no fleet planned", "a plan that stops deploys no scaling"
    elif price is None:
        cost = "no price"
        cost_reason = (f"{itype} is not in the price table (speech/schema/prices.py); "
                       "set speech-endpoints:budget.prices_usd_per_hour for it")
    else:
        cost = (f"${usd_per_day(f.min_instances, price):,.2f} - ${usd_per_day(f.max_instances, price):,.2f} per day "
                f"(floor - maximum)")
        cost_reason = f"{itype} at ${price:g}/instance-hour ({PRICE_REGION} on-demand, price of {PRICES_TAKEN})"
        if simulation is not None:
            r = simulation.seed_result() or simulation.results[0]
            mean = r.instance_hours / (simulation.trace.duration_s / 3600)
            cost += f"; ${usd_per_day(mean, price):,.2f} per day at the simulated mean fleet"
            cost_reason += f"; the simulated plan held {mean:.2f} instances on average over the trace"
    tuned = None
    if tuned_plan is not None:
        tuned = tuned_summary(tuned_plan, simulation)
    return Answer(deploy, reason, blocked, fleet, simulated, simulated_reason, cost, cost_reason,
                  *(tuned or (None, None)))


def _answer_block(a: Answer) -> str:
    cls = "blocked" if a.blocked else "deployable" if a.blocked is False else ""
    badge = "stop" if a.blocked else "ok" if a.blocked is False else "warn"
    rows = [
        ("Deploy", f"<span class='badge {badge} big'>{html.escape(a.deploy)}</span><br><span class='muted'>"
                   f"{html.escape(a.deploy_reason)}</span>"),
        ("Fleet", f"<span class='big'>{html.escape(a.fleet.split(':')[0])}</span><br><span class='muted'>"
                  f"{html.escape(a.fleet.split(':', 1)[1].strip())}</span>" if ":" in a.fleet else html.escape(a.fleet)),
        ("Simulated", f"<span class='big'>{html.escape(a.simulated)}</span><br><span class='muted'>"
                      f"{html.escape(a.simulated_reason)}</span>"),
        ("Cost", f"<span class='big'>{html.escape(a.cost)}</span><br><span class='muted'>{html.escape(a.cost_reason)}</span>"),
    ]
    if a.tuned is not None:
        rows.insert(3, ("Tuned", f"<span class='big'>{html.escape(a.tuned)}</span><br><span class='muted'>"
                                 f"{html.escape(a.tuned_reason or '')}</span>"))
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
    return f"<div class='answer {cls}' id='answer'><table>{body}</table></div>"


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
    simulation: SimulationArtifact | None = None,
    simulation_pngs: Sequence[Path] = (),
    title: str = "speech-endpoints: measured autoscaling",
    prices: dict[str, float] | None = None,
    instance_type: str | None = None,
    tuned_plan: PlanArtifact | None = None,
    tune: TuneArtifact | None = None,
) -> str:
    """The page. ``tuned_plan`` (bench tune's, with its ``tune`` artifact when there is one): a
    section with its inputs beside the seed's, both simulated rows and the promise against the
    simulation (bench.report.tuned)."""
    v = plan.verdict
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        _answer_block(answer(plan, violations, policy_ran, simulation, prices, instance_type, tuned_plan)),
        f"<p>Model <b>{html.escape(plan.model)}</b> on <code>{html.escape(plan.fingerprint.instance_type)}</code> "
        f"(<code>{html.escape(plan.fingerprint.slug)}</code>), origin <b>{html.escape(plan.provenance.origin)}</b>. "
        f"Plan verdict <span class='badge {v}'>{v.upper()}</span> &middot; Q_max <b>{plan.q_max}</b> &middot; "
        f"T_total <b>{plan.t_total.planning_s:.1f} s</b> &middot; target <b>{plan.thresholds.scaling_target_value:g}</b>"
        f" / scale-in <b>{plan.thresholds.scale_in_threshold:g}</b> &middot; fleet "
        f"<b>{plan.fleet.min_instances}-{plan.fleet.max_instances}</b></p>",
        f"<p class='muted'>Generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.</p>",
        _GENERATED_MARK,
        "<h2>Q_max: the concurrency ladder</h2>",
        _img(ladder_png, "p95 TTFAB vs concurrency"),
        table(
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
        table(
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
        table(["name", "value", "formula"], plan_rows(plan), num_cols={1}),
        *_tuned_section(plan, tuned_plan, tune, simulation),
        *_simulation_section(simulation, simulation_pngs),
        "<h2>Findings</h2>",
        table(
            ["level", "finding", "why"],
            [(Markup(f"<span class='{f.level}'>{f.level}</span>"), f.name, f.message) for f in plan.findings],
        ),
    ]
    parts[parts.index(_GENERATED_MARK) + 1:parts.index(_GENERATED_MARK) + 1] = _policy_section(
        violations, policy_ran, policy_note)
    parts.remove(_GENERATED_MARK)
    steps = list(next_steps)
    if steps:
        parts.append("<h2>Next</h2><ol>" + "".join(f"<li><code>{html.escape(s)}</code></li>" for s in steps) + "</ol>")
    parts.append("</body></html>")
    return "\n".join(parts)


_GENERATED_MARK = "<!-- generated -->"


def _tuned_section(plan: PlanArtifact, tuned: PlanArtifact | None, tune: TuneArtifact | None,
                   simulation: SimulationArtifact | None) -> list[str]:
    if tuned is None:
        return []
    return tuned_section(plan, tuned, tune, simulation)


def _policy_section(violations: list[PolicyViolation] | None, policy_ran: bool, policy_note: str | None) -> list[str]:
    parts = ["<h2>Policy pack</h2>"]
    if not policy_ran:
        parts.append("<p class='muted'>The policy pack was not run.</p>")
    elif not violations:
        parts.append("<p class='ok'>No violations: the stack passes every policy.</p>")
    else:
        mandatory = sum(1 for x in violations if x.level == "mandatory")
        parts.append(f"<p>{mandatory} mandatory, {len(violations) - mandatory} advisory.</p>")
        parts.append(
            table(
                ["level", "policy", "resource", "message"],
                [(Markup(f"<span class='{x.level}'>{x.level}</span>"), x.policy, x.resource, x.message) for x in violations],
            )
        )
    if policy_note:
        parts.append(f"<p class='muted'>{html.escape(policy_note)}</p>")
    return parts


def _simulation_section(a: SimulationArtifact | None, pngs: Sequence[Path]) -> list[str]:
    """The policy comparison table (the same columns as ``bench simulate``), the cost-vs-SLO scatter
    and one timeline with every policy overlaid."""
    if a is None:
        return []
    tr = a.trace
    pct = lambda x: f"{100 * x:.2f}%"  # noqa: E731
    num = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    rows = [
        (Markup(f"<b>{html.escape(r.policy)}</b>") if r.policy in ("plan", SEED_ROW, TUNED_ROW) else r.policy,
         pct(r.within_slo_share),
         pct(r.rejected_share), num(r.ttfab_p95_ms, ".0f"), num(r.ttfab_p99_ms, ".0f"), r.violation_minutes,
         f"{r.instance_hours:,.2f}", num(r.cost_vs_floor, ".2f"), r.scale_out_actions, r.scale_in_actions, r.flaps,
         r.peak_instances)
        for r in a.results
    ]
    paths = [Path(p) for p in pngs]
    scatter = [p for p in paths if p.stem.endswith("-cost-vs-slo")]
    parts = [
        "<h2>Simulation: " + ("the seed and tuned plans" if a.tuned_plan_sha256 is not None else "the plan")
        + " against other scaling policies</h2>",
        f"<p>Trace <code>{html.escape(tr.spec)}</code>: {tr.duration_s / 3600:.2f} h at 1 s, {tr.requests:,.0f} requests, "
        f"busiest minute {tr.peak_rps:,.1f} rps. The simulated instance is the measured one (ladder above, gate at "
        f"Q_max, new instances serving after {a.startup_s:.1f} s); SLO {a.slo_ms:g} ms p95 TTFAB.</p>",
        table(["policy", "in SLO", "rejected", "p95 ms", "p99 ms", "viol min", "inst-h", "x floor", "out", "in",
                "flaps", "peak"], rows, num_cols=set(range(1, 12))),
        "<p class='muted'>in SLO: answered within the SLO (a rejected request never is); p95/p99: answered requests; "
        "viol min: minutes with under 95% in SLO; x floor: instance-hours over the floor's (the fewest that keep "
        "the SLO share over the whole trace: clairvoyant, no start-up, one change a minute); flaps: a scale-in "
        "followed by a scale-out within the planning T_total "
        f"({a.planning_total_s:.1f} s). <code>python -m bench simulate --help</code> runs longer traces.</p>",
    ]
    gaps = cost_gaps(a)
    if gaps:
        parts.append("<p id='cost-gaps'>What is left to win: " + "<br>".join(html.escape(g) for g in gaps) + "</p>")
    parts += [_img(p, "cost vs SLO, every policy, with the SLO target") for p in scatter]
    parts += [_img(p, "every policy over time: rejected requests, instances in service, p95 TTFAB vs SLO")
              for p in paths if p.stem.endswith("-timeline")]
    return parts


def write_report(path: Path, **kwargs) -> Path:
    atomic_write_text(Path(path), render_report(**kwargs))
    return Path(path)


def _dominant(ttotal) -> str:
    from bench.report.text import dominant_phase

    d = dominant_phase(ttotal)
    if d is None:
        return ""
    return html.escape(f" Dominant phase: {d.name} ({d.what}), {d.seconds:.1f} s = {100 * d.share:.0f}% of the measured "
                       f"T_total; shortened by {d.shortens}.")
