"""IAM policy documents as small pure functions (ARNs in, dict out) so tests can read them.

Least privilege: every statement names the bucket prefix, repository, log group or project it
needs. The few actions AWS only grants on ``*`` (ecr:GetAuthorizationToken,
cloudwatch:PutMetricData) are named one by one, and PutMetricData is pinned to our namespace.
"""

from __future__ import annotations

from typing import Any

from container.telemetry import NAMESPACE as EMF_NAMESPACE
from speech.deploy.iam_check import wildcard_findings

INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")
"""The runtime calls a client of one endpoint needs: a whole answer, or the audio as it streams."""

ASYNC_INVOKE_ACTIONS = ("sagemaker:InvokeEndpointAsync",)
"""The runtime call a client of an asynchronous (batch) endpoint needs (botocore sagemaker-runtime)."""

Doc = dict[str, Any]


METRICS_READ_ACTIONS = ("cloudwatch:QueryMetrics", "cloudwatch:GetMetricData", "cloudwatch:ListMetrics")
"""What querying SageMaker's detailed-observability metrics through CloudWatch's PromQL endpoint
takes (SageMaker developer guide, "Connect to your observability tool": "Required permissions"),
and what a CloudWatch dashboard and ``bench observe`` read with (GetMetricData, ListMetrics)."""


def metrics_reader_policy() -> Doc:
    """Read an endpoint's metrics: the container's ``/metrics`` scraped by detailed observability
    (PromQL) and the CloudWatch metrics of its dashboard. CloudWatch scopes none of the three by
    resource, so Resource is ``*`` (:data:`speech.deploy.iam_check.ALLOWED_ON_STAR`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "ReadEndpointMetrics", "Effect": "Allow", "Action": list(METRICS_READ_ACTIONS),
                       "Resource": "*"}],
    }


def account_trust_policy(account_id: str) -> Doc:
    """Trust policy letting principals of one account assume the role (their own IAM policy must
    still allow sts:AssumeRole on it): the client teams of this account, nobody outside it."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
                       "Action": "sts:AssumeRole"}],
    }


def invoke_endpoint_policy(endpoint_arn: str) -> Doc:
    """A client of one endpoint: the two runtime invoke calls on that endpoint's ARN, nothing else."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "InvokeOneEndpoint", "Effect": "Allow", "Action": list(INVOKE_ACTIONS),
                       "Resource": [endpoint_arn]}],
    }


def assume_role_policy(service: str) -> Doc:
    """Trust policy letting one AWS service (e.g. ``sagemaker.amazonaws.com``) assume the role."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def endpoint_log_group_arn(region: str, account: str, endpoint_name: str) -> str:
    """SageMaker writes an endpoint's container logs to /aws/sagemaker/Endpoints/<name>."""
    return f"arn:aws:logs:{region}:{account}:log-group:/aws/sagemaker/Endpoints/{endpoint_name}"


def component_log_group_arn(region: str, account: str, component_name: str) -> str:
    """An inference component's containers log to /aws/sagemaker/InferenceComponents/<component>,
    not to the endpoint's group: without it the copies write no logs, so no EMF metrics either."""
    return f"arn:aws:logs:{region}:{account}:log-group:/aws/sagemaker/InferenceComponents/{component_name}"


def _list_prefix_statement(bucket_arn: str, prefix: str) -> dict:
    """ListBucket on the bucket, but only for keys under the model's own prefix."""
    return {
        "Sid": "ListOwnWeights",
        "Effect": "Allow",
        "Action": ["s3:ListBucket"],
        "Resource": [bucket_arn],
        "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}},
    }


def _logs_statement(log_group_arn: str, *more: str) -> Doc:
    return {
        "Sid": "OwnLogs",
        "Effect": "Allow",
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        "Resource": [r for arn in (log_group_arn, *more) for r in (arn, f"{arn}:*")],
    }


def execution_role_policy(
    *, bucket_arn: str, weights_prefix: str, repository_arn: str, log_group_arn: str,
    component_log_group_arn: str | None = None,
) -> Doc:
    """SageMaker execution role: read its own weights, pull its own image, write its own logs/metrics
    (with ``component_log_group_arn``, hosting components: the component's log group as well)."""
    prefix = weights_prefix.strip("/")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadOwnWeights",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [f"{bucket_arn}/{prefix}/*"],
            },
            _list_prefix_statement(bucket_arn, prefix),
            {
                "Sid": "PullOwnImage",
                "Effect": "Allow",
                "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                "Resource": [repository_arn],
            },
            {
                # GetAuthorizationToken has no resource-level permissions: AWS only accepts "*".
                "Sid": "EcrLogin",
                "Effect": "Allow",
                "Action": ["ecr:GetAuthorizationToken"],
                "Resource": "*",
            },
            _logs_statement(log_group_arn, *([component_log_group_arn] if component_log_group_arn else [])),
            {
                # PutMetricData has no resource-level permissions; the namespace condition scopes it.
                "Sid": "OwnMetrics",
                "Effect": "Allow",
                "Action": ["cloudwatch:PutMetricData"],
                "Resource": "*",
                "Condition": {"StringEquals": {"cloudwatch:namespace": EMF_NAMESPACE}},
            },
        ],
    }


def cache_build_policy(*, bucket_arn: str, weights_prefix: str, log_group_arn: str,
                       source_s3_uri: str | None = None) -> Doc:
    """CodeBuild role of the weight-cache job: write (and list) its model's weights prefix, its logs;
    with an ``s3://`` weights source, read that folder (or that one archive) too."""
    prefix = weights_prefix.strip("/")
    statements: list[dict] = [
        {
            "Sid": "SyncOwnWeights",
            "Effect": "Allow",
            # GetObjectVersion: CodeBuild reads its S3 source by version in a versioned bucket.
            "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject"],
            "Resource": [f"{bucket_arn}/{prefix}/*"],
        },
        _list_prefix_statement(bucket_arn, prefix),
        _logs_statement(log_group_arn),
    ]
    if source_s3_uri is not None:
        bucket, _, key = source_s3_uri.removeprefix("s3://").partition("/")
        partition = bucket_arn.split(":")[1]
        src_arn = f"arn:{partition}:s3:::{bucket}"
        if key.endswith("/"):
            statements.append({"Sid": "ReadWeightsSource", "Effect": "Allow", "Action": ["s3:GetObject"],
                               "Resource": [f"{src_arn}/{key}*"]})
            statements.append({**_list_prefix_statement(src_arn, key.strip("/")), "Sid": "ListWeightsSource"})
        else:
            statements.append({"Sid": "ReadWeightsSource", "Effect": "Allow", "Action": ["s3:GetObject"],
                               "Resource": [f"{src_arn}/{key}"]})
    return {"Version": "2012-10-17", "Statement": statements}


def cache_trigger_policy(*, project_arn: str, log_group_arn: str) -> Doc:
    """Lambda that starts the cache build once at deploy and waits for it: that project only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RunCacheBuild",
                "Effect": "Allow",
                "Action": ["codebuild:StartBuild", "codebuild:BatchGetBuilds"],
                "Resource": [project_arn],
            },
            _logs_statement(log_group_arn),
        ],
    }


def wildcard_violations(doc: Doc) -> list[str]:
    """What :func:`speech.deploy.iam_check.wildcard_findings` (the pack's rule too) finds in ``doc``."""
    return [f.describe() for f in wildcard_findings(doc)]


def scaling_guard_policy(*, scalable_target_arn_prefix: str, endpoint_arn: str, log_group_arn: str) -> Doc:
    """Lambda that deregisters one variant's scalable target before an instance-type change."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DeregisterOwnTarget",
                "Effect": "Allow",
                "Action": ["application-autoscaling:DeregisterScalableTarget"],
                "Resource": [f"{scalable_target_arn_prefix}/*"],
            },
            {
                # Application Auto Scaling reads the variant on the caller's behalf.
                "Sid": "ReadOwnEndpoint",
                "Effect": "Allow",
                "Action": ["sagemaker:DescribeEndpoint"],
                "Resource": [endpoint_arn],
            },
            _logs_statement(log_group_arn),
        ],
    }


def async_execution_policy(*, bucket_arn: str, input_prefix: str, output_prefix: str, failure_prefix: str,
                           success_topic_arn: str, error_topic_arn: str) -> Doc:
    """What an asynchronous endpoint's execution role adds: read the request payloads clients put
    under the input prefix, write responses and failures under their two prefixes, publish to the
    success and error topics. Nothing else in the bucket, no other topic."""
    def under(prefix: str) -> str:
        return f"{bucket_arn}/{prefix.strip('/')}/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadAsyncInput", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [under(input_prefix)]},
            # A large response is a multipart upload; an interrupted one is aborted, not left to bill.
            {"Sid": "WriteAsyncOutput", "Effect": "Allow", "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
             "Resource": [under(output_prefix), under(failure_prefix)]},
            {"Sid": "NotifyAsync", "Effect": "Allow", "Action": ["sns:Publish"],
             "Resource": [success_topic_arn, error_topic_arn]},
        ],
    }


def async_invoke_policy(*, endpoint_arn: str, bucket_arn: str, input_prefix: str, output_prefix: str,
                        failure_prefix: str) -> Doc:
    """A client of one asynchronous endpoint: InvokeEndpointAsync on its ARN, put request payloads
    under the input prefix, read responses and failures. Nothing else."""
    def under(prefix: str) -> str:
        return f"{bucket_arn}/{prefix.strip('/')}/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "InvokeOneEndpointAsync", "Effect": "Allow", "Action": list(ASYNC_INVOKE_ACTIONS),
             "Resource": [endpoint_arn]},
            {"Sid": "PutRequests", "Effect": "Allow", "Action": ["s3:PutObject"], "Resource": [under(input_prefix)]},
            {"Sid": "GetResponses", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": [under(output_prefix), under(failure_prefix)]},
        ],
    }


ALARM_PUBLISHER = "cloudwatch.amazonaws.com"
"""The service principal that publishes alarm notifications to SNS."""
ALARM_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey*"]
"""What a publisher to an SSE-KMS topic needs on its key (SNS developer guide, "Enable
compatibility between event sources from AWS services and encrypted topics")."""


def alarm_topic_key_policy(account_id: str) -> Doc:
    """Key policy of the alarm topic's customer-managed key: the account administers the key
    through IAM (AWS's default key policy statement; without it the key cannot be managed), and
    CloudWatch may use it to publish. The AWS-managed ``alias/aws/sns`` cannot do this: its policy
    admits only principals of the account and cannot be edited, so CloudWatch's alarm actions fail
    to publish and no notification arrives."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministersKey",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchAlarmsPublish",
                "Effect": "Allow",
                "Principal": {"Service": ALARM_PUBLISHER},
                "Action": ALARM_KEY_ACTIONS,
                "Resource": "*",
            },
        ],
    }
