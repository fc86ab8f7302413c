"""What a deployed endpoint did over a window, read from AWS (``bench observe``'s reads): its
container's EMF series in CloudWatch and its variant's scaling activities. Read-only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.aws import client as aws
from bench.errors import BenchError
from speech.plan.calibration import Activity


def read_window(sess: Any, namespace: str, dimensions: dict[str, str], period_s: int, start: datetime,
                end: datetime) -> tuple[list[tuple[datetime, float]], list[tuple[datetime, float]], float, float]:
    """The container's in-flight mean and p95 TTFAB per period, and the admitted and rejected
    requests summed, from ``start`` to ``end``; a refused read is a :class:`BenchError` naming the
    permission."""
    def series(metric: str, stat: str):
        return aws.metric_series(sess, namespace, metric, dimensions, stat, period_s, start, end)

    try:
        occupancy = series("ConcurrentRequests", "Average")
        p95 = series("TTFABp95", "Maximum")
        admitted = sum(v for _, v in series("Admitted", "Sum"))
        rejected = sum(v for _, v in series("Rejected", "Sum"))
    except (ClientError, BotoCoreError) as err:
        raise BenchError(f"CloudWatch refused the read ({aws.client_error_message(err)}); check the credentials' "
                         "cloudwatch:GetMetricData permission and the region") from None
    return occupancy, p95, admitted, rejected


def read_scaling_activities(sess: Any, endpoint: str, start: datetime) -> tuple[list[Activity], bool, str]:
    """DescribeScalingActivities for the endpoint's variant since ``start``: (activities, read, why not)."""
    out: list[Activity] = []
    try:
        pages = sess.client("application-autoscaling").get_paginator("describe_scaling_activities").paginate(
            ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(endpoint), ScalableDimension=aws.DIMENSION
        )
        for page in pages:
            for a in page.get("ScalingActivities", []):
                at = a["StartTime"].astimezone(UTC)
                if at >= start:
                    out.append(Activity(at=at, status=a.get("StatusCode", ""), description=a.get("Description", ""),
                                        cause=a.get("Cause", "")))
    except (ClientError, BotoCoreError) as err:
        return [], False, aws.client_error_message(err)
    return out, True, ""
