"""The tuned plan beside the seed in the HTML report: the tuner's inputs next to the seed's with the
reason per knob, both plans' simulated rows, and the promise (the tuned plan's own simulated SLO
share) against what the report's simulation got; when the simulation misses the share the plan is
sized for, why and what would keep it (speech.plan.tuned_findings.share_shortfall, the text the plan's
``promise`` finding gives)."""

from __future__ import annotations

import html
from dataclasses import dataclass

from bench.report.markup import Markup, table
from speech.plan.tuned_findings import share_shortfall
from speech.schema.artifacts import canonical_sha256
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.units import EPS
from speech.sim.artifact import TUNED_ROW, PolicyResult, SimulationArtifact, TuneArtifact

PROMISE_MATCH = 1e-6
"""Shares are stored rounded to 6 digits: a simulation of the very trace the tuner trained on
matches the promise within this."""


@dataclass(frozen=True)
class PromiseCheck:
    """The tuned plan's promise against one simulation of it (pure: tests read it without HTML)."""

    slo_share: float
    """The share the tuned plan is sized for and the tuner kept on its training days (inputs.slo_share)."""
    promised_share: float | None
    """The promise's simulated share within the SLO (mean over the training days); None: no promise."""
    simulated_share: float
    simulated_rejected_share: float
    simulated_instance_hours: float
    kept: bool
    """The simulation's share within the SLO is at least ``slo_share``."""
    matches_promise: bool | None
    """The simulation got the promised share (within :data:`PROMISE_MATCH`); None: no promise."""
    why: str | None
    """When not kept: why it missed and what would keep it."""
    promised_low: float | None = None
    """Lowest share within the SLO over the promise's draws (``bench tune --draws``); None: no interval."""
    promised_high: float | None = None
    promised_bound: float | None = None
    """The share the promise states for a draw the tuner did not see (``slo_share_bound``); None: an
    artifact made before the rule."""

    @property
    def below_low(self) -> bool:
        """This simulation kept less than the lowest draw the promise was judged on: expected now and
        then (of n training draws and one more, the new one is the lowest with chance 1 / (n + 1)),
        not a broken promise; :attr:`below_bound` is."""
        return self.promised_low is not None and self.simulated_share + EPS < self.promised_low

    @property
    def below_bound(self) -> bool:
        """This simulation kept less than the share the promise states for an unseen draw."""
        return self.promised_bound is not None and self.simulated_share + EPS < self.promised_bound


def promise_check(tuned: PlanArtifact, simulation: SimulationArtifact) -> PromiseCheck | None:
    """The check, None when the simulation has no ``tuned plan`` row (or one of another plan)."""
    row = simulation.result(TUNED_ROW)
    if row is None or simulation.tuned_plan_sha256 != canonical_sha256(tuned):
        return None
    want = tuned.inputs.slo_share
    kept = row.within_slo_share + EPS >= want
    pr = tuned.promise
    return PromiseCheck(
        slo_share=want, promised_share=pr.slo_share if pr is not None else None, simulated_share=row.within_slo_share,
        simulated_rejected_share=row.rejected_share, simulated_instance_hours=row.instance_hours, kept=kept,
        matches_promise=None if pr is None else abs(row.within_slo_share - pr.slo_share) <= PROMISE_MATCH,
        why=None if kept else share_shortfall(want, row.within_slo_share, row.rejected_share, tuned.q_max),
        promised_low=None if pr is None else pr.slo_share_low, promised_high=None if pr is None else pr.slo_share_high,
        promised_bound=None if pr is None else pr.slo_share_bound,
    )


def verdict_line(c: PromiseCheck) -> str:
    """One sentence: kept or missed, and how the simulation compares with the promise."""
    head = (f"The tuned plan keeps the SLO share it is sized for: {100 * c.simulated_share:.2f}% within the SLO "
            f"(>= {100 * c.slo_share:.2f}%)" if c.kept else
            f"The tuned plan MISSES the SLO share it is sized for: {100 * c.simulated_share:.2f}% within the SLO "
            f"(< {100 * c.slo_share:.2f}%); {c.why}")
    if c.promised_share is None:
        return head + "; it carries no promise (not written by bench tune)."
    interval = ("" if c.promised_low is None or c.promised_high is None else
                f"; over its draws the promise spans {100 * c.promised_low:.2f}-{100 * c.promised_high:.2f}%, and this "
                f"trace is " + ("BELOW its low end" if c.below_low else
                                "above its high end" if c.simulated_share > c.promised_high + EPS else "within it"))
    interval += bound_clause(c)
    if c.matches_promise:
        return head + f", as promised ({100 * c.promised_share:.2f}% on its training trace){interval}."
    d = 100 * (c.simulated_share - c.promised_share)
    return head + (f"; the promise was {100 * c.promised_share:.2f}% (the mean of its draws), this trace "
                   f"{d:+.2f} points{interval}.")


def bound_clause(c: PromiseCheck) -> str:
    """What the promise states for a draw the tuner did not see, and whether this trace kept it:
    the sentence that says a promise broke (a trace below the draws' lowest alone did not)."""
    if c.promised_bound is None:
        return ""
    if c.below_bound:
        return (f"; it promised {100 * c.promised_bound:.2f}% for a draw it did not see, and this trace is BELOW that "
                "promise")
    low = (" (below the lowest training draw, as about one draw in n + 1 is)" if c.below_low else "")
    return f"; it promised {100 * c.promised_bound:.2f}% for a draw it did not see, and this trace keeps that{low}"


def tuned_summary(tuned: PlanArtifact, simulation: SimulationArtifact | None) -> tuple[str, str] | None:
    """The answer block's line on the tuned plan: (headline, reason); None without a tuned row."""
    c = promise_check(tuned, simulation) if simulation is not None else None
    if c is None or simulation is None:
        return None
    seed = simulation.seed_result()
    vs = ""
    if seed is not None and seed.instance_hours > 0:
        vs = f" ({100 * (c.simulated_instance_hours / seed.instance_hours - 1):+.1f}% vs the seed plan's {seed.instance_hours:,.1f})"
    head = (f"{100 * c.simulated_share:.2f}% within the SLO, {c.simulated_instance_hours:,.1f} instance-hours{vs}: "
            + ("keeps" if c.kept else "MISSES") + f" {100 * c.slo_share:.2f}%")
    reason = (f"bench tune's plan (fleet {tuned.fleet.min_instances}-{tuned.fleet.max_instances}) on the same trace. "
              + verdict_line(c))
    return head, reason


def _row_cells(r: PolicyResult) -> tuple:
    return (r.policy, f"{100 * r.within_slo_share:.2f}%", f"{100 * r.rejected_share:.2f}%", f"{r.instance_hours:,.2f}",
            "-" if r.cost_vs_floor is None else f"{r.cost_vs_floor:.2f}", r.scale_out_actions, r.scale_in_actions,
            r.flaps, r.peak_instances)


def input_rows(seed: PlanArtifact, tuned: PlanArtifact, tune: TuneArtifact | None) -> list[tuple[str, str, str, str]]:
    """(knob, seed plan, tuned plan, reason): every knob as each plan deploys it
    (speech.sim.tune.describe_plan), from the tune artifact when there is one, else from the two
    plans and the tuned plan's ``reasons``; then the fleet both plans size."""
    if tune is not None:
        rows = [(v.knob, v.seed, v.tuned, v.reason) for v in tune.values]
    else:
        rows = _knob_rows(seed, tuned)
    rows += [
        ("fleet (min-max)", f"{seed.fleet.min_instances}-{seed.fleet.max_instances}",
         f"{tuned.fleet.min_instances}-{tuned.fleet.max_instances}", "follows from the inputs above"),
        ("plan verdict", seed.verdict, tuned.verdict, "the plan's findings (below for the tuned plan)"),
    ]
    return rows


def _knob_rows(seed: PlanArtifact, tuned: PlanArtifact) -> list[tuple[str, str, str, str]]:
    """Without the tune artifact: each knob as the two plans deploy it, the reason from the tuned
    plan's ``tuning`` (the plan artifact records reasons for the inputs it lists there only)."""
    from speech.sim.scaler import scaling_numbers
    from speech.sim.tune import KNOBS, Knobs, describe_plan

    def knobs(p: PlanArtifact) -> Knobs:
        i = p.inputs
        return Knobs(surge_ratio=i.surge_ratio, target_share=i.target_share, datapoints_to_alarm=i.datapoints_to_alarm,
                     min_instances=i.min_instances, scale_in_step_share=i.scale_in_step_share,
                     scale_in_window_s=i.scale_in_window_s, scale_in_cooldown_s=i.scale_in_cooldown_s,
                     scheduled_floors=p.schedule is not None)

    sd, td = describe_plan(scaling_numbers(seed), knobs(seed)), describe_plan(scaling_numbers(tuned), knobs(tuned))
    reasons = {v.name: v.reason for v in tuned.tuning}
    return [(k, sd[k], td[k], reasons.get(k) or ("the seed formula kept" if sd[k] == td[k] else
                                                 "no reason in the plan artifact (bench tune's tune-*.json has it)"))
            for k in KNOBS]


def tuned_section(seed: PlanArtifact, tuned: PlanArtifact, tune: TuneArtifact | None,
                  simulation: SimulationArtifact | None) -> list[str]:
    """The report's section on the tuned plan (HTML fragments)."""
    pr = tuned.promise
    parts = ["<h2>The tuned plan: bench tune beside the seed</h2>"]
    intro = (f"<code>bench tune</code> searched the deployable plan inputs for the fewest instance-hours that keep "
             f"{100 * tuned.inputs.slo_share:.2f}% of requests within the SLO ({tuned.inputs.slo_ms:g} ms p95 TTFAB)")
    if tune is not None:
        seed_is_plan = tune.seed_plan_sha256 == canonical_sha256(seed)
        intro += (f" on <code>{html.escape(tune.promise.trace)}</code> ({tune.evaluations} simulated days); its seed is "
                  + ("the plan above (the same sha256)" if seed_is_plan else
                     "<b>not</b> the plan above (another sha256: the tuner started from other inputs)"))
    parts.append(f"<p>{intro}. Each knob as the plan deploys it, seed next to tuned, with the tuner's reason:</p>")
    parts.append(table(["knob", "seed plan", "tuned plan", "reason"], input_rows(seed, tuned, tune)))
    if pr is not None:
        interval = ("" if pr.slo_share_low is None or pr.slo_share_high is None else
                    f" (over its draws: {100 * pr.slo_share_low:.2f}-{100 * pr.slo_share_high:.2f}% within the SLO, "
                    f"{pr.instance_hours_low:,.1f}-{pr.instance_hours_high:,.1f} instance-hours)")
        parts.append(f"<p>Promise (recorded in the tuned plan's <code>inputs.promise</code>): {100 * pr.slo_share:.2f}% "
                     f"within the SLO, {100 * pr.rejected_share:.2f}% refused, {pr.instance_hours:,.1f} instance-hours, "
                     f"{pr.cost_vs_floor:.2f}x the floor{interval}, on trace sha256 {html.escape(pr.trace_sha256[:12])}..., "
                     f"seed {pr.seed}, simulator <i>{html.escape(pr.simulator_version)}</i>.</p>")
    c = promise_check(tuned, simulation) if simulation is not None else None
    if simulation is not None and c is not None:
        rows = [_row_cells(r) for r in (simulation.seed_result(), simulation.result(TUNED_ROW)) if r is not None]
        parts.append(table(["plan", "in SLO", "rejected", "inst-h", "x floor", "out", "in", "flaps", "peak"], rows,
                            num_cols=set(range(1, 9))))
        promised = "-" if c.promised_share is None else f"{100 * c.promised_share:.2f}%"
        low = c.promised_low if c.promised_low is not None else (None if tune is None else tune.promise.within_slo_share_worst_day)
        span = "-" if low is None else f"{100 * low:.2f}%" + (
            "" if c.promised_high is None else f" - {100 * c.promised_high:.2f}%")
        parts.append(table(
            ["", "sized for", "promised (mean over draws)", "promised interval (lowest - highest draw)", "this simulation",
             "kept"],
            [("tuned plan", f"{100 * c.slo_share:.2f}%", promised, span, f"{100 * c.simulated_share:.2f}%",
              Markup("<span class='ok'>yes</span>" if c.kept else "<span class='stop'>no</span>"))],
            num_cols={1, 2, 3, 4}))
        cls = "ok" if c.kept else "stop"
        parts.append(f"<p class='{cls}' id='promise-check'>{html.escape(verdict_line(c))}</p>")
    elif simulation is not None:
        parts.append("<p class='muted'>The simulation below did not run this tuned plan.</p>")
    if tune is not None and tune.checks:
        parts.append("<p>The tuner's checks on days it did not choose on (seed plan vs tuned plan):</p>")
        parts.append(table(
            ["day", "seed in SLO", "seed inst-h", "tuned in SLO", "tuned inst-h", "keeps"],
            [(k.day, f"{100 * k.seed_within_slo_share:.2f}%", f"{k.seed_instance_hours:,.1f}",
              f"{100 * k.tuned_within_slo_share:.2f}%", f"{k.tuned_instance_hours:,.1f}",
              Markup("<span class='ok'>yes</span>" if k.tuned_keeps_share else "<span class='stop'>no</span>"))
             for k in tune.checks],
            num_cols={1, 2, 3, 4}))
    shown = [f for f in tuned.findings if f.level != "ok" or f.name == "promise"]
    if shown:
        parts.append("<p>The tuned plan's findings (its <code>promise</code> and every warning):</p>")
        parts.append(table(["level", "finding", "why"],
                            [(Markup(f"<span class='{f.level}'>{f.level}</span>"), f.name, f.message) for f in shown]))
    parts.append("<p class='muted'>The stack config holds the seed plan's inputs. To deploy the tuned ones, give "
                 "<code>bench plan</code> the tuned values (<code>--min-instances</code>, <code>--target-share</code>, "
                 "<code>--scale-in-step-share</code>, <code>--scale-in-window-s</code>, <code>--scale-in-cooldown-s</code>, "
                 "a <code>--reason</code> each) and the promise (<code>--promise</code>) with <code>--stack</code>.</p>")
    return parts
