"""Account hygiene: S3 buckets not public and encrypted, IAM without wildcards, ECR immutable and
scanned, allowed instance types."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from policy.recompute import ProvenanceCache
from policy.resources import (
    MISSING,
    T_BUCKET,
    T_BUCKET_ACL,
    T_BUCKET_ACL_V2,
    T_BUCKET_V2,
    T_PUBLIC_ACCESS_BLOCK,
    T_SSE,
    T_SSE_V2,
    UNKNOWN,
    Res,
    Stack,
    at,
    fmt,
    has_unknown,
)
from policy.rules.common import PREVIEW, StackViolations
from speech.deploy.iam_check import ALLOWED_ON_STAR, wildcard_findings

# --- S3 -----------------------------------------------------------------------------------------

PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_ACLS = ("public-read", "public-read-write", "authenticated-read")


def rule_bucket_not_public(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    blocks = stack.of(T_PUBLIC_ACCESS_BLOCK)
    for pab in blocks:
        off = [f for f in PAB_FLAGS if pab.get(f) is not True]
        if off:
            vals = ", ".join(f"{f}={fmt(pab.get(f))}" for f in off)
            pre = f"{PREVIEW}: " if any(pab.get(f) is UNKNOWN for f in off) else ""
            yield (f"{pre}{pab.label} leaves public access open ({vals}); expected all of {', '.join(PAB_FLAGS)} true; "
                   "fix: set them to true (weights and provenance must never be public)", pab.urn)
    for b in stack.of(T_BUCKET, T_BUCKET_V2):
        acl = b.get("acl")
        if acl in PUBLIC_ACLS:
            yield (f"{b.label} acl is {acl!r}, expected private; fix: remove the acl", b.urn)
        matched, unknown = _settings_for(stack, b, blocks)
        if not matched:
            yield (
                f"{PREVIEW}: {b.label}: its public access block cannot be identified" if unknown else
                f"{b.label} has no public access block; expected one with {', '.join(PAB_FLAGS)} true; fix: add "
                "aws.s3.BucketPublicAccessBlock for it",
                b.urn,
            )
    for acl_res in stack.of(T_BUCKET_ACL, T_BUCKET_ACL_V2):
        acl = acl_res.get("acl")
        if acl in PUBLIC_ACLS:
            yield (f"{acl_res.label} acl is {acl!r}, expected private; fix: remove it", acl_res.urn)


def _settings_for(stack: Stack, bucket: Res, settings: list[Res]) -> tuple[list[Res], bool]:
    hits, unknown = [], False
    for s in settings:
        found, unk = stack.refers(s, "bucket", [bucket])
        hits += [s] if found else []
        unknown = unknown or unk
    return hits, unknown


SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")


def rule_bucket_encrypted(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    sses = stack.of(T_SSE, T_SSE_V2)
    for b in stack.of(T_BUCKET, T_BUCKET_V2):
        matched, unknown = _settings_for(stack, b, sses)
        inline = b.get("serverSideEncryptionConfiguration.rule.applyServerSideEncryptionByDefault.sseAlgorithm")
        if inline in SSE_ALGORITHMS:
            continue
        if not matched:
            yield (
                f"{PREVIEW}: {b.label}: its encryption configuration cannot be identified" if unknown else
                f"{b.label} has no server-side encryption configuration; expected one of {', '.join(SSE_ALGORITHMS)}; "
                "fix: add aws.s3.BucketServerSideEncryptionConfiguration (aws:kms)",
                b.urn,
            )
            continue
        for sse in matched:
            rules = sse.get("rules")
            algs = [at(r, "applyServerSideEncryptionByDefault.sseAlgorithm") for r in rules] if isinstance(rules, list) else []
            if not any(a in SSE_ALGORITHMS for a in algs):
                yield (f"{sse.label} sseAlgorithm is {fmt(algs[0] if algs else MISSING)}, expected one of "
                       f"{', '.join(SSE_ALGORITHMS)}; fix: set rules[0].applyServerSideEncryptionByDefault.sseAlgorithm", sse.urn)


# --- resource rules ----------------------------------------------------------------------------


def _policy_documents(res: Res) -> list[tuple[str, Any]]:
    if res.type == "aws:iam/role:Role":
        inline = res.get("inlinePolicies")
        docs = []
        if inline is UNKNOWN:
            docs.append(("inlinePolicies", UNKNOWN))
        for i, p in enumerate(inline if isinstance(inline, list) else []):
            docs.append((f"inlinePolicies[{i}].policy", at(p, "policy")))
        return docs
    return [("policy", res.get("policy"))]


def rule_iam_no_wildcards(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if res.type not in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy", "aws:iam/role:Role"):
        return
    for where, doc in _policy_documents(res):
        if doc is MISSING:
            continue
        if doc is UNKNOWN or (isinstance(doc, str) and has_unknown(doc)):
            # ARNs of resources created in the same update are unknown in a first preview.
            raise UnknownValueError(UNKNOWN_STRING_VALUE, [where])
        try:
            parsed = json.loads(doc) if isinstance(doc, str) else doc
        except ValueError:
            yield f"{res.label} {where} is not valid JSON, so its actions cannot be checked; fix: emit it with json.dumps"
            continue
        for f in wildcard_findings(parsed):
            if f.kind == "not_action":
                yield (f"{res.label} {where} Statement[{f.statement}] allows NotAction {fmt(list(f.actions))}: everything "
                       "else is allowed; fix: list the actions it needs")
            elif f.kind == "wildcard_action":
                yield (f"{res.label} {where} Statement[{f.statement}] allows wildcard actions {list(f.actions)}, expected "
                       "explicit actions; fix: list the exact actions (e.g. s3:GetObject, ecr:BatchGetImage)")
            else:
                yield (f"{res.label} {where} Statement[{f.statement}] allows {list(f.actions)} on Resource '*', expected "
                       "the resources they need (only actions without resource-level permissions, such as "
                       f"{', '.join(sorted(ALLOWED_ON_STAR))}, may use '*'); fix: name the ARNs")


AWS_MANAGED_SNS_KEY = "alias/aws/sns"


def rule_topic_key_usable(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    """CloudWatch publishes to an SSE-KMS topic only with kms:Decrypt and kms:GenerateDataKey* on its
    key; the AWS-managed key's policy admits no service principal and cannot be edited, so alarm
    notifications to such a topic are never delivered (docs/first-deploy.md)."""
    if res.type != "aws:sns/topic:Topic":
        return
    key = res.get("kmsMasterKeyId")
    if isinstance(key, str) and key.split(":")[-1] in (AWS_MANAGED_SNS_KEY, f"alias/{AWS_MANAGED_SNS_KEY}"):
        yield (f"{res.label} kmsMasterKeyId is {fmt(key)}, the AWS-managed key: CloudWatch alarms cannot publish to it "
               "and no notification arrives; fix: a customer-managed aws.kms.Key whose policy lets "
               "cloudwatch.amazonaws.com use kms:Decrypt and kms:GenerateDataKey* (speech.deploy.iam.alarm_topic_key_policy)")


def rule_ecr_hygiene(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    if res.type != "aws:ecr/repository:Repository":
        return
    mut = res.get("imageTagMutability")
    if mut != "IMMUTABLE":
        yield (f"{res.label} imageTagMutability is {fmt(mut)}, expected 'IMMUTABLE': a pushed tag could point at an "
               "image nobody measured; fix: image_tag_mutability='IMMUTABLE'")
    scan = res.get("imageScanningConfiguration.scanOnPush")
    if scan is not True:
        yield (f"{res.label} imageScanningConfiguration.scanOnPush is {fmt(scan)}, expected true; fix: "
               "image_scanning_configuration={'scan_on_push': True}")


def rule_instance_type_allowed(res: Res, cfg: Mapping[str, Any]) -> Iterator[str]:
    from policy.config import DEFAULT_ALLOWED_INSTANCE_TYPES

    if res.type != "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
        return
    allowed = list(cfg.get("allowed-instance-types") or DEFAULT_ALLOWED_INSTANCE_TYPES)
    variants = res.get("productionVariants")
    if variants is UNKNOWN:
        yield f"{PREVIEW}: {res.label} productionVariants are unknown; expected instance types among {allowed}"
        return
    for i, v in enumerate(variants if isinstance(variants, list) else []):
        itype = at(v, "instanceType")
        if itype is UNKNOWN:
            yield f"{PREVIEW}: {res.label} productionVariants[{i}].instanceType is unknown; expected one of {allowed}"
        elif itype is not MISSING and itype not in allowed:
            yield (f"{res.label} productionVariants[{i}].instanceType is {fmt(itype)}, not in allowed-instance-types "
                   f"{allowed}; fix: use an allowed type (and measure it), or add it to the policy config")
