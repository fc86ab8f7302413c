"""One self-contained HTML page that answers first: can this stack deploy (the pack's verdict and
its one reason), the planned fleet, the simulated SLO and rejected shares with why, and the cost
in USD/day; then the policy verdicts, ladder plot, phase waterfall, plan numbers with formulas,
the simulated comparison of scaling policies and the findings. Images are embedded
(base64) so the page can be mailed or attached to CI.

The page is the Jinja2 template ``bench/report/templates/demo.html.j2`` (on ``base.html.j2`` and
the table macro every report shares); this module computes what it shows (:func:`answer`, a pure
function the tests read, and the rows of each table)."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.report.markup import Markup
from bench.report.text import plan_rows
from bench.report.tuned import promise_check, tuned_section, tuned_summary
from speech.files import atomic_write_text
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import SEED_ROW, TUNED_ROW, SimulationArtifact, TuneArtifact, cost_gaps


@dataclass(frozen=True)
class PolicyViolation:
    level: str
    """mandatory | advisory."""
    policy: str
    resource: str
    message: str


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
    costs: tuple[PlanCost, ...] = ()
    """USD/day of each plan on the page, the recommended one first (the tuned plan when it ran in the
    simulation, else the plan); empty when unpriced or stopped."""


@dataclass(frozen=True)
class PlanCost:
    """One plan's dollars per day: instances x USD/h x 24 at its floor, at its cap (max_instances)
    and at the mean fleet the simulation held (None: not simulated)."""

    plan: str
    """``plan``, ``seed plan`` or ``tuned plan`` (the simulation's row names)."""
    min_instances: int
    max_instances: int
    mean_instances: float | None
    usd_per_day_floor: float
    usd_per_day_cap: float
    usd_per_day_mean: float | None


def plan_costs(plan: PlanArtifact, simulation: SimulationArtifact | None, price: float,
               tuned_plan: PlanArtifact | None = None) -> tuple[PlanCost, ...]:
    """The recommended plan's cost first: the tuned plan when the simulation ran it (its row), then
    the seed; without a tuned row, the plan alone."""
    hours = simulation.trace.duration_s / 3600 if simulation is not None and simulation.trace.duration_s > 0 else None

    def cost(name: str, p: PlanArtifact, row) -> PlanCost:
        mean = row.instance_hours / hours if row is not None and hours else None
        return PlanCost(name, p.fleet.min_instances, p.fleet.max_instances, mean,
                        usd_per_day(p.fleet.min_instances, price), usd_per_day(p.fleet.max_instances, price),
                        None if mean is None else usd_per_day(mean, price))

    seed_row = simulation.seed_result() if simulation is not None else None
    tuned_row = simulation.result(TUNED_ROW) if simulation is not None else None
    if tuned_plan is not None and tuned_row is not None and tuned_plan.verdict != "stop":
        if promise_check(tuned_plan, simulation) is not None:  # type: ignore[arg-type]
            return cost(TUNED_ROW, tuned_plan, tuned_row), cost(seed_row.policy if seed_row else "seed plan", plan, seed_row)
    return (cost(seed_row.policy if seed_row else "plan", plan, seed_row),)


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
    costs: tuple[PlanCost, ...] = ()
    if plan.verdict != "stop" and price is not None:
        costs = plan_costs(plan, simulation, price, tuned_plan)
    if plan.verdict == "stop" or price is None:
        pass
    elif len(costs) == 2:
        # A tuned plan ran beside the seed: price the one the page recommends first, the seed next to it.
        t_, s_ = costs
        cost = (f"tuned plan ${t_.usd_per_day_mean:,.2f} per day at its simulated mean fleet, "
                f"${t_.usd_per_day_cap:,.2f} at its cap of {t_.max_instances}; seed plan ${s_.usd_per_day_mean or 0:,.2f} "
                f"and ${s_.usd_per_day_cap:,.2f} at its cap of {s_.max_instances}")
        cost_reason = (f"{itype} at ${price:g}/instance-hour ({PRICE_REGION} on-demand, price of {PRICES_TAKEN}); the "
                       f"tuned plan held {t_.mean_instances:.2f} instances on average over the trace (floor "
                       f"{t_.min_instances}: ${t_.usd_per_day_floor:,.2f}/day), the seed plan "
                       f"{s_.mean_instances or 0:.2f} (floor {s_.min_instances}: ${s_.usd_per_day_floor:,.2f}/day)")
    else:
        c = costs[0]
        cost = f"${c.usd_per_day_floor:,.2f} - ${c.usd_per_day_cap:,.2f} per day (floor - maximum)"
        cost_reason = f"{itype} at ${price:g}/instance-hour ({PRICE_REGION} on-demand, price of {PRICES_TAKEN})"
        if c.usd_per_day_mean is not None:
            cost += f"; ${c.usd_per_day_mean:,.2f} per day at the simulated mean fleet"
            cost_reason += f"; the simulated plan held {c.mean_instances:.2f} instances on average over the trace"
    tuned = None
    if tuned_plan is not None:
        tuned = tuned_summary(tuned_plan, simulation)
    tuned_line, tuned_reason = tuned or (None, None)
    return Answer(deploy, reason, blocked, fleet, simulated, simulated_reason, cost, cost_reason,
                  tuned=tuned_line, tuned_reason=tuned_reason, costs=costs)


def _png(path: Path | None) -> str | None:
    """A PNG file as base64 for an ``<img src="data:...">``; None when there is no file."""
    if path is None or not Path(path).exists():
        return None
    return base64.b64encode(Path(path).read_bytes()).decode()


def _cost_rows(costs: Sequence[PlanCost]) -> list[tuple]:
    """Each plan's USD/day side by side, the recommended plan first (its name in bold)."""
    money = lambda x: "-" if x is None else f"${x:,.2f}"  # noqa: E731
    return [(Markup(f"<b>{html.escape(c.plan)}</b> (recommended)") if i == 0 and len(costs) > 1 else c.plan,
             "-" if c.mean_instances is None else f"{c.mean_instances:.2f}", money(c.usd_per_day_mean),
             c.max_instances, money(c.usd_per_day_cap), c.min_instances, money(c.usd_per_day_floor))
            for i, c in enumerate(costs)]


def _level(level: str) -> Markup:
    return Markup(f"<span class='{html.escape(level)}'>{html.escape(level)}</span>")


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
    """The page, from the ``demo.html.j2`` template (bench/report/templates; every value escaped
    there, :class:`Markup` cells as they are). ``tuned_plan`` (bench tune's, with its ``tune``
    artifact when there is one): a section with its inputs beside the seed's, both simulated rows
    and the promise against the simulation (bench.report.tuned)."""
    from bench.report.outputs import environment

    a = answer(plan, violations, policy_ran, simulation, prices, instance_type, tuned_plan)
    fleet_head, _, fleet_rest = a.fleet.partition(":")
    ctx = dict(
        title=title, a=a, plan=plan, qmax=qmax, ttotal=ttotal,
        answer_class="blocked" if a.blocked else "deployable" if a.blocked is False else "",
        deploy_badge="stop" if a.blocked else "ok" if a.blocked is False else "warn",
        fleet_head=fleet_head, fleet_rest=fleet_rest.strip() if ":" in a.fleet else None,
        cost_rows=_cost_rows(a.costs) if a.costs else [],
        target=f"{plan.thresholds.scaling_target_value:g}", scale_in=f"{plan.thresholds.scale_in_threshold:g}",
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        policy_ran=policy_ran, violations=violations or [], policy_note=policy_note,
        mandatory=sum(1 for x in violations or [] if x.level == "mandatory"),
        violation_rows=[(_level(x.level), x.policy, x.resource, x.message) for x in violations or []],
        ladder_img=_png(ladder_png), qmax_slo=f"{qmax.slo.ttfab_p95_ms:g}",
        ladder_rows=[(lv.concurrency, lv.completed, lv.ok, lv.rejected, lv.errors, f"{lv.ttfab_p50_ms:.1f}",
                      f"{lv.ttfab_p95_ms:.1f}", f"{lv.ttfab_p99_ms:.1f}", f"{lv.throughput_rps:.2f}",
                      Markup("<span class='ok'>yes</span>" if lv.meets_slo else "<span class='stop'>no</span>"))
                     for lv in qmax.ladder],
        waterfall_img=_png(waterfall_png),
        phase_rows=[(ph.name, f"{ph.offset_s:.3f}" if ph.offset_s is not None else "n/a", ph.source,
                     "yes" if ph.bounded else "no") for ph in ttotal.phases],
        reaction=f"{plan.t_total.reaction_bound_s:g}", dominant=_dominant(ttotal),
        plan_rows=plan_rows(plan),
        tuned_html=Markup("\n".join(tuned_section(plan, tuned_plan, tune, simulation))) if tuned_plan is not None else None,
        sim=_simulation(simulation, simulation_pngs),
        finding_rows=[(_level(f.level), f.name, f.message) for f in plan.findings],
        steps=list(next_steps),
    )
    return environment().get_template("demo.html.j2").render(**ctx)


def _simulation(a: SimulationArtifact | None, pngs: Sequence[Path]) -> dict | None:
    """The policy comparison (the same columns as ``bench simulate``), the cost-vs-SLO scatter and
    one timeline with every policy overlaid."""
    if a is None:
        return None
    tr = a.trace
    pct = lambda x: f"{100 * x:.2f}%"  # noqa: E731
    num = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    rows = [
        (Markup(f"<b>{html.escape(r.policy)}</b>") if r.policy in ("plan", SEED_ROW, TUNED_ROW) else r.policy,
         pct(r.within_slo_share), pct(r.rejected_share), num(r.ttfab_p95_ms, ".0f"), num(r.ttfab_p99_ms, ".0f"),
         r.violation_minutes, f"{r.instance_hours:,.2f}", num(r.cost_vs_floor, ".2f"), r.scale_out_actions,
         r.scale_in_actions, r.flaps, r.peak_instances)
        for r in a.results
    ]
    paths = [Path(p) for p in pngs]
    return dict(
        tuned=a.tuned_plan_sha256 is not None, spec=tr.spec, rows=rows,
        trace_text=f"{tr.duration_s / 3600:.2f} h at 1 s, {tr.requests:,.0f} requests, busiest minute {tr.peak_rps:,.1f} rps",
        startup=f"{a.startup_s:.1f}", slo=f"{a.slo_ms:g}", planning_total=f"{a.planning_total_s:.1f}",
        scatter=[_png(p) for p in paths if p.stem.endswith("-cost-vs-slo")],
        timeline=[_png(p) for p in paths if p.stem.endswith("-timeline")],
        gaps=cost_gaps(a),
    )


def write_report(path: Path, **kwargs) -> Path:
    atomic_write_text(Path(path), render_report(**kwargs))
    return Path(path)


def _dominant(ttotal) -> str:
    from bench.report.text import dominant_phase

    d = dominant_phase(ttotal)
    if d is None:
        return ""
    return (f" Dominant phase: {d.name} ({d.what}), {d.seconds:.1f} s = {100 * d.share:.0f}% of the measured "
                       f"T_total; shortened by {d.shortens}.")
