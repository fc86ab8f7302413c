"""Small AWS reads shared by the commands: the endpoint's scalable target, its policies and
alarms, the variant's instance counts and CloudWatch concurrency. Every function takes an
injected boto3 session, so tests drive them against moto in-process."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.errors import AwsSetupError, TargetError
from speech.deploy.scaling import METRIC, METRIC_NAMESPACE, VARIANT, resource_id  # noqa: F401  (re-exported)
from speech.deploy.scaling import SCALABLE_DIMENSION as DIMENSION
from speech.deploy.scaling import SERVICE_NAMESPACE as NAMESPACE
from speech.schema.config import IMAGE_RE

SUSPEND_KEYS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")


RETRY_MODE = "standard"
MAX_ATTEMPTS = 5
"""Every AWS call bench makes: botocore's standard retry mode, 5 attempts in all (the first and
4 retries). Standard mode retries throttling (ThrottlingException, TooManyRequestsException,
...), transient errors (HTTP 500, 502, 503, 504, RequestTimeout) and dropped connections, with
exponential backoff and jitter capped at 20 s; an error that remains after the budget reaches
the command, which restores what it froze and names it (docs/design.md, "AWS failures")."""


def client_config():
    """The one botocore Config of bench's AWS clients: standard retries, :data:`MAX_ATTEMPTS`."""
    from botocore.config import Config

    # total_max_attempts counts the first call (botocore's max_attempts key counts retries only).
    return Config(retries={"mode": RETRY_MODE, "total_max_attempts": MAX_ATTEMPTS})


def session(region: str | None = None, *, require_credentials: bool = True):
    """A boto3 session whose clients all retry per :func:`client_config`. A missing region or
    missing credentials is a :class:`~bench.errors.AwsSetupError` (exit 2, one line) here, before
    any call, in every command alike."""
    import boto3
    import botocore.session
    from botocore.exceptions import BotoCoreError

    core = botocore.session.get_session()
    core.set_default_client_config(client_config())
    try:
        sess = boto3.session.Session(botocore_session=core, region_name=region)
    except BotoCoreError as err:  # a profile that does not exist, a malformed config file
        raise AwsSetupError(f"{err}; fix AWS_PROFILE or ~/.aws/config") from None
    if not sess.region_name:
        raise AwsSetupError("no AWS region: pass --region REGION (e.g. us-east-1) or set AWS_REGION")
    if require_credentials:
        try:
            creds = sess.get_credentials()
        except BotoCoreError as err:
            raise AwsSetupError(f"AWS credentials cannot be loaded ({err}); fix them (aws configure)") from None
        if creds is None:
            raise AwsSetupError("no AWS credentials found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, or run aws configure / aws sso login")
    return sess


def describe_aws_error(err: BaseException) -> tuple[str, str]:
    """(name, one line) for a botocore failure that reached the CLI: the operation, AWS's error
    code and message, and what to do."""
    from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError, PartialCredentialsError

    if isinstance(err, NoRegionError):
        return "AwsSetupError", "no AWS region: pass --region REGION (e.g. us-east-1) or set AWS_REGION"
    if isinstance(err, (NoCredentialsError, PartialCredentialsError)):
        return "AwsSetupError", f"{err}: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run aws configure"
    if isinstance(err, ClientError):
        error = (err.response or {}).get("Error", {})
        code = error.get("Code", "Error")
        op = getattr(err, "operation_name", "") or "the call"
        fix = ("grant the permission to this role or user" if is_access_denied(err)
               else f"AWS still refused after {MAX_ATTEMPTS} attempts; retry later" if is_throttled(err)
               else "check the names and the region")
        return "AwsError", f"{op}: {code}: {error.get('Message') or err}; {fix}"
    return "AwsError", f"{err.__class__.__name__}: {err}; check the network and the region, then retry"


def error_code(err: BaseException) -> str:
    """AWS's error code of a botocore ClientError ("" for anything else)."""
    resp = getattr(err, "response", None) or {}
    return str(resp.get("Error", {}).get("Code", "")) if isinstance(resp, dict) else ""


def is_access_denied(err: BaseException) -> bool:
    """AWS refused the call for want of a permission (AccessDenied, AccessDeniedException,
    UnauthorizedOperation, ...): it changed nothing, and retrying will not help."""
    code = error_code(err)
    return "AccessDenied" in code or "Unauthorized" in code


def is_throttled(err: BaseException) -> bool:
    """Throttling that outlasted the retry budget (:data:`MAX_ATTEMPTS`)."""
    code = error_code(err)
    return "Throttl" in code or "TooManyRequests" in code or code in ("RequestLimitExceeded", "SlowDown")


def client_error_message(err: Exception) -> str:
    resp = getattr(err, "response", None) or {}
    return resp.get("Error", {}).get("Message") or str(err)


def describe_endpoint(sess: Any, endpoint: str) -> dict:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return sess.client("sagemaker").describe_endpoint(EndpointName=endpoint)
    except ClientError as err:
        if is_access_denied(err) or is_throttled(err):
            raise  # not the name's fault: the CLI names the operation, the code and the fix
        raise TargetError(f"endpoint {endpoint!r}: {client_error_message(err)}; check --endpoint and the region") from None
    except BotoCoreError as err:
        raise TargetError(f"endpoint {endpoint!r}: {err}; check AWS credentials and region") from None


@dataclass(frozen=True)
class Identity:
    """What one variant of an endpoint runs, read-only: its endpoint configuration and Model."""

    endpoint_config: str
    model: str
    instance_type: str | None
    image: str
    """The Model's image URI as configured."""
    model_digest: str | None
    """The digest the Model's image pins (``...@sha256:...``); None for a tag."""
    resolved_digest: str | None
    """The digest SageMaker resolved and deployed for this variant (DeployedImages), if reported."""

    @property
    def digest(self) -> str | None:
        """What runs: SageMaker's resolved digest, else the one the Model pins."""
        return self.resolved_digest or self.model_digest


def endpoint_identity(sess: Any, endpoint: str, described: dict | None = None, variant: str = VARIANT) -> Identity:
    """The identity of the variant named ``variant`` (the one the program deploys and scaling
    addresses, ``endpoint/<name>/variant/AllTraffic``), never "the first variant": during a
    blue/green update or with a second variant the first one listed may be another Model.
    Raises TargetError naming what could not be read."""
    from botocore.exceptions import ClientError

    sm = sess.client("sagemaker")
    ep = described or describe_endpoint(sess, endpoint)
    config_name = ep.get("EndpointConfigName", "")
    try:
        config = sm.describe_endpoint_config(EndpointConfigName=config_name)
    except ClientError as err:
        raise TargetError(f"endpoint {endpoint}: endpoint configuration {config_name!r} cannot be read "
                          f"({client_error_message(err)})") from None
    variants = config.get("ProductionVariants", [])
    pv = next((v for v in variants if v.get("VariantName") == variant), None)
    if pv is None:
        raise TargetError(f"endpoint configuration {config_name} has no {variant} variant "
                          f"(has {[v.get('VariantName') for v in variants]})")
    model_name = pv.get("ModelName", "")
    try:
        model = sm.describe_model(ModelName=model_name)
    except ClientError as err:
        raise TargetError(f"model {model_name!r} of endpoint configuration {config_name} cannot be read "
                          f"({client_error_message(err)})") from None
    image = (model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]).get("Image", "")
    resolved = [img.get("ResolvedImage", "") for v in ep.get("ProductionVariants", [])
                if v.get("VariantName") == variant for img in v.get("DeployedImages", [])]
    return Identity(config_name, model_name, pv.get("InstanceType"), image,
                    _digest_of(image), next((d for d in map(_digest_of, resolved) if d), None))


def describe_inference_component(sess: Any, name: str) -> dict:
    """DescribeInferenceComponent, every failure a TargetError naming the component."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return sess.client("sagemaker").describe_inference_component(InferenceComponentName=name)
    except ClientError as err:
        if is_access_denied(err) or is_throttled(err):
            raise  # not the name's fault: the CLI names the operation, the code and the fix
        raise TargetError(f"inference component {name!r}: {client_error_message(err)}; check --inference-component "
                          "and the region") from None
    except BotoCoreError as err:
        raise TargetError(f"inference component {name!r}: {err}; check AWS credentials and region") from None


def copy_counts(ic: dict) -> tuple[int | None, int | None]:
    """(current, desired) copy count of an inference component from DescribeInferenceComponent."""
    rc = ic.get("RuntimeConfig") or {}
    return rc.get("CurrentCopyCount"), rc.get("DesiredCopyCount")


def component_identity(
    sess: Any, ic: dict, described_endpoint: dict | None = None, variant: str = VARIANT
) -> tuple[str | None, str | None]:
    """(instance type, image digest) of an inference component: the instance type of its endpoint's
    variant (components endpoints declare it on the variant, which has no Model), the digest
    SageMaker resolved for the component's container (else the one its image pins)."""
    from botocore.exceptions import ClientError

    endpoint = ic.get("EndpointName", "")
    ep = described_endpoint or describe_endpoint(sess, endpoint)
    instance_type = None
    try:
        config = sess.client("sagemaker").describe_endpoint_config(EndpointConfigName=ep.get("EndpointConfigName", ""))
        name = ic.get("VariantName") or variant
        pv = next((v for v in config.get("ProductionVariants", []) if v.get("VariantName") == name), None)
        instance_type = (pv or {}).get("InstanceType")
    except ClientError as err:
        raise TargetError(f"endpoint {endpoint}: its configuration cannot be read ({client_error_message(err)})") from None
    image = ((ic.get("Specification") or {}).get("Container") or {}).get("DeployedImage") or {}
    digest = _digest_of(image.get("ResolvedImage", "")) or _digest_of(image.get("SpecifiedImage", ""))
    return instance_type, digest


def _digest_of(image: str) -> str | None:
    m = IMAGE_RE.match(image)
    return m.group("digest") if m else None


def variant_counts(ep: dict, variant: str = VARIANT) -> tuple[int | None, int | None]:
    """(current, desired) instance count of a variant from DescribeEndpoint."""
    for pv in ep.get("ProductionVariants", []):
        if pv.get("VariantName") == variant:
            return pv.get("CurrentInstanceCount"), pv.get("DesiredInstanceCount")
    return None, None


def scalable_target(sess: Any, endpoint: str, variant: str = VARIANT) -> dict | None:
    aas = sess.client("application-autoscaling")
    resp = aas.describe_scalable_targets(
        ServiceNamespace=NAMESPACE, ResourceIds=[resource_id(endpoint, variant)], ScalableDimension=DIMENSION
    )
    targets = resp.get("ScalableTargets", [])
    return targets[0] if targets else None


def suspended(target: dict) -> dict[str, bool]:
    state = target.get("SuspendedState") or {}
    return {k: bool(state.get(k, False)) for k in SUSPEND_KEYS}


def scaling_policies(sess: Any, endpoint: str, variant: str = VARIANT) -> list[dict]:
    pages = sess.client("application-autoscaling").get_paginator("describe_scaling_policies").paginate(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint, variant), ScalableDimension=DIMENSION
    )
    return [p for page in pages for p in page.get("ScalingPolicies", [])]


def scheduled_actions(sess: Any, endpoint: str, variant: str = VARIANT) -> list[dict]:
    """Scheduled actions on the variant's scalable target (DescribeScheduledActions, every page)."""
    pages = sess.client("application-autoscaling").get_paginator("describe_scheduled_actions").paginate(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint, variant), ScalableDimension=DIMENSION
    )
    return [a for page in pages for a in page.get("ScheduledActions", [])]


def alarms_for_policy(sess: Any, policy: dict, all_alarms: list[dict] | None = None) -> list[dict]:
    """CloudWatch alarms whose actions invoke this policy. AWS lists them on the policy; an
    emulator may not, so alarms are also matched by their AlarmActions."""
    if all_alarms is None:
        all_alarms = describe_all_alarms(sess)
    arn = policy.get("PolicyARN")
    names = {a.get("AlarmName") for a in policy.get("Alarms", [])}
    return [a for a in all_alarms if a.get("AlarmName") in names or arn in a.get("AlarmActions", [])]


def describe_all_alarms(sess: Any) -> list[dict]:
    pages = sess.client("cloudwatch").get_paginator("describe_alarms").paginate()
    return [a for page in pages for a in page.get("MetricAlarms", [])]


CONCURRENCY_PERIOD_S = 10
"""ConcurrentRequestsPerModel is a high-resolution metric: one datapoint per 10 s."""


def period_window(start: datetime, end: datetime, period_s: int) -> tuple[datetime, datetime]:
    """[start, end] widened to whole periods (CloudWatch stamps a datapoint with its period's start)."""
    t0 = math.floor(start.timestamp() / period_s) * period_s
    t1 = max(math.ceil(end.timestamp() / period_s) * period_s, t0 + period_s)
    return datetime.fromtimestamp(t0, tz=UTC), datetime.fromtimestamp(t1, tz=UTC)


def metric_series(
    sess: Any, namespace: str, metric: str, dimensions: dict[str, str], stat: str, period_s: int,
    start: datetime, end: datetime,
) -> list[tuple[datetime, float]]:
    """(period start, value) of one metric statistic over [start, end), oldest first, all pages."""
    query = {
        "Id": "m",
        "MetricStat": {
            "Metric": {
                "Namespace": namespace,
                "MetricName": metric,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
            },
            "Period": period_s,
            "Stat": stat,
        },
    }
    points: dict[datetime, float] = {}
    pages = sess.client("cloudwatch").get_paginator("get_metric_data").paginate(
        MetricDataQueries=[query], StartTime=start, EndTime=end, ScanBy="TimestampAscending"
    )
    for page in pages:
        for r in page.get("MetricDataResults", []):
            for ts, v in zip(r.get("Timestamps", []), r.get("Values", []), strict=True):
                points[ts.astimezone(UTC)] = float(v)
    return sorted(points.items())


def concurrency_datapoints(
    sess: Any, endpoint: str, start: datetime, end: datetime, variant: str = VARIANT
) -> list[tuple[datetime, float]]:
    """ConcurrentRequestsPerModel (Maximum, 10 s) over the periods that cover [start, end]."""
    t0, t1 = period_window(start, end, CONCURRENCY_PERIOD_S)
    return metric_series(
        sess, METRIC_NAMESPACE, METRIC, {"EndpointName": endpoint, "VariantName": variant}, "Maximum",
        CONCURRENCY_PERIOD_S, t0, t1,
    )


def covers(points: list[tuple[datetime, float]], start: datetime, end: datetime, period_s: int) -> bool:
    """True when CloudWatch has published through the end of the window: a datapoint exists for
    the last period that overlaps [start, end] (datapoints arrive in order, with a delay)."""
    if not points:
        return False
    _, t1 = period_window(start, end, period_s)
    last_period = t1 - timedelta(seconds=period_s)
    return max(ts for ts, _ in points) >= last_period


@dataclass
class CloudwatchReading:
    maximum: float | None
    """Maximum over the window; None when no datapoint arrived."""
    datapoints: int
    covered: bool
    waited_s: float


def wait_concurrency_max(
    sess: Any,
    endpoint: str,
    start: datetime,
    end: datetime,
    *,
    wait_s: float,
    poll_s: float,
    variant: str = VARIANT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[str], None] = lambda m: None,
) -> CloudwatchReading:
    """Poll ConcurrentRequestsPerModel until its datapoints cover [start, end] or ``wait_s`` has
    passed (CloudWatch publishes with a delay). A refused query counts as no data yet, so a ladder
    is never lost to a metric read; what arrived by the deadline is returned."""
    from botocore.exceptions import BotoCoreError, ClientError

    t0 = clock()
    points: list[tuple[datetime, float]] = []
    while True:
        try:
            points = concurrency_datapoints(sess, endpoint, start, end, variant)
        except (ClientError, BotoCoreError) as err:
            progress(f"CloudWatch refused the read ({client_error_message(err)}); retrying")
        waited = clock() - t0
        if covers(points, start, end, CONCURRENCY_PERIOD_S) or waited >= wait_s:
            break
        progress(f"waiting for CloudWatch {METRIC}: {len(points)} datapoint(s) so far, {waited:.0f}/{wait_s:g} s")
        sleep(min(poll_s, max(0.0, wait_s - waited)) or poll_s)
    values = [v for _, v in points]
    return CloudwatchReading(
        maximum=float(max(values)) if values else None,
        datapoints=len(values),
        covered=covers(points, start, end, CONCURRENCY_PERIOD_S),
        waited_s=round(clock() - t0, 3),
    )


def set_desired_instances(sess: Any, endpoint: str, count: int, variant: str = VARIANT) -> None:
    """UpdateEndpointWeightsAndCapacities: the variant's desired instance count, at once."""
    sess.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=endpoint,
        DesiredWeightsAndCapacities=[{"VariantName": variant, "DesiredInstanceCount": count}],
    )


@dataclass
class DeployedScaling:
    """What is deployed for one endpoint variant, read-only."""

    endpoint: str
    target: dict | None
    policies: list[dict]
    alarms: dict[str, list[dict]] = field(default_factory=dict)
    """policy name -> alarms that invoke it."""
    scheduled: list[dict] = field(default_factory=list)
    """Scheduled actions on the target (DescribeScheduledActions)."""


def read_deployed(sess: Any, endpoint: str, variant: str = VARIANT) -> DeployedScaling:
    target = scalable_target(sess, endpoint, variant)
    policies = scaling_policies(sess, endpoint, variant)
    all_alarms = describe_all_alarms(sess) if policies else []
    return DeployedScaling(
        endpoint=endpoint,
        target=target,
        policies=policies,
        alarms={p["PolicyName"]: alarms_for_policy(sess, p, all_alarms) for p in policies},
        scheduled=scheduled_actions(sess, endpoint, variant) if target is not None else [],
    )
