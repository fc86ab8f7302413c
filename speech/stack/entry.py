"""A model's stack entry, as ``bench plan --stack NAME`` writes it: the plan's inputs, the
measurements with their receipt keys, and what the entry already held that a re-plan keeps
(priority, hosting and its components, weights source, environment, the kubernetes block)."""

from __future__ import annotations

from pydantic import ValidationError

from speech.errors import ConfigError, describe_validation_error
from speech.plan.batch import BatchPlan
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact, canonical_sha256
from speech.schema.config import Measurements, ModelConfig, PlanInputs
from speech.schema.plan_artifacts import PlanArtifact
from speech.schema.receipts import needs_receipt, receipt_key


def model_entry(plan: PlanArtifact | BatchPlan, inputs: PlanInputs, q: QmaxArtifact, t: TtotalArtifact,
                tcopy: CopyArtifact | None = None, *, old: dict | None = None, max_instances: int | None = None,
                image: str | None = None, instance_type: str | None = None) -> ModelConfig:
    """The entry for ``q.model``: ``image`` and ``instance_type`` (the flags) over the old entry's
    (``old``, plain JSON values) over the measurement's fingerprint. A batch plan makes a batch
    route; a real-time plan re-plans a batch entry as a real-time one. Raises :class:`ConfigError`
    when the entry would not validate, or when the artifacts were measured off SageMaker and no
    SageMaker instance type is known."""
    old = old or {}
    # hosting: components keeps its copy artifact and inputs across a re-plan of Q_max and T_total.
    components = tcopy is not None or old.get("hosting") == "components"
    # No image: the program builds and pushes container/Dockerfile, and checks its digest against
    # the measurements' when the push is done.
    image = image or old.get("image")
    instance_type = instance_type or q.fingerprint.instance_type
    if not instance_type.startswith("ml."):
        instance_type = old.get("instance_type") or ""
        if not instance_type:
            raise ConfigError(
                f"artifacts were measured on {q.fingerprint.instance_type!r}, not a SageMaker instance; pass "
                f"--instance-type ml.<family>.<size> for the stack entry (the program and the policy pack will "
                f"then see that the deployment differs from what was measured)"
            )
    try:
        return ModelConfig(
            instance_type=instance_type,
            image=image,
            plan=inputs,
            # Each SageMaker measurement's receipt key (the bucket holds it once bench wrote it; the
            # preview reads it and the pack compares its sha256 with the artifact's).
            measurements=Measurements(
                qmax=q, ttotal=t,
                qmax_receipt=receipt_key(q.model, "qmax", canonical_sha256(q)) if needs_receipt(q) else None,
                ttotal_receipt=receipt_key(t.model, "ttotal", canonical_sha256(t)) if needs_receipt(t) else None,
                tcopy=tcopy,
            ),
            max_instances=max_instances,
            **{**{k: old[k] for k in ("priority", "hosting", "weights_source", "environment", "measured_on",
                                                     "kubernetes") if k in old
                  and not (components and k == "hosting")},
               **({"hosting": "components", "components": old.get("components")} if components else {}),
               # A batch plan deploys as a batch route; a real-time plan re-plans a batch entry as a real-time one.
               **({"priority": "batch", "hosting": "async"} if isinstance(plan, BatchPlan)
                  else {"priority": "standard", "hosting": "realtime"} if old.get("hosting") == "async" else {})},
        )
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, f"stack entry for {q.model}")) from None
