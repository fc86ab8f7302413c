"""``bench plan --stack NAME``'s re-plan of every model of a stack file, the one function the
command calls for it (:func:`replan_stack`; :func:`migrate_stack` for ``--migrate-config``): the
stack read, every model planned under the stack's budget (speech.stack.replan.plan_stack, the
program's plan-then-budget path), then the plans and the allocation written, each atomically, only
once every model has planned."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.errors import UsageError
from speech.deploy.gate import ModelDeployment
from speech.files import write_artifact
from speech.plan.batch import BatchPlan, batch_plan_filename
from speech.schema.config import ArtifactRef
from speech.schema.plan_artifacts import BudgetAllocation, PlanArtifact, plan_filename
from speech.stack.read import stack_file, stack_name
from speech.stack.replan import budget_filename, load_stack, plan_stack
from speech.stack.write import migrate_stack_file


@dataclass(frozen=True)
class StackReplan:
    """A stack re-planned: each model's deployment, the budget's allocation (None without a budget)
    and the files written, in order."""

    stack: str
    deployments: dict[str, ModelDeployment]
    allocation: BudgetAllocation | None
    written: list[Path]

    @property
    def plans(self) -> dict[str, PlanArtifact]:
        return {n: d.plan for n, d in self.deployments.items() if d.plan is not None}

    @property
    def batches(self) -> dict[str, BatchPlan]:
        return {n: d.batch for n, d in self.deployments.items() if d.batch is not None}

    @property
    def stop(self) -> bool:
        """A plan or the budget has a stop finding."""
        planned: list[PlanArtifact | BatchPlan] = [*self.plans.values(), *self.batches.values()]
        return (any(p.verdict == "stop" for p in planned)
                or (self.allocation is not None and self.allocation.verdict == "stop"))


def replan_stack(stack: str, stack_dir: Path, out_dir: Path) -> StackReplan:
    """Re-plan every model of ``Pulumi.<stack>.yaml`` in ``stack_dir``. Writes ``plan-<model>.json``
    per measured real-time model (with its ``budget`` section when the stack has a budget),
    ``batch-plan-<model>.json`` per batch model and ``budget-<stack>.json`` into ``out_dir``;
    nothing is written unless every model plans."""
    config = load_stack(stack_file(stack_dir, stack))
    stack = stack_name(stack)
    deployments, allocation = plan_stack(config, stack)
    replan = StackReplan(stack, deployments, allocation, [])
    # Everything is computed; only now write, each file atomically.
    for plan in replan.plans.values():
        replan.written.append(write_artifact(out_dir / plan_filename(plan), plan))
    for batch in replan.batches.values():
        replan.written.append(write_artifact(out_dir / batch_plan_filename(batch), batch))
    if allocation is not None:
        replan.written.append(write_artifact(out_dir / budget_filename(stack), allocation))
    return replan


@dataclass(frozen=True)
class Migration:
    """``--migrate-config``: the stack file, its size before and after, and each reference written
    (key, reference, the artifact file written or None when the same one was already there)."""

    path: Path
    bytes_before: int
    bytes_after: int
    changes: list[tuple[str, ArtifactRef, Path | None]]


def migrate_stack(stack: str, stack_dir: Path) -> Migration:
    """``--stack NAME --migrate-config``: embedded artifacts -> files + references; the stack file
    then loads to the same config (checked before this returns)."""
    path = stack_file(stack_dir, stack)
    before_bytes = path.stat().st_size if path.exists() else 0
    before = load_stack(path, warn=lambda _m: None)
    changes = migrate_stack_file(path)
    after = load_stack(path)
    if after != before:  # cannot happen unless an artifact file changed under us: say so, loudly
        raise UsageError(f"{path}: after migration the stack loads to a different config; restore it from version "
                         "control and re-run --migrate-config")
    return Migration(path, before_bytes, path.stat().st_size, list(changes))
