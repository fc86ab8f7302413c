"""``bench plan --stack NAME`` without artifacts: re-plan every model of a stack file from its
embedded measurements and inputs, under the stack's daily budget.

The same functions as the program (:func:`speech.deploy.gate.plan_model`, :func:`speech.deploy.gate.apply_budget`,
hence :func:`speech.plan.realtime.build_plan` and :func:`speech.plan.budget.allocate`), so the plans written here
are the ones the program deploys and the pack recomputes. Writes ``plan-<model>.json`` per
measured real-time model (with its ``budget`` section when the stack has a budget),
``batch-plan-<model>.json`` per batch model (speech.plan.batch, capped by the budget) and
``budget-<stack>.json`` (every model's allocation); nothing is written unless every model plans.
"""

from __future__ import annotations

import json
from pathlib import Path

from speech.schema.plan_artifacts import BudgetAllocation, PlanArtifact, plan_filename
from speech.schema.config import StackConfig
from speech.errors import ConfigError
from speech.files import write_artifact
from speech.deploy.gate import ModelDeployment, apply_budget, plan_model
from speech.deploy.hosting import endpoint_name
from speech.infra.stack_config import Warn, load_stack_file, stack_file, stack_name

from speech.plan.batch import batch_plan_filename
from bench.report.text import MARK


def budget_filename(stack: str) -> str:
    return f"budget-{stack}.json"


def load_stack(path: Path, *, warn: Warn | None = None) -> StackConfig:
    """The stack file's ``speech-endpoints:*`` config as the program reads it (same parser; artifact
    references resolved against the file's directory)."""
    if not path.exists():
        raise ConfigError(f"{path}: no such stack file; write models into it with bench plan --qmax ... --stack NAME")
    return load_stack_file(path, warn=warn)


def plan_stack(config: StackConfig, stack: str) -> tuple[dict[str, ModelDeployment], BudgetAllocation | None]:
    """Every model planned and gated as the program does, then capped by the budget."""
    endpoints = {name: endpoint_name(stack, name) for name in config.models}
    deployments = {
        name: plan_model(name, model, endpoint=endpoints[name], allow_config_mismatch=config.allow_config_mismatch)
        for name, model in config.models.items()
    }
    return apply_budget(deployments, config, endpoints=endpoints)


def render(stack: str, deployments: dict[str, ModelDeployment], allocation: BudgetAllocation | None) -> str:
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


def run_stack(stack: str, stack_dir: Path, out_dir: Path, as_json: bool) -> int:
    """Re-plan every model of ``Pulumi.<stack>.yaml``; exit 1 when a plan or the budget has a stop."""
    config = load_stack(stack_file(stack_dir, stack))
    stack = stack_name(stack)
    deployments, allocation = plan_stack(config, stack)
    # Everything is computed; only now write, each file atomically.
    written: list[Path] = []
    plans: dict[str, PlanArtifact] = {n: d.plan for n, d in deployments.items() if d.plan is not None}
    batches = {n: d.batch for n, d in deployments.items() if d.batch is not None}
    for plan in plans.values():
        written.append(write_artifact(out_dir / plan_filename(plan), plan))
    for batch in batches.values():
        written.append(write_artifact(out_dir / batch_plan_filename(batch), batch))
    if allocation is not None:
        written.append(write_artifact(out_dir / budget_filename(stack), allocation))
    if as_json:
        print(json.dumps({
            "stack": stack,
            "plans": {n: json.loads(p.model_dump_json()) for n, p in plans.items()},
            "batch_plans": {n: json.loads(b.model_dump_json()) for n, b in batches.items()},
            "budget": json.loads(allocation.model_dump_json()) if allocation is not None else None,
        }, indent=2))
    else:
        print(render(stack, deployments, allocation))
        print("\nwrote " + ", ".join(str(p) for p in written) if written else "\nnothing measured: no plan written")
    stop = (any(p.verdict == "stop" for p in [*plans.values(), *batches.values()])
            or (allocation is not None and allocation.verdict == "stop"))
    return 1 if stop else 0
