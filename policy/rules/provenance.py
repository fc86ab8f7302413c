"""Provenance rules: measured figures behind every scaled endpoint, the deployment equal to the
fingerprint it was measured on, receipts for measured artifacts, the target's provenance tags."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policy.recompute import REQUIRED_TAGS, NoProvenance, ProvenanceCache, provenance_tags_of, tags_of
from policy.resources import (
    MISSING,
    T_ENDPOINT,
    UNKNOWN,
    Res,
    Stack,
    at,
    fmt,
    has_unknown,
)
from policy.rules.common import (
    PREVIEW,
    Deferred,
    StackViolations,
    config_and_variant,
    scaled_provenance,
    scaled_variants,
    target_tags_problem,
    variant_model,
)
from policy.rules.copies import component_model, components_on
from speech.deploy import provenance as pv
from speech.deploy import receipts as rc
from speech.deploy import scaling
from speech.schema import receipts as receipt_doc

# --- scaling-requires-measured-provenance ------------------------------------------------------


def rule_measured_provenance(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    allow_reference = bool(cfg.get("allow-reference-artifacts", True))
    allow_assumption = bool(cfg.get("allow-assumption-artifacts", False))
    for s in scaled_variants(stack):
        t = s.target
        try:
            prov = scaled_provenance(s, cache)
        except NoProvenance as err:
            prefix = "" if s.endpoint is None else f"{t.label} scales {s.endpoint.label}, but "
            yield prefix + err.message, t.urn
            continue
        assert s.endpoint is not None  # scaled_provenance raises NoProvenance for a target without one
        origin = prov.origin
        allowed = origin == "measured" or (origin == "reference" and allow_reference) or (
            origin == "assumption" and allow_assumption
        )
        if not allowed:
            key = "allow-reference-artifacts" if origin == "reference" else "allow-assumption-artifacts"
            yield (
                f"{t.label} scales {s.endpoint.label} from {origin!r} figures (provenance document "
                f"{prov.document_object.label}), not measurements of this endpoint; policy config {key} is false; "
                "fix: run bench qmax and bench ttotal against this endpoint and re-plan (bench plan --stack)",
                t.urn,
            )
        endpoint = s.endpoint_name or s.endpoint.get("name")
        bound = pv.target_binding_problem(prov.model, prov.document.measurements, endpoint, prov.document.measured_on) \
            if isinstance(endpoint, str) else None
        if bound:
            yield f"{t.label} scales {s.endpoint.label}, but {bound}", t.urn
        problem, _ = target_tags_problem(t, s.endpoint, prov.tags)
        if problem:
            yield problem, t.urn


# --- deployment-matches-fingerprint ------------------------------------------------------------


def rule_fingerprint(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    scaled_endpoints = {s.endpoint.urn for s in scaled_variants(stack) if s.endpoint is not None}
    for e in stack.of(T_ENDPOINT):
        try:
            # speech:model and speech:stack name every endpoint; the measurement tags claim a plan.
            tagged = any(k in tags_of(e) for k in REQUIRED_TAGS if k != pv.TAG_MODEL)
        except NoProvenance:
            tagged = True
        if not tagged and e.urn not in scaled_endpoints:
            continue  # nothing claims this endpoint was measured; the scaling rules cover scaling
        try:
            prov = cache.get(e)
        except NoProvenance as err:
            yield (f"cannot compare {e.label} with the artifacts' fingerprint: {err.message}", e.urn)
            continue
        fp = prov.document.measurements.qmax.fingerprint
        config, variant, problem = config_and_variant(stack, e, None)
        if problem:
            yield (f"cannot compare {e.label} with the artifacts' fingerprint: {problem}", e.urn)
            continue
        assert config is not None and variant is not None  # config_and_variant gives both when it finds no problem
        fix = (f"fix: deploy what was measured ({fp.instance_type}, {fp.image_digest[:19]}...) or measure what is "
               "deployed (bench qmax, bench ttotal on it) and re-plan")
        itype = at(variant, "instanceType")
        if itype is UNKNOWN:
            yield (f"{PREVIEW}: {config.label} instanceType is unknown; expected {fp.instance_type!r} ({fp.slug})", config.urn)
        elif itype != fp.instance_type:
            yield (f"{config.label} deploys instance type {fmt(itype)}, but the artifacts in provenance document "
                   f"{prov.document_object.label} were measured on {fp.instance_type!r} ({fp.slug}); {fix}", config.urn)
        model, problem = variant_model(stack, config, variant) if at(variant, "modelName") is not MISSING or not \
            components_on(stack, e) else component_model(stack, e)
        if problem:
            yield (f"cannot compare the image of {e.label} with the artifacts' fingerprint: {problem}", e.urn)
            continue
        assert model is not None  # variant_model and component_model give the model when they find no problem
        image = model.get("primaryContainer.image")
        builds = stack.built_images(model, "primaryContainer")
        if image is UNKNOWN and builds:
            # The image is built and pushed in this update: its digest exists only then. The
            # program compares it with the measurements before it creates the Model, and this rule
            # compares it again when `pulumi up` sends the known value.
            yield Deferred(f"{model.label} runs the image {builds[0].label} builds in this update; its digest is "
                           f"compared with the measured {fp.image_digest[:19]}... when it is pushed (pulumi up)"), model.urn
        elif image is UNKNOWN:
            yield (f"{PREVIEW}: {model.label} primaryContainer.image is unknown; expected an image pinned to "
                   f"{fp.image_digest}", model.urn)
        elif not isinstance(image, str) or "@" not in image:
            yield (f"{model.label} primaryContainer.image {fmt(image)} is not pinned by digest (<repo>@sha256:...), "
                   f"so nothing ties it to the measured {fp.image_digest[:19]}...; {fix}", model.urn)
        elif image.rsplit("@", 1)[1] != fp.image_digest:
            yield (f"{model.label} deploys image digest {image.rsplit('@', 1)[1][:19]}..., but the artifacts in "
                   f"provenance document {prov.document_object.label} were measured on {fp.image_digest[:19]}... "
                   f"({fp.slug}); {fix}", model.urn)


# --- measured-artifacts-match-receipts ----------------------------------------------------------


def rule_receipts(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    """Every measured SageMaker artifact in an endpoint's provenance document has the receipt the
    program read from the bucket (tags :data:`speech.deploy.receipts.RECEIPT_TAGS`), for exactly that
    artifact; judged with :func:`speech.deploy.receipts.receipt_problem`, the gate's own comparison."""
    for e in stack.of(T_ENDPOINT):
        try:
            tags = tags_of(e)
        except NoProvenance:
            continue  # unknown tags: deployment-matches-fingerprint reports them
        if pv.TAG_DOC_SHA not in tags:
            continue  # claims no plan, so no measurements
        try:
            prov = cache.get(e)
        except NoProvenance:
            continue  # deployment-matches-fingerprint and the scaling rules report it
        doc = prov.document
        stack_name = at(tags, "speech:stack")
        stack_name = stack_name if isinstance(stack_name, str) else "<stack>"
        own = prov.document_object.get("bucket")
        for claim in rc.receipt_claims(doc.measurements, doc.measured_on):
            bucket = claim.bucket or (own if isinstance(own, str) and not has_unknown(own)
                                      else f"<the bucket of {prov.document_object.label}>")
            tag = receipt_doc.RECEIPT_TAGS[claim.kind]
            read = at(tags, tag) if claim.key is not None else receipt_doc.NO_RECEIPT
            if read is UNKNOWN:
                # The bucket is created in this update: the program reads the receipt at `pulumi up`
                # and keeps scaling off unless it matches; this rule then checks the known value.
                yield Deferred(f"{e.label}: the {claim.kind} receipt {claim.key!r} is read from the bucket once it "
                               f"exists (pulumi up); it must be for artifact {claim.artifact_sha256}"), e.urn
                continue
            if read is MISSING or not isinstance(read, str):
                yield (f"{e.label} has no {tag} tag although models.{prov.model}.measurements.{claim.kind} is a "
                       f"measurement of SageMaker endpoint {claim.artifact.provenance.target_endpoint!r}: nothing read "
                       f"its receipt {claim.key!r}; fix: deploy with this program, which reads the receipt and tags "
                       "the endpoint (never hand-write provenance tags)", e.urn)
                continue
            problem = rc.receipt_problem(prov.model, claim, read, bucket=bucket, stack=stack_name,
                                         inputs=doc.inputs, max_instances=doc.max_instances_cap)
            if problem is not None:
                yield f"{e.label}: {problem.message}", e.urn


def _is_sagemaker_target(res: Res) -> bool:
    return (res.type == "aws:appautoscaling/target:Target" and res.get("serviceNamespace") in (scaling.SERVICE_NAMESPACE, UNKNOWN)
            and res.get("scalableDimension") in (scaling.SCALABLE_DIMENSION, UNKNOWN))


def rule_target_tags(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if not _is_sagemaker_target(res):
        return
    try:
        tags = provenance_tags_of(res)
    except NoProvenance as err:
        yield err.message
        return
    if tags[pv.TAG_VERDICT] == "stop":
        yield (f"{res.label} is tagged {pv.TAG_VERDICT}='stop': its plan has a stop finding and must not get scaling; "
               "fix: address the stop findings (bench plan shows them) and re-plan")


def rule_unmeasured_notice(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    from policy.rules.kubernetes import T_K8S_HPA, T_K8S_SCALED_OBJECT, k8s_origin

    copies = res.type == "aws:appautoscaling/target:Target" and \
        res.get("scalableDimension") == scaling.COMPONENT_SCALABLE_DIMENSION
    if res.type in (T_K8S_HPA, T_K8S_SCALED_OBJECT):
        origin = k8s_origin(res)
    elif not (_is_sagemaker_target(res) or copies):
        return
    else:
        tags = res.get("tags")
        origin = at(tags, pv.TAG_ORIGIN) if isinstance(tags, Mapping) else MISSING
    if isinstance(origin, str) and origin != "measured":
        yield (f"{res.label} scales from {origin!r} figures, not measurements of this endpoint; before production "
               "traffic run bench qmax and bench ttotal against it and re-plan (bench plan --stack)")
