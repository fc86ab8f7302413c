"""Find an endpoint's provenance document, check it against the tags, recompute the plan.

This is the one place the pack turns tags + an S3 object into a plan, with the same function the
program and ``bench plan`` use (:func:`speech.plan.realtime.build_plan`). Every way this can fail is a
:class:`NoProvenance` whose message says what is wrong and how to fix it: the callers report it
as a violation (fail closed), never as a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy.resources import MISSING, T_OBJECT, T_OBJECT_V1, UNKNOWN, Res, Stack, at, is_unknown
from speech.deploy import provenance as pv
from speech.errors import SpeechError
from speech.plan.batch import BatchPlan, build_batch_plan
from speech.plan.realtime import build_plan
from speech.schema.plan_artifacts import Finding, PlanArtifact

REQUIRED_TAGS = pv.TAGS
FIX_PROVENANCE = (
    "fix: set the model's measurements in stack config (bench qmax, bench ttotal, then "
    "bench plan --stack) and let the program create the scaling; never hand-write scaling"
)


class NoProvenance(Exception):
    """Provenance is missing, unknown during preview, or inconsistent. ``preview`` marks the
    case where the values exist but are not known yet."""

    def __init__(self, message: str, *, preview: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.preview = preview


@dataclass(frozen=True)
class Provenance:
    model: str
    tags: Mapping[str, str]
    document: pv.ProvenanceDocument
    document_object: Res
    plan: PlanArtifact | None
    """The real-time plan; None for a batch document (``inputs.max_delay_s`` set)."""
    batch: BatchPlan | None = None
    """The batch plan (speech.plan.batch) of a batch document."""
    planned: PlanArtifact | BatchPlan | None = None
    """The plan before the stack's budget capped it (its fleet is the model's measured need);
    the same as ``plan``/``batch`` when the document records no budget allocation."""

    @property
    def origin(self) -> str:
        return (self.plan or self.batch).provenance.origin  # type: ignore[union-attr]

    @property
    def verdict(self) -> str:
        return (self.plan or self.batch).verdict  # type: ignore[union-attr]

    @property
    def findings(self) -> list[Finding]:
        return (self.plan or self.batch).findings  # type: ignore[union-attr]


def tags_of(res: Res) -> Mapping[str, Any]:
    tags = res.get("tags")
    if tags is UNKNOWN:
        raise NoProvenance(f"cannot verify during preview: the tags of {res.label} are unknown", preview=True)
    return tags if isinstance(tags, Mapping) else {}


def provenance_tags_of(res: Res) -> dict[str, str]:
    """The ``speech:*`` tags, all present and known, or :class:`NoProvenance`."""
    tags = tags_of(res)
    missing = [k for k in REQUIRED_TAGS if at(tags, k) is MISSING]
    if missing:
        what = "no provenance tags" if len(missing) == len(REQUIRED_TAGS) else f"provenance tags missing: {', '.join(missing)}"
        raise NoProvenance(f"{res.label} has {what}; {FIX_PROVENANCE}")
    unknown = [k for k in REQUIRED_TAGS if is_unknown(at(tags, k))]
    if unknown:
        raise NoProvenance(
            f"cannot verify during preview: {res.label} tags {', '.join(unknown)} are unknown; "
            "derive them from stack config (speech.deploy.provenance.provenance_tags), not from another resource's output",
            preview=True,
        )
    return {k: str(at(tags, k)) for k in REQUIRED_TAGS}


def _object_text(obj: Res) -> Any:
    content = obj.get("content")
    if content is not MISSING:
        return content
    # A StringAsset source arrives as {sig: asset, text: ...} (or already as pulumi.StringAsset).
    source = obj.get("source")
    text = getattr(source, "text", None)
    if text is None and isinstance(source, Mapping):
        text = at(source, "text")
    return text if text is not None and text is not MISSING else MISSING


def find_document(stack: Stack, model: str, slug: str, owner: Res) -> tuple[Res, str]:
    key = pv.document_key(model, slug)
    objs = [o for o in stack.of(T_OBJECT, T_OBJECT_V1) if o.get("key") == key]
    if not objs:
        unknown_keys = [o for o in stack.of(T_OBJECT, T_OBJECT_V1) if o.get("key") is UNKNOWN]
        if unknown_keys:
            raise NoProvenance(
                f"cannot verify during preview: provenance document {key!r} for {owner.label} may be "
                f"{unknown_keys[0].label}, whose key is unknown",
                preview=True,
            )
        raise NoProvenance(
            f"{owner.label} points at provenance document {key!r}, but no S3 object with that key is in "
            f"this stack; {FIX_PROVENANCE}"
        )
    if len(objs) > 1:
        raise NoProvenance(
            f"{len(objs)} S3 objects ({', '.join(o.label for o in objs)}) claim key {key!r}; keep exactly one "
            "provenance document per model and fingerprint"
        )
    obj = objs[0]
    text = _object_text(obj)
    if text is UNKNOWN:
        raise NoProvenance(
            f"cannot verify during preview: the content of provenance document {obj.label} is unknown; "
            "write it from stack config (speech.deploy.provenance.document_text)",
            preview=True,
        )
    if not isinstance(text, str) or not text:
        raise NoProvenance(f"provenance document {obj.label} ({key!r}) has no content; {FIX_PROVENANCE}")
    return obj, text


def provenance_of(stack: Stack, endpoint: Res) -> Provenance:
    """Tags -> document -> sha256 check -> parsed document -> recomputed plan -> tags agree."""
    tags = provenance_tags_of(endpoint)
    model, slug = tags[pv.TAG_MODEL], tags[pv.TAG_SLUG]
    obj, text = find_document(stack, model, slug, endpoint)
    sha = pv.document_sha256(text)
    if sha != tags[pv.TAG_DOC_SHA]:
        raise NoProvenance(
            f"provenance document {obj.label} hashes to {sha[:19]}..., but {endpoint.label} is tagged "
            f"{pv.TAG_DOC_SHA}={tags[pv.TAG_DOC_SHA][:19]}...: the document or the tags were edited by hand; "
            "regenerate both from stack config (bench plan --stack, then pulumi preview)"
        )
    try:
        doc = pv.parse_document(text, f"provenance document {obj.label}")
    except SpeechError as err:
        raise NoProvenance(f"{err}; {FIX_PROVENANCE}") from None
    if doc.model != model:
        raise NoProvenance(
            f"provenance document {obj.label} is for model {doc.model!r}, but {endpoint.label} is tagged {pv.TAG_MODEL}={model!r}"
        )
    fp = doc.measurements.qmax.fingerprint
    if fp.slug != slug:
        raise NoProvenance(
            f"provenance document {obj.label} measured {fp.slug!r}, but {endpoint.label} is tagged {pv.TAG_SLUG}={slug!r}"
        )
    # A batch model's document carries its acceptable delay: its plan is the batch plan.
    recompute = build_batch_plan if doc.inputs.max_delay_s is not None else build_plan
    try:
        plan = recompute(
            doc.measurements.qmax,
            doc.measurements.ttotal,
            doc.inputs,
            allow_config_mismatch=doc.allow_config_mismatch,
            max_instances_cap=doc.max_instances_cap,
        )
    except SpeechError as err:
        raise NoProvenance(f"the plan cannot be recomputed from provenance document {obj.label}: {err}") from None
    planned = plan
    if doc.budget is not None:
        # The program capped the fleet at the model's budget allocation; daily-cost-ceiling checks
        # that allocation against the one it recomputes over every model.
        from speech.plan.budget import cap_plan

        plan = cap_plan(plan, doc.budget)

    expected = pv.any_plan_tags(plan, doc.measurements)
    wrong = [f"{k}={tags[k]!r} (plan: {v!r})" for k, v in expected.items() if tags[k] != v]
    if wrong:
        raise NoProvenance(
            f"{endpoint.label} tags disagree with the plan recomputed from its provenance document: "
            f"{'; '.join(wrong)}; regenerate the tags from stack config (speech.deploy.provenance.provenance_tags)"
        )
    if isinstance(plan, BatchPlan):
        return Provenance(model=model, tags=tags, document=doc, document_object=obj, plan=None, batch=plan,
                          planned=planned)
    return Provenance(model=model, tags=tags, document=doc, document_object=obj, plan=plan, planned=planned)


class ProvenanceCache:
    """One AnalyzeStack call recomputes each endpoint's plan once, whichever rule asks first."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self._done: dict[str, Provenance | NoProvenance] = {}

    def get(self, endpoint: Res) -> Provenance:
        if endpoint.urn not in self._done:
            try:
                self._done[endpoint.urn] = provenance_of(self.stack, endpoint)
            except NoProvenance as err:
                self._done[endpoint.urn] = err
        got = self._done[endpoint.urn]
        if isinstance(got, NoProvenance):
            raise got
        return got


def copy_plan_of(prov: Provenance) -> Any:
    """The copy plan of a ``hosting: components`` provenance document, recomputed with the program's
    function (:func:`speech.plan.copies.build_copy_plan`) and the document's inputs; :class:`NoProvenance`
    when the document is not a components one or the plan cannot be recomputed."""
    from speech.plan.copies import build_copy_plan

    doc = prov.document
    m = doc.measurements
    if doc.hosting != "components" or doc.components is None or m.tcopy is None:
        raise NoProvenance(
            f"provenance document {prov.document_object.label} is for hosting {doc.hosting!r} without the copy "
            "measurements (measurements.tcopy) and inputs (components) a component's plan is recomputed from; "
            f"{FIX_PROVENANCE}"
        )
    try:
        return build_copy_plan(m.qmax, m.tcopy, doc.inputs, instance=doc.instance_type, ttotal=m.ttotal,
                               min_copies=doc.components.min_copies, max_instances_cap=doc.max_instances_cap,
                               margin=doc.components.footprint_margin)
    except SpeechError as err:
        raise NoProvenance(f"the copy plan cannot be recomputed from provenance document {prov.document_object.label}: "
                           f"{err}") from None
