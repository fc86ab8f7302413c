"""The provenance contract between the program, the policy pack and the bench tools.

The program tags the endpoint and the scalable target with a few short values (``speech:*``) and
stores the full measurements plus chosen inputs as one canonical JSON document next to the
weights (an S3 object, ``provenance/<model>/<slug>.json``). The policy pack finds that document,
checks its sha256 against the tags, recomputes the plan with :func:`speech.plan.realtime.build_plan` and
compares it with what the stack would deploy. Fail closed: a missing or broken document is a
violation, never a pass.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError, model_serializer

from speech.errors import ArtifactError, describe_validation_error
from speech.schema.artifacts import Frozen, canonical_sha256
from speech.schema.config import Budget, ComponentsConfig, Hosting, MeasuredOn, Measurements, PlanInputs
from speech.schema.plan_artifacts import ModelAllocation, PlanArtifact

if TYPE_CHECKING:
    from speech.plan.batch import BatchPlan

TAG_PREFIX = "speech:"
TAG_MODEL = "speech:model"
TAG_ORIGIN = "speech:origin"
TAG_SLUG = "speech:fingerprint-slug"
TAG_QMAX_SHA = "speech:qmax-sha256"
TAG_TTOTAL_SHA = "speech:ttotal-sha256"
TAG_DOC_SHA = "speech:provenance-sha256"
TAG_Q_MAX = "speech:q-max"
TAG_T_TOTAL = "speech:planning-t-total-s"
TAG_SLO = "speech:slo-ms"
TAG_SURGE = "speech:surge-ratio"
TAG_VERDICT = "speech:plan-verdict"

PROVENANCE_PREFIX = "provenance"
"""Key prefix of provenance documents inside the weights bucket."""


class ProvenanceDocument(Frozen):
    """What was measured and chosen, enough to recompute the plan anywhere."""

    schema_version: int = 1
    kind: str = "provenance"
    model: str
    instance_type: str
    image: str
    inputs: PlanInputs
    measurements: Measurements
    allow_config_mismatch: bool = False
    max_instances_cap: int | None = None
    measured_on: MeasuredOn | None = None
    """The stack config's other endpoint whose measurements this model may deploy."""
    hosting: Hosting = "realtime"
    """How the model is hosted; ``components``: the copy plan is recomputed too (speech.plan.copies)."""
    components: ComponentsConfig | None = None
    """The components inputs in force (``hosting: components`` only)."""
    budget: ModelAllocation | None = None
    """This model's allocation under the stack's daily budget (speech.plan.budget.allocate): the pack
    caps the recomputed plan with it and checks it against the allocation it recomputes."""
    stack_budget: Budget | None = None
    """The stack's budget (daily USD, prices) the allocation was made under."""

    @model_serializer(mode="wrap")
    def _omit_absent_budget(self, handler: Any) -> Any:
        # Documents of stacks without a budget keep their bytes (and their sha256 tag).
        data = handler(self)
        if isinstance(data, dict):
            for key in ("budget", "stack_budget"):
                if key in data and data[key] is None:
                    del data[key]
        return data


def target_binding_problem(model: str, measurements: Measurements, endpoint: str,
                           measured_on: MeasuredOn | None) -> str | None:
    """None when every measured artifact with a SageMaker fingerprint was measured on ``endpoint``
    (this stack's) or on the endpoint ``measured_on`` names; else the one message the gate and the
    policy pack both report. Reference and assumption figures name no target (their origin is
    judged separately); local measurements cannot describe a SageMaker fingerprint (the schema)."""
    allowed = [endpoint] + ([measured_on.endpoint] if measured_on is not None else [])
    for kind, art in (("qmax", measurements.qmax), ("ttotal", measurements.ttotal)):
        prov = art.provenance
        if prov.origin != "measured" or not art.fingerprint.instance_type.startswith("ml."):
            continue
        measured = prov.target_endpoint
        if measured in allowed:
            continue
        also = f" or the measured_on endpoint {measured_on.endpoint!r}" if measured_on is not None else ""
        return (
            f"models.{model}.measurements.{kind} was measured on {prov.target!r}, not on this stack's endpoint "
            f"{endpoint!r}{also}: another endpoint's figures say nothing about this one. Fix: measure this endpoint "
            f"(bench {kind} --endpoint {endpoint}, then bench plan --stack), or, when {measured!r} runs the same "
            f"instance type and image, name it in the model's stack config: measured_on: {{endpoint: {measured}, "
            "why: <the reason>}}"
        )
    return None


def document_key(model: str, slug: str) -> str:
    return f"{PROVENANCE_PREFIX}/{model}/{slug}.json"


def document_text(doc: ProvenanceDocument) -> str:
    """Canonical JSON (sorted keys, compact): the same bytes wherever it is produced."""
    return json.dumps(json.loads(doc.model_dump_json()), sort_keys=True, separators=(",", ":"))


def document_sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def parse_document(text: str, where: str) -> ProvenanceDocument:
    """Read a provenance document; any flaw is an :class:`ArtifactError` naming ``where``."""
    try:
        return ProvenanceDocument.model_validate_json(text)
    except ValidationError as err:
        raise ArtifactError(describe_validation_error(err, where, label="provenance field ")) from None


TAGS = (TAG_MODEL, TAG_ORIGIN, TAG_SLUG, TAG_QMAX_SHA, TAG_TTOTAL_SHA, TAG_DOC_SHA, TAG_Q_MAX, TAG_T_TOTAL, TAG_SLO,
        TAG_SURGE, TAG_VERDICT)
"""Every provenance tag, in the order they are written; a reader requires all of them."""


def plan_tags(plan: PlanArtifact, measurements: Measurements) -> dict[str, str]:
    """The tags that follow from the plan and its measurements: the one mapping from a plan to
    tag values, used to write them (:func:`provenance_tags`) and by the pack to check them
    against the plan it recomputes (policy/recompute.py)."""
    return {
        TAG_ORIGIN: plan.provenance.origin,
        TAG_QMAX_SHA: canonical_sha256(measurements.qmax),
        TAG_TTOTAL_SHA: canonical_sha256(measurements.ttotal),
        TAG_Q_MAX: str(plan.q_max),
        TAG_T_TOTAL: f"{plan.t_total.planning_s:g}",
        TAG_SLO: f"{plan.inputs.slo_ms:g}",
        TAG_SURGE: f"{plan.inputs.surge_ratio:g}",
        TAG_VERDICT: plan.verdict,
    }


def batch_plan_tags(plan: BatchPlan, measurements: Measurements) -> dict[str, str]:
    """The same tags for a batch model (speech.plan.batch): its planning time is the cold start from
    zero, its verdict the batch plan's; SLO and surge ratio are the inputs as chosen."""
    return {
        TAG_ORIGIN: plan.provenance.origin,
        TAG_QMAX_SHA: canonical_sha256(measurements.qmax),
        TAG_TTOTAL_SHA: canonical_sha256(measurements.ttotal),
        TAG_Q_MAX: str(plan.q_max),
        TAG_T_TOTAL: f"{plan.cold_start.total_s:g}",
        TAG_SLO: f"{measurements.qmax.slo.ttfab_p95_ms:g}",
        TAG_SURGE: "1",
        TAG_VERDICT: plan.verdict,
    }


def any_plan_tags(plan: PlanArtifact | BatchPlan, measurements: Measurements) -> dict[str, str]:
    """:func:`plan_tags` or :func:`batch_plan_tags`, by the kind of plan."""
    return batch_plan_tags(plan, measurements) if plan.kind == "batch-plan" else plan_tags(plan, measurements)


def provenance_tags(model: str, plan: PlanArtifact | BatchPlan, doc_text: str, measurements: Measurements) -> dict[str, str]:
    """Short tags for the endpoint and the scalable target (values well under AWS's 256 chars)."""
    values = {TAG_MODEL: model, TAG_SLUG: plan.fingerprint.slug, TAG_DOC_SHA: document_sha256(doc_text),
              **any_plan_tags(plan, measurements)}
    return {k: values[k] for k in TAGS}
