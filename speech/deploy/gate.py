"""The gate: whether a model gets scaling resources, and the per-model plan behind that answer
(docs/design.md §6).

Pure (imports no pulumi, no boto3): the program and the offline preview (``python -m speech
preview``, which runs the program under mocks) call it, so "why is there no autoscaling?" has one
answer in both. The policy pack does not call it: it judges the resources a stack would create,
not the stack config, and re-checks the gate's conditions on them from the provenance document
(``scaling-plan-feasible``: stop findings; ``deployment-matches-fingerprint``: the measured
instance type and image).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from speech.deploy.provenance import ProvenanceDocument, document_key, document_text, target_binding_problem
from speech.deploy.receipts import ReceiptProblem
from speech.deploy.weights import layout_for_instance
from speech.errors import ConfigError, FingerprintMismatch, PlanInputError
from speech.plan.batch import BatchPlan, build_batch_plan
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint
from speech.schema.config import Measurements, ModelConfig, StackConfig
from speech.schema.plan_artifacts import BudgetAllocation, Finding, ModelAllocation, PlanArtifact
from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR

if TYPE_CHECKING:
    from speech.schema.copy_plan import CopyPlan

CONFIG_KEY = "speech-endpoints:models"
BUILT_IMAGE = "built by the stack from container/Dockerfile"
"""What the provenance document says about the image when the program builds it."""


GateCode = Literal["measured_plan", "unmeasured", "target_binding", "instance_type_mismatch", "fingerprint_mismatch",
                   "plan_stop", "nothing_to_scale", "receipt_missing", "receipt_mismatch", "copy_fingerprint_mismatch"]
"""Stable keys of the gate's decisions: what the stack outputs carry (``scaling.<model>.reason_code``),
while the prose stays in ``reason`` (logs, preview) and the plan artifact."""


@dataclass(frozen=True)
class GateDecision:
    enabled: bool
    reason: str
    code: GateCode


def _bound_and_matching(model: ModelConfig, fp: Fingerprint, findings: list[Finding], *, name: str, endpoint: str,
                        allow_config_mismatch: bool, what: str = "measurements describe",
                        plan_name: str = "plan") -> GateDecision | None:
    """The checks every gate shares, in order; the first failing one as a closed gate, else None.

    The measurements name this endpoint (or the configured ``measured_on`` one); they describe the
    deployed fingerprint (a new image or instance type has new latency: measurements of the old one
    say nothing; while the program builds the image only the instance type is compared now, the
    digest once pushed: :func:`image_matches_measurements`); the plan has no stop finding."""
    assert model.measurements is not None
    bound = target_binding_problem(name, model.measurements, endpoint, model.measured_on)
    if bound:
        return GateDecision(False, bound, "target_binding")
    deployed = model.fingerprint()
    if deployed is None:
        if fp.instance_type != model.instance_type and not allow_config_mismatch:
            return GateDecision(False, f"{what} {fp.slug} ({fp.instance_type}) but the stack deploys "
                                f"{model.instance_type}: re-measure this instance type", "instance_type_mismatch")
    elif fp != deployed and not allow_config_mismatch:
        return GateDecision(False, f"{what} {fp.slug} but the stack deploys {deployed.slug} ({model.instance_type}, "
                            f"{(model.image_digest or '')[:19]}): re-measure this image/instance", "fingerprint_mismatch")
    stops = [f for f in findings if f.level == "stop"]
    if stops:
        names = ", ".join(f.name for f in stops)
        return GateDecision(False, f"{plan_name} has stop findings ({names}): {stops[0].message}", "plan_stop")
    return None


def gate(model: ModelConfig, plan: PlanArtifact | None, *, name: str, endpoint: str,
         allow_config_mismatch: bool = False) -> GateDecision:
    """Scaling exists only for a measured, feasible plan that has something to scale.

    Reference-origin artifacts pass (the plan carries a provenance warn finding); whether
    reference numbers may deploy is the policy pack's call, not the program's.
    """
    if model.measurements is None or plan is None:
        return GateDecision(
            False,
            "no measurements in stack config: run bench qmax and bench ttotal on this endpoint, then "
            "bench plan --stack <stack> to add them",
            "unmeasured",
        )
    problem = _bound_and_matching(model, plan.fingerprint, plan.findings, name=name, endpoint=endpoint,
                                  allow_config_mismatch=allow_config_mismatch)
    if problem:
        return problem
    if plan.fleet.max_instances <= plan.fleet.min_instances:
        return GateDecision(
            False,
            f"plan fleet min {plan.fleet.min_instances} == max {plan.fleet.max_instances}: nothing to scale "
            "(raise max_instances or peak_rps to get autoscaling)",
            "nothing_to_scale",
        )
    built = (
        f"; the image built by the stack must have digest {plan.fingerprint.image_digest[:19]}... (checked once "
        "it is pushed, before the Model is created)"
        if model.fingerprint() is None and not allow_config_mismatch else ""
    )
    label = ("measured plan" if plan.provenance.origin == "measured"
             else f"plan from {plan.provenance.origin} figures, not measurements of this endpoint")
    return GateDecision(
        True,
        f"{label} (origin {plan.provenance.origin}, verdict {plan.verdict}): scale "
        f"{plan.fleet.min_instances}..{plan.fleet.max_instances} at target {plan.thresholds.scaling_target_value:g}"
        + built,
        "measured_plan",
    )


def with_receipts(decision: GateDecision, problems: list[ReceiptProblem]) -> GateDecision:
    """The gate once the program has read the receipts (:func:`speech.deploy.receipts.receipt_problem`
    per measured SageMaker artifact): a missing or mismatched receipt keeps scaling off. A gate
    already off keeps its own reason (the first thing to fix)."""
    if not decision.enabled or not problems:
        return decision
    first = problems[0]
    more = f" (and {len(problems) - 1} more receipt problem(s))" if len(problems) > 1 else ""
    return GateDecision(False, first.message + more, first.code)


def gate_components(model: ModelConfig, copy_plan: CopyPlan | None, *, name: str, endpoint: str,
                    allow_config_mismatch: bool = False) -> GateDecision:
    """Copy scaling (``hosting: components``) exists only for a measured, feasible copy plan.

    The same checks as :func:`gate`, on the copy plan: measurements bound to this endpoint; the
    deployed fingerprint equal to what Q_max per copy was measured on, and the copy (footprint,
    T_copy) measured on that same fingerprint; no stop finding (a copy that fits no instance, an
    infeasible SLO, a capped fleet); a copy range to scale in.
    """
    if model.measurements is None or model.measurements.tcopy is None or copy_plan is None:
        return GateDecision(
            False,
            "no copy measurements in stack config: run bench qmax against one copy, bench ttotal and bench tcopy, "
            "then bench plan --stack <stack> --tcopy <copy artifact> to add them",
            "unmeasured",
        )
    fp = copy_plan.fingerprint
    problem = _bound_and_matching(model, fp, copy_plan.findings, name=name, endpoint=endpoint,
                                  allow_config_mismatch=allow_config_mismatch, what="Q_max per copy was measured on",
                                  plan_name="copy plan")
    if problem:
        return problem
    tcopy = model.measurements.tcopy
    if tcopy.fingerprint != fp and not allow_config_mismatch:
        return GateDecision(
            False,
            f"the copy's footprint and T_copy were measured on {tcopy.fingerprint.slug}, Q_max per copy on {fp.slug}: "
            "a footprint says nothing about another image or instance; run bench tcopy on the deployed one",
            "copy_fingerprint_mismatch",
        )
    c = copy_plan.copies
    if c.max_copies <= c.min_copies:
        return GateDecision(
            False,
            f"copy plan copies min {c.min_copies} == max {c.max_copies}: nothing to scale (raise max_instances or "
            "peak_rps to get copy scaling)",
            "nothing_to_scale",
        )
    origin = copy_plan.provenance.origin
    label = "measured copy plan" if origin == "measured" else f"copy plan from {origin} figures, not measurements of this endpoint"
    inst = copy_plan.instances
    return GateDecision(
        True,
        f"{label} (origin {origin}, verdict {copy_plan.verdict}): copies {c.min_copies}..{c.max_copies} at target "
        f"{copy_plan.scaling.target_value:g} per copy, instances {inst.min_instances}..{inst.max_instances} "
        f"({copy_plan.packing.copies_per_instance} per {copy_plan.packing.instance.instance_type})",
        "measured_plan",
    )


def copy_plan_of(name: str, model: ModelConfig, *, allow_config_mismatch: bool = False) -> CopyPlan | None:
    """The copy plan of a ``hosting: components`` model (speech.plan.copies.build_copy_plan), or None
    for other hosting; inputs it refuses become a :class:`ConfigError` naming the config key."""
    m = model.measurements
    if model.hosting != "components" or m is None or m.tcopy is None:
        return None
    from speech.plan.copies import build_copy_plan

    inputs = model.components_inputs
    try:
        return build_copy_plan(m.qmax, m.tcopy, model.plan, instance=model.instance_type, ttotal=m.ttotal,
                               min_copies=inputs.min_copies, max_instances_cap=model.max_instances,
                               margin=inputs.footprint_margin)
    except PlanInputError as err:
        raise ConfigError(f"{CONFIG_KEY}.{name}: {err}") from None


def image_matches_measurements(model_name: str, dep_plan: PlanArtifact | None, gate_enabled: bool,
                               built_digest: str, *, allow_config_mismatch: bool = False,
                               dockerfile: str = "container/Dockerfile") -> str | None:
    """None when a built image may run under this deployment's scaling, else the reason it may not
    (naming ``dockerfile``, the one the image was built from: the CPU image's is container/Dockerfile.cpu).

    The image the program builds is known only after its push. Scaling was planned from
    measurements of one digest; a different digest has different latency, so the deployment
    stops before the Model is created (fail closed) instead of scaling an unmeasured image.
    """
    if not gate_enabled or dep_plan is None or allow_config_mismatch:
        return None
    measured = dep_plan.fingerprint.image_digest
    if built_digest == measured:
        return None
    return (
        f"{CONFIG_KEY}.{model_name}: the image built from {dockerfile} has digest {built_digest}, but the "
        f"measurements in stack config describe {measured} ({dep_plan.fingerprint.slug}); their scaling says nothing "
        f"about this image. Fix: deploy it without scaling first (remove {CONFIG_KEY}.{model_name}.measurements, "
        "pulumi up), measure it (bench qmax, bench ttotal) and re-plan (bench plan --stack); or pin the measured "
        "image with image: <repository url>@" + measured
    )


@dataclass(frozen=True)
class ModelDeployment:
    """Everything the components need for one model, decided before any resource exists."""

    name: str
    config: ModelConfig
    plan: PlanArtifact | None
    gate: GateDecision
    document: ProvenanceDocument | None
    document_text: str | None
    document_key: str | None
    copy_plan: CopyPlan | None = None
    """``hosting: components``: the copy plan the component and its scaling come from."""
    budget: ModelAllocation | None = None
    """This model's share of the stack's daily budget (:func:`apply_budget`); None without a budget."""
    batch: BatchPlan | None = None
    """The batch plan of a ``hosting: async`` model (``plan`` is then None: no real-time scaling)."""

    @property
    def min_instances(self) -> int:
        return self.plan.fleet.min_instances if self.plan else self.config.plan.min_instances


def plan_model(name: str, model: ModelConfig, *, endpoint: str, allow_config_mismatch: bool = False) -> ModelDeployment:
    """Plan one model with :func:`speech.plan.realtime.build_plan` (the one plan function) and gate it.

    Inputs build_plan refuses outright become a :class:`ConfigError` naming the config key.
    """
    key = f"{CONFIG_KEY}.{name}"
    if model.measurements is None:
        return ModelDeployment(name, model, None, gate(model, None, name=name, endpoint=endpoint), None, None, None)
    m = model.measurements
    if m.qmax.model != name:
        raise ConfigError(
            f"{key}.measurements.qmax.model: artifact is for model {m.qmax.model!r}, not {name!r}; "
            f"put it under {CONFIG_KEY}.{m.qmax.model} or re-run bench plan --stack"
        )
    try:
        if model.hosting == "async":
            return _plan_batch_model(name, model, endpoint=endpoint, allow_config_mismatch=allow_config_mismatch)
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
    doc = provenance_document(name, model, m, allow_config_mismatch=allow_config_mismatch)
    copy_plan = copy_plan_of(name, model, allow_config_mismatch=allow_config_mismatch)
    fits = next((f for f in copy_plan.findings if f.name == "copy_fits"), None) if copy_plan is not None else None
    if fits is not None and fits.level == "stop":
        # Not a scaling question: SageMaker could not place even the first copy.
        raise ConfigError(f"{key}.instance_type: {fits.message} (hosting: components); nothing can deploy")
    decision = (
        gate_components(model, copy_plan, name=name, endpoint=endpoint, allow_config_mismatch=allow_config_mismatch)
        if model.hosting == "components"
        else gate(model, plan, name=name, endpoint=endpoint, allow_config_mismatch=allow_config_mismatch)
    )
    return ModelDeployment(
        name=name,
        config=model,
        plan=plan,
        gate=decision,
        document=doc,
        document_text=document_text(doc),
        document_key=document_key(name, plan.fingerprint.slug),
        copy_plan=copy_plan,
    )


def apply_budget(deployments: Mapping[str, ModelDeployment], config: StackConfig, *,
                 endpoints: Mapping[str, str]) -> tuple[dict[str, ModelDeployment], BudgetAllocation | None]:
    """Every model under the stack's daily budget, by :func:`speech.plan.budget.allocate` (the one
    allocation function): each plan's max_instances capped at its allocation with its ``budget``
    finding, the provenance document recording the allocation and the budget (so the pack
    recomputes the same capped plan), and the gate decided again on the capped plan. Without a
    budget the deployments come back unchanged.
    """
    from speech.plan.budget import allocate, apply_allocation, apply_batch_allocation, batch_need, realtime_need

    if config.budget is None:
        return dict(deployments), None
    needs = [batch_need(name, dep.config, dep.batch.peak_instances if dep.batch is not None else None)
             if dep.config.hosting == "async" else realtime_need(name, dep.config, dep.plan)
             for name, dep in deployments.items()]
    allocation = allocate(needs, config.budget)
    out: dict[str, ModelDeployment] = {}
    for name, dep in deployments.items():
        alloc = allocation.of(name)
        if dep.document is None or (dep.plan is None and dep.batch is None):
            out[name] = replace(dep, budget=alloc)
            continue
        doc = dep.document.model_copy(update={"budget": alloc, "stack_budget": config.budget})
        endpoint, mismatch = endpoints[name], config.allow_config_mismatch
        if dep.batch is not None:
            batch = apply_batch_allocation(dep.batch, alloc)
            decision = gate_batch(dep.config, batch, name=name, endpoint=endpoint, allow_config_mismatch=mismatch)
            plan, cap = None, batch.max_instances
        else:
            assert dep.plan is not None  # a deployment without either plan was passed through above
            batch, plan = None, apply_allocation(dep.plan, alloc)
            decision = gate(dep.config, plan, name=name, endpoint=endpoint, allow_config_mismatch=mismatch)
            cap = plan.fleet.max_instances
        if decision.enabled and alloc.max_instances < alloc.peak_instances:
            decision = replace(decision, reason=f"{decision.reason}; capped by the daily budget at {cap} of the "
                               f"{alloc.peak_instances} instances its peak needs ({alloc.priority})")
        out[name] = replace(dep, plan=plan, batch=batch, gate=decision, document=doc, document_text=document_text(doc),
                            budget=alloc)
    return out, allocation


def gate_batch(model: ModelConfig, plan: BatchPlan, *, name: str, endpoint: str,
               allow_config_mismatch: bool = False) -> GateDecision:
    """:func:`gate` for a batch plan: the same measurement, binding and fingerprint conditions
    (checked by :func:`gate` on the plan's fingerprint), then the batch plan's stop findings.
    A batch plan always has something to scale (0..max_instances >= 1)."""
    problem = _bound_and_matching(model, plan.fingerprint, plan.findings, name=name, endpoint=endpoint,
                                  allow_config_mismatch=allow_config_mismatch, plan_name="batch plan")
    if problem:
        return problem
    return GateDecision(
        True,
        f"batch plan (origin {plan.provenance.origin}, verdict {plan.verdict}): scale 0..{plan.max_instances} on "
        f"backlog per instance {plan.backlog_target_per_instance}, wake from zero on a backlog",
        "measured_plan",
    )


def provenance_document(name: str, model: ModelConfig, measurements: Measurements, *,
                        allow_config_mismatch: bool) -> ProvenanceDocument:
    """The provenance document of a model deployment (any hosting): everything its plan is
    recomputed from; ``components`` inputs only for ``hosting: components``."""
    return ProvenanceDocument(
        model=name,
        instance_type=model.instance_type,
        image=model.image or (model.kubernetes.image if model.kubernetes is not None else BUILT_IMAGE),
        inputs=model.plan,
        measurements=measurements,
        allow_config_mismatch=allow_config_mismatch,
        max_instances_cap=model.max_instances,
        measured_on=model.measured_on,
        hosting=model.hosting,
        components=model.components_inputs if model.hosting == "components" else None,
    )


def _plan_batch_model(name: str, model: ModelConfig, *, endpoint: str, allow_config_mismatch: bool) -> ModelDeployment:
    """A ``hosting: async`` model: the batch plan (speech.plan.batch) instead of the real-time one."""
    m = model.measurements
    assert m is not None
    batch = build_batch_plan(m.qmax, m.ttotal, model.plan, allow_config_mismatch=allow_config_mismatch,
                             max_instances_cap=model.max_instances)
    doc = provenance_document(name, model, m, allow_config_mismatch=allow_config_mismatch)
    return ModelDeployment(
        name=name,
        config=model,
        plan=None,
        gate=gate_batch(model, batch, name=name, endpoint=endpoint, allow_config_mismatch=allow_config_mismatch),
        document=doc,
        document_text=document_text(doc),
        document_key=document_key(name, batch.fingerprint.slug),
        batch=batch,
    )


def plan_and_budget(config: StackConfig, endpoints: Mapping[str, str]
                    ) -> tuple[dict[str, ModelDeployment], BudgetAllocation | None]:
    """The one plan-then-budget path: plan and gate every model of a stack (``endpoints``: model ->
    its endpoint or workload name), cap each fleet at its share of the stack's daily budget
    (:func:`apply_budget`), then check that each SageMaker model's weights run on its instance
    (:func:`check_layouts`). What the Pulumi program, ``speech-deploy render`` and ``bench plan
    --stack NAME`` all plan from, so a stack one of them refuses, every one refuses."""
    deployments = {
        name: plan_model(name, model, endpoint=endpoints[name], allow_config_mismatch=config.allow_config_mismatch)
        for name, model in config.models.items()
    }
    deployments, allocation = apply_budget(deployments, config, endpoints=endpoints)
    check_layouts(deployments, config)
    return deployments, allocation


def plan_models(config: StackConfig, endpoints: Mapping[str, str]) -> dict[str, ModelDeployment]:
    """:func:`plan_and_budget`'s deployments."""
    return plan_and_budget(config, endpoints)[0]


def check_layouts(deployments: Mapping[str, ModelDeployment], config: StackConfig) -> None:
    """The weights decide the backend, the instance decides which backend it can run: both, before
    anything is created (a ConfigError naming the model's key). A Kubernetes model's image carries
    its weights and its backend follows its instance type (speech.deploy.kubernetes)."""
    prices = config.budget.prices() if config.budget is not None else DEFAULT_PRICES_USD_PER_HOUR
    for name, dep in deployments.items():
        if dep.config.hosting != "kubernetes":
            layout_for_instance(dep.config.instance_type, dep.config.weights_source, f"speech-endpoints:models.{name}",
                                prices)
