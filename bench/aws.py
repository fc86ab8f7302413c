"""Small AWS reads shared by the commands: the endpoint's scalable target, its policies and
alarms, the variant's instance counts and CloudWatch concurrency. Every function takes an
injected boto3 session, so tests drive them against moto in-process."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Optional

from .errors import TargetError

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
VARIANT = "AllTraffic"
METRIC = "ConcurrentRequestsPerModel"
SUSPEND_KEYS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")


def session(region: Optional[str] = None):
    import boto3

    return boto3.session.Session(region_name=region)


def resource_id(endpoint: str, variant: str = VARIANT) -> str:
    return f"endpoint/{endpoint}/variant/{variant}"


def client_error_message(err: Exception) -> str:
    resp = getattr(err, "response", None) or {}
    return resp.get("Error", {}).get("Message") or str(err)


def describe_endpoint(sess: Any, endpoint: str) -> dict:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return sess.client("sagemaker").describe_endpoint(EndpointName=endpoint)
    except ClientError as err:
        raise TargetError(f"endpoint {endpoint!r}: {client_error_message(err)}; check --endpoint and the region") from None
    except BotoCoreError as err:
        raise TargetError(f"endpoint {endpoint!r}: {err}; check AWS credentials and region") from None


def variant_counts(ep: dict, variant: str = VARIANT) -> tuple[Optional[int], Optional[int]]:
    """(current, desired) instance count of a variant from DescribeEndpoint."""
    for pv in ep.get("ProductionVariants", []):
        if pv.get("VariantName") == variant:
            return pv.get("CurrentInstanceCount"), pv.get("DesiredInstanceCount")
    return None, None


def scalable_target(sess: Any, endpoint: str, variant: str = VARIANT) -> Optional[dict]:
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
    aas = sess.client("application-autoscaling")
    out, token = [], None
    while True:
        kw = dict(ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint, variant), ScalableDimension=DIMENSION)
        if token:
            kw["NextToken"] = token
        resp = aas.describe_scaling_policies(**kw)
        out += resp.get("ScalingPolicies", [])
        token = resp.get("NextToken")
        if not token:
            return out


def alarms_for_policy(sess: Any, policy: dict, all_alarms: Optional[list[dict]] = None) -> list[dict]:
    """CloudWatch alarms whose actions invoke this policy. AWS lists them on the policy; an
    emulator may not, so alarms are also matched by their AlarmActions."""
    if all_alarms is None:
        all_alarms = describe_all_alarms(sess)
    arn = policy.get("PolicyARN")
    names = {a.get("AlarmName") for a in policy.get("Alarms", [])}
    return [a for a in all_alarms if a.get("AlarmName") in names or arn in a.get("AlarmActions", [])]


def describe_all_alarms(sess: Any) -> list[dict]:
    cw = sess.client("cloudwatch")
    out, token = [], None
    while True:
        resp = cw.describe_alarms(**({"NextToken": token} if token else {}))
        out += resp.get("MetricAlarms", [])
        token = resp.get("NextToken")
        if not token:
            return out


def cloudwatch_concurrency_max(
    sess: Any, endpoint: str, start: datetime, end: datetime, variant: str = VARIANT
) -> Optional[float]:
    """Maximum of ConcurrentRequestsPerModel (10 s period) over [start, end]; None when CloudWatch
    has no datapoints (yet) or refuses the query, so a ladder is never lost to a metric read."""
    from botocore.exceptions import BotoCoreError, ClientError

    cw = sess.client("cloudwatch")
    try:
        resp = cw.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "c",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/SageMaker",
                            "MetricName": METRIC,
                            "Dimensions": [
                                {"Name": "EndpointName", "Value": endpoint},
                                {"Name": "VariantName", "Value": variant},
                            ],
                        },
                        "Period": 10,
                        "Stat": "Maximum",
                    },
                }
            ],
            StartTime=start - timedelta(seconds=10),
            EndTime=end + timedelta(seconds=10),
        )
    except (ClientError, BotoCoreError):
        return None
    values = [v for r in resp.get("MetricDataResults", []) for v in r.get("Values", [])]
    return float(max(values)) if values else None


@dataclass
class DeployedScaling:
    """What is deployed for one endpoint variant, read-only."""

    endpoint: str
    target: Optional[dict]
    policies: list[dict]
    alarms: dict[str, list[dict]] = field(default_factory=dict)
    """policy name -> alarms that invoke it."""


def read_deployed(sess: Any, endpoint: str, variant: str = VARIANT) -> DeployedScaling:
    target = scalable_target(sess, endpoint, variant)
    policies = scaling_policies(sess, endpoint, variant)
    all_alarms = describe_all_alarms(sess) if policies else []
    return DeployedScaling(
        endpoint=endpoint,
        target=target,
        policies=policies,
        alarms={p["PolicyName"]: alarms_for_policy(sess, p, all_alarms) for p in policies},
    )
