"""The terminal summary of ``bench demo``: what the chain measured, planned and wrote, the tuned
plan's promise against the simulation, the policy pack's verdict and what to do next on AWS."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.report.html import PolicyViolation
from bench.report.tuned import promise_check, verdict_line
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.artifact import SimulationArtifact


@dataclass(frozen=True)
class DemoSummary:
    """What ``bench demo``'s chain (:func:`bench.operations.demo.demo`) made, for the summary."""

    elapsed_s: float
    slo_ms: float
    instance_type: str
    plan: PlanArtifact
    qmax_path: Path
    ttotal_path: Path
    plan_path: Path
    tuned_plan: PlanArtifact | None
    tuned_plan_path: Path | None
    tune_path: Path | None
    simulation: SimulationArtifact | None
    simulation_path: Path | None
    simulation_pngs: list[Path]
    stack_file: Path
    report: Path
    mandatory: list[PolicyViolation]
    """The policy pack's mandatory violations (the deployment it would block)."""
    next_steps: list[str]


def render_demo(s: DemoSummary) -> str:
    plan = s.plan
    lines = [f"demo finished in {s.elapsed_s / 60:.1f} min: Q_max {plan.q_max} at SLO {s.slo_ms:g} ms, "
             f"T_total {plan.t_total.planning_s:.1f} s (measured {plan.t_total.measured_s:.1f} s), plan verdict {plan.verdict}",
             f"  qmax artifact   {s.qmax_path}  (+ {s.qmax_path.with_suffix('.png').name})",
             f"  ttotal artifact {s.ttotal_path}  (+ {s.ttotal_path.with_suffix('.png').name})",
             f"  plan            {s.plan_path}"]
    if s.tuned_plan is not None:
        lines.append(f"  tuned plan      {s.tuned_plan_path}" + (f"  (+ {s.tune_path.name})" if s.tune_path else ""))
        check = promise_check(s.tuned_plan, s.simulation) if s.simulation is not None else None
        if check is not None:
            lines.append(f"                  {verdict_line(check)}")
    if s.simulation is not None:
        lines.append(f"  simulation      {s.simulation_path}  (+ {len(s.simulation_pngs)} PNGs)")
    lines += [f"  stack config    {s.stack_file}", f"  report          {s.report}"]
    if s.mandatory:
        lines += ["", f"The policy pack blocks this stack ({', '.join(sorted({v.policy for v in s.mandatory}))}): the "
                      f"measurements describe this machine, not {s.instance_type}. That is the guard doing its job."]
    lines += ["", "With an AWS account, measure the endpoint itself and deploy (<bucket>: the stack output "
                  "endpoints.<model>.provenance_bucket, where the runs leave their receipts):"]
    lines += [f"  {step}" for step in s.next_steps]
    return "\n".join(lines)
