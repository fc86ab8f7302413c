"""The gate: whether a model gets scaling resources, and the per-model plan behind that answer.

Pure (no pulumi): the program, the offline preview, the tests and the policy pack all call the
same functions, so "why is there no autoscaling?" has one answer everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..artifacts import PlanArtifact
from ..config import ModelConfig
from ..errors import ConfigError, FingerprintMismatch, PlanInputError
from ..plan import build_plan
from ..provenance import ProvenanceDocument, document_key, document_text

CONFIG_KEY = "speech-endpoints:models"


@dataclass(frozen=True)
class GateDecision:
    enabled: bool
    reason: str


def gate(model: ModelConfig, plan: Optional[PlanArtifact], *, allow_config_mismatch: bool = False) -> GateDecision:
    """Scaling exists only for a measured, feasible plan that has something to scale.

    Reference-origin artifacts pass (the plan carries a provenance warn finding); whether
    reference numbers may deploy is the policy pack's call, not the program's.
    """
    if model.measurements is None or plan is None:
        return GateDecision(
            False,
            "no measurements in stack config: run bench qmax and bench ttotal on this endpoint, then "
            "bench plan --stack <stack> to add them",
        )
    deployed = model.fingerprint()
    if plan.fingerprint != deployed and not allow_config_mismatch:
        # A new image or instance type has new latency: measurements of the old one say nothing.
        return GateDecision(
            False,
            f"measurements describe {plan.fingerprint.slug} but the stack deploys {deployed.slug} "
            f"({model.instance_type}, {model.image_digest[:19]}): re-measure this image/instance",
        )
    stops = [f for f in plan.findings if f.level == "stop"]
    if stops:
        names = ", ".join(f.name for f in stops)
        return GateDecision(False, f"plan has stop findings ({names}): {stops[0].message}")
    if plan.fleet.max_instances <= plan.fleet.min_instances:
        return GateDecision(
            False,
            f"plan fleet min {plan.fleet.min_instances} == max {plan.fleet.max_instances}: nothing to scale "
            "(raise max_instances or peak_rps to get autoscaling)",
        )
    return GateDecision(
        True,
        f"measured plan ({plan.provenance.origin}, verdict {plan.verdict}): scale "
        f"{plan.fleet.min_instances}..{plan.fleet.max_instances} at target {plan.thresholds.scaling_target_value:g}",
    )


@dataclass(frozen=True)
class ModelDeployment:
    """Everything the components need for one model, decided before any resource exists."""

    name: str
    config: ModelConfig
    plan: Optional[PlanArtifact]
    gate: GateDecision
    document: Optional[ProvenanceDocument]
    document_text: Optional[str]
    document_key: Optional[str]

    @property
    def min_instances(self) -> int:
        return self.plan.fleet.min_instances if self.plan else self.config.plan.min_instances


def plan_model(name: str, model: ModelConfig, *, allow_config_mismatch: bool = False) -> ModelDeployment:
    """Plan one model with :func:`speech.plan.build_plan` (the one plan function) and gate it.

    Inputs build_plan refuses outright become a :class:`ConfigError` naming the config key.
    """
    key = f"{CONFIG_KEY}.{name}"
    if model.measurements is None:
        return ModelDeployment(name, model, None, gate(model, None), None, None, None)
    m = model.measurements
    if m.qmax.model != name:
        raise ConfigError(
            f"{key}.measurements.qmax.model: artifact is for model {m.qmax.model!r}, not {name!r}; "
            f"put it under {CONFIG_KEY}.{m.qmax.model} or re-run bench plan --stack"
        )
    try:
        plan = build_plan(
            m.qmax,
            m.ttotal,
            model.plan,
            allow_config_mismatch=allow_config_mismatch,
            max_instances_cap=model.max_instances,
        )
    except FingerprintMismatch as err:
        raise ConfigError(f"{key}.measurements: {err}") from None
    except PlanInputError as err:
        raise ConfigError(f"{key}: {err}") from None
    doc = ProvenanceDocument(
        model=name,
        instance_type=model.instance_type,
        image=model.image,
        inputs=model.plan,
        measurements=m,
        allow_config_mismatch=allow_config_mismatch,
        max_instances_cap=model.max_instances,
    )
    return ModelDeployment(
        name=name,
        config=model,
        plan=plan,
        gate=gate(model, plan, allow_config_mismatch=allow_config_mismatch),
        document=doc,
        document_text=document_text(doc),
        document_key=document_key(name, plan.fingerprint.slug),
    )
