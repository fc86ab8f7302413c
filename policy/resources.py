"""A plain view of the resources the engine sends, and the links between them.

Validators work on plain dicts (not pulumi_policy's raising proxies) so that an unknown value is
something a rule looks at and reports, never an exception that skips the rest of the rule.
During ``pulumi preview`` the engine sends every not-yet-known value as a sentinel string;
:func:`at` turns any of them into :data:`UNKNOWN`.

Links (endpoint -> endpoint configuration -> model, scaling -> endpoint, bucket -> settings) are
followed by value when the value is known, and by the engine's dependency URNs otherwise,
because names that are outputs of other resources are unknown while previewing a new stack.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from speech.deploy.scaling import SCALABLE_DIMENSION, SERVICE_NAMESPACE, number, parse_resource_id  # noqa: F401  (re-exported)

# pulumi_policy.proxy's sentinels; the engine itself sends the string one for every unknown.
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
        "030794c1-ac77-496b-92df-f27374a8bd58",
        "e48ece36-62e2-4504-bad9-02848725956a",
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
    }
)
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __bool__(self) -> bool:
        return False


UNKNOWN = _Marker("<unknown during preview>")
MISSING = _Marker("<not set>")

T_ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
T_ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
T_MODEL = "aws:sagemaker/model:Model"
T_TARGET = "aws:appautoscaling/target:Target"
T_SCALING_POLICY = "aws:appautoscaling/policy:Policy"
T_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
T_OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
T_OBJECT_V1 = "aws:s3/bucketObject:BucketObject"
T_BUCKET = "aws:s3/bucket:Bucket"
T_BUCKET_V2 = "aws:s3/bucketV2:BucketV2"
T_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
T_SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
T_SSE_V2 = "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2"
T_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
T_BUCKET_ACL_V2 = "aws:s3/bucketAclV2:BucketAclV2"
T_ECR_REPO = "aws:ecr/repository:Repository"
T_ROLE = "aws:iam/role:Role"
T_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
T_IAM_POLICY = "aws:iam/policy:Policy"
T_DOCKER_IMAGE = "docker-build:index:Image"
T_INFERENCE_COMPONENT = "aws-native:sagemaker:InferenceComponent"


_KIND = {
    T_ENDPOINT: "endpoint",
    T_ENDPOINT_CONFIG: "endpoint configuration",
    T_MODEL: "SageMaker model",
    T_TARGET: "scalable target",
    T_SCALING_POLICY: "scaling policy",
    T_ALARM: "alarm",
    T_OBJECT: "S3 object",
    T_OBJECT_V1: "S3 object",
    T_BUCKET: "bucket",
    T_BUCKET_V2: "bucket",
    T_PUBLIC_ACCESS_BLOCK: "public access block",
    T_SSE: "bucket encryption",
    T_SSE_V2: "bucket encryption",
    T_BUCKET_ACL: "bucket ACL",
    T_BUCKET_ACL_V2: "bucket ACL",
    T_ECR_REPO: "ECR repository",
    T_ROLE: "IAM role",
    T_ROLE_POLICY: "IAM role policy",
    T_IAM_POLICY: "IAM policy",
    T_DOCKER_IMAGE: "container image",
    T_INFERENCE_COMPONENT: "inference component",
    "kubernetes:autoscaling/v2:HorizontalPodAutoscaler": "HorizontalPodAutoscaler",
    "kubernetes:keda.sh/v1alpha1:ScaledObject": "ScaledObject",
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:core/v1:ConfigMap": "ConfigMap",
}


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN or (isinstance(value, str) and value in UNKNOWN_SENTINELS)


def at(props: Any, path: str) -> Any:
    """``props`` at a dotted path (``a.b.0.c``): the value, :data:`UNKNOWN` or :data:`MISSING`.

    A null counts as missing; an unknown anywhere along the path makes the whole value unknown.
    """
    cur = props
    for part in path.split(".") if path else []:
        if is_unknown(cur):
            return UNKNOWN
        if isinstance(cur, Mapping):
            if part not in cur:
                return MISSING
            cur = cur[part]
        elif isinstance(cur, (list, tuple)) and part.isdigit():
            idx = int(part)
            if idx >= len(cur):
                return MISSING
            cur = cur[idx]
        else:
            return MISSING
        if cur is None:
            return MISSING
    return UNKNOWN if is_unknown(cur) else cur


def has_unknown(value: Any) -> bool:
    """True when ``value`` is unknown or holds an unknown anywhere inside."""
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(has_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_unknown(v) for v in value)
    return False


def as_number(value: Any) -> float | None:
    """Numbers arrive as doubles (protobuf Struct) or, from hand-written stacks, as strings."""
    return number(value)


def fmt(value: Any) -> str:
    """A value as a message shows it: 280.0 -> 280, strings quoted."""
    if value is UNKNOWN or value is MISSING:
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Res:
    """One resource: type, logical name, URN, inputs (plain, sentinels for unknowns), links."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def get(self, path: str) -> Any:
        return at(self.props, path)

    @property
    def label(self) -> str:
        return f"{_KIND.get(self.type, self.type)} '{self.name}'"

    def physical_names(self) -> set[str]:
        """Values another resource may use to point at this one: its name inputs, else its
        logical name (what Pulumi's mocks return as the physical name)."""
        names = {self.name, self.name.lower()[:60]}
        for key in ("name", "bucket", "arn", "id"):
            v = self.get(key)
            if isinstance(v, str):
                names.add(v)
        return names

    def depends_on(self, other: Res, prop: str | None = None) -> bool:
        if prop is not None and other.urn in self.property_dependencies.get(prop, ()):
            return True
        return other.urn in self.dependencies


class Stack:
    """All resources of one AnalyzeStack call, indexed by type."""

    def __init__(self, resources: Iterable[Res]) -> None:
        self.resources = list(resources)
        self.by_urn = {r.urn: r for r in self.resources}

    def of(self, *types: str) -> list[Res]:
        return [r for r in self.resources if r.type in types]

    def refers(self, src: Res, prop: str, candidates: Iterable[Res]) -> tuple[list[Res], bool]:
        """Resources among ``candidates`` that ``src.<prop>`` points at.

        Returns (matches, unknown): ``unknown`` is True when the value is unknown and no
        dependency says where it points, so the link cannot be established during preview.
        """
        top = prop.split(".")[0]
        value = src.get(prop)
        candidates = list(candidates)
        if isinstance(value, str):
            hits = [c for c in candidates if value in c.physical_names()]
            if hits:
                return hits, False
        hits = [c for c in candidates if src.depends_on(c, top)]
        if hits and (value is UNKNOWN or value is MISSING or not isinstance(value, str)):
            return hits, False
        return [], value is UNKNOWN

    def built_images(self, src: Res, prop: str) -> list[Res]:
        """Images built in this update (pulumi-docker-build) that ``src.<prop>`` comes from."""
        urns = set(src.property_dependencies.get(prop, ())) or set(src.dependencies)
        return [r for r in self.of(T_DOCKER_IMAGE) if r.urn in urns]

    # --- SageMaker ------------------------------------------------------------------------

    def endpoint_by_name(self, endpoint_name: str) -> list[Res]:
        return [e for e in self.of(T_ENDPOINT) if endpoint_name in e.physical_names()]

    def endpoint_config_of(self, endpoint: Res) -> tuple[list[Res], bool]:
        return self.refers(endpoint, "endpointConfigName", self.of(T_ENDPOINT_CONFIG))

    def variant_of(self, config: Res, variant_name: str) -> dict[str, Any] | None:
        variants = config.get("productionVariants")
        if not isinstance(variants, list):
            return None
        for v in variants:
            if isinstance(v, Mapping) and at(v, "variantName") == variant_name:
                return dict(v)
        return None

    def model_of_variant(self, config: Res, variant: Mapping[str, Any]) -> tuple[list[Res], bool]:
        models = self.of(T_MODEL)
        name = at(variant, "modelName")
        if isinstance(name, str):
            hits = [m for m in models if name in m.physical_names()]
            if hits:
                return hits, False
        hits = [m for m in models if config.depends_on(m, "productionVariants")]
        if hits and not isinstance(name, str):
            return hits, False
        return [], name is UNKNOWN

    # --- Application Auto Scaling ---------------------------------------------------------

    def sagemaker_targets(self) -> list[Res]:
        """Scalable targets on SageMaker variants. Unknown namespace/dimension counts as SageMaker:
        a target nobody can classify during preview must not slip past the scaling rules."""
        out = []
        for t in self.of(T_TARGET):
            ns, dim = t.get("serviceNamespace"), t.get("scalableDimension")
            if ns in (SERVICE_NAMESPACE, UNKNOWN) and dim in (SCALABLE_DIMENSION, UNKNOWN):
                out.append(t)
        return out

    def policies_on(self, resource_id: str, target: Res | None = None) -> list[Res]:
        out = []
        for p in self.of(T_SCALING_POLICY):
            rid = p.get("resourceId")
            if rid == resource_id or (target is not None and not isinstance(rid, str) and p.depends_on(target, "resourceId")):
                out.append(p)
        return out

    def alarms_on(self, endpoint_name: str, variant: str) -> list[Res]:
        out = []
        for a in self.of(T_ALARM):
            dims = a.get("dimensions")
            if isinstance(dims, Mapping) and at(dims, "EndpointName") == endpoint_name and at(dims, "VariantName") == variant:
                out.append(a)
        return out


def native_tags(value: Any) -> Any:
    """pulumi-aws-native's tag list ``[{key, value}]`` as a mapping (unknown and missing pass through)."""
    if not isinstance(value, list):
        return value
    out: dict[str, Any] = {}
    for tag in value:
        key = at(tag, "key")
        if isinstance(key, str):
            out[key] = at(tag, "value")
    return out


def step_direction(policy: Res) -> str:
    """'in' when every step removes capacity, 'out' when every step adds, else 'mixed'/'unknown'."""
    steps = policy.get("stepScalingPolicyConfiguration.stepAdjustments")
    if not isinstance(steps, list) or not steps:
        return "unknown"
    signs = set()
    for s in steps:
        n = as_number(at(s, "scalingAdjustment"))
        if n is None:
            return "unknown"
        signs.add("in" if n < 0 else "out" if n > 0 else "zero")
    return signs.pop() if len(signs) == 1 else "mixed"
