"""Re-plan every model of a stack file from the measurements it references and its inputs, under
the stack's daily budget (``bench plan --stack NAME`` without artifacts).

The same path as the program (:func:`speech.deploy.gate.plan_and_budget`: plan_model, apply_budget
and the weights-against-instance check, hence :func:`speech.plan.realtime.build_plan` and
:func:`speech.plan.budget.allocate`), so the plans made here are the ones the program deploys and
the pack recomputes. Computes only: ``bench plan`` prints them and writes ``plan-<model>.json``,
``batch-plan-<model>.json`` and ``budget-<stack>.json`` (:func:`budget_filename`).
"""

from __future__ import annotations

from pathlib import Path

from speech.deploy.gate import ModelDeployment, plan_and_budget
from speech.deploy.hosting import endpoint_name
from speech.errors import ConfigError
from speech.schema.config import StackConfig
from speech.schema.plan_artifacts import BudgetAllocation
from speech.stack.read import Warn, load_stack_file


def budget_filename(stack: str) -> str:
    return f"budget-{stack}.json"


def load_stack(path: Path, *, warn: Warn | None = None) -> StackConfig:
    """The stack file's ``speech-endpoints:*`` config as the program reads it (same parser; artifact
    references resolved against the file's directory)."""
    if not path.exists():
        raise ConfigError(f"{path}: no such stack file; write models into it with bench plan --qmax ... --stack NAME")
    return load_stack_file(path, warn=warn)


def plan_stack(config: StackConfig, stack: str) -> tuple[dict[str, ModelDeployment], BudgetAllocation | None]:
    """Every model planned, gated and capped by the budget as the program does (the same path,
    :func:`speech.deploy.gate.plan_and_budget`)."""
    return plan_and_budget(config, {name: endpoint_name(stack, name) for name in config.models})
