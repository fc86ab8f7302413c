"""Where a batch (asynchronous) endpoint's requests and answers live: S3 prefixes in the model's
bucket, the success and error SNS topics, and the execution role's right to use exactly those."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from speech.deploy.iam import async_execution_policy

DELAY_METRIC = "ApproximateAgeOfOldestRequest"
"""Asynchronous endpoint metric (EndpointName, seconds): how long the oldest queued request has waited."""


def delay_alarm_args(endpoint_name: str, max_delay_s: float) -> dict:
    """The route is late: the oldest queued request has waited longer than the acceptable delay
    for two one-minute periods (it cannot complete in time any more). Missing data (no queue) is
    not late."""
    return dict(
        name=f"{endpoint_name}-delay",
        alarm_description=f"the oldest queued request of {endpoint_name} has waited more than max_delay_s "
                          f"{max_delay_s:g} s: the batch route misses its delay (capacity capped, or not waking)",
        namespace="AWS/SageMaker", metric_name=DELAY_METRIC, dimensions={"EndpointName": endpoint_name},
        statistic="Maximum", period=60, evaluation_periods=2, datapoints_to_alarm=2, threshold=max_delay_s,
        comparison_operator="GreaterThanThreshold", treat_missing_data="notBreaching",
    )


class BatchIOArgs:
    def __init__(self, *, model: str, endpoint_name: str, bucket_name: pulumi.Input[str], bucket_arn: pulumi.Input[str],
                 role_id: pulumi.Input[str], max_delay_s: float | None = None, topic_arn: pulumi.Input[str] | None = None,
                 tags: dict[str, str] | None = None) -> None:
        self.model = model
        """Model key in stack config; names the prefixes."""
        self.endpoint_name = endpoint_name
        """The asynchronous endpoint (descriptions only)."""
        self.bucket_name = bucket_name
        """The model's bucket (the weights bucket): requests and answers stay with the stack."""
        self.bucket_arn = bucket_arn
        """ARN of that bucket: the execution role's and clients' S3 grants name prefixes under it."""
        self.role_id = role_id
        """The SageMaker execution role that gets the async permissions."""
        self.max_delay_s = max_delay_s
        """The acceptable completion delay (plan.max_delay_s): the delay alarm's threshold."""
        self.topic_arn = topic_arn
        """The stack's alarm topic: the delay alarm notifies it on ALARM and OK."""
        self.tags = tags or {}
        """Tags for the topics and the delay alarm."""


class BatchIO(pulumi.ComponentResource):
    """The batch route's S3 prefixes (``async/<model>/input|output|failure``), its two SNS topics,
    the execution role's async permissions and the delay alarm."""

    success_topic: aws.sns.Topic
    error_topic: aws.sns.Topic
    input_prefix: str
    output_prefix: str
    failure_prefix: str

    def __init__(self, name: str, args: BatchIOArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:BatchIO", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        root = f"async/{args.model}"
        self.input_prefix, self.output_prefix, self.failure_prefix = f"{root}/input", f"{root}/output", f"{root}/failure"
        self.success_topic = aws.sns.Topic(f"{name}-success", tags=args.tags, opts=child)
        self.error_topic = aws.sns.Topic(f"{name}-error", tags=args.tags, opts=child)
        self.s3_output_path = pulumi.Output.concat("s3://", args.bucket_name, f"/{self.output_prefix}/")
        self.s3_failure_path = pulumi.Output.concat("s3://", args.bucket_name, f"/{self.failure_prefix}/")
        prefixes = dict(input_prefix=self.input_prefix, output_prefix=self.output_prefix,
                        failure_prefix=self.failure_prefix)
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-execution-async",
            role=args.role_id,
            policy=pulumi.Output.all(args.bucket_arn, self.success_topic.arn, self.error_topic.arn).apply(
                lambda a: json.dumps(async_execution_policy(bucket_arn=a[0], success_topic_arn=a[1],
                                                            error_topic_arn=a[2], **prefixes))),
            opts=child,
        )
        self.delay_alarm = None
        if args.max_delay_s is not None and args.topic_arn is not None:
            self.delay_alarm = aws.cloudwatch.MetricAlarm(f"{name}-delay", opts=child, alarm_actions=[args.topic_arn],
                                                          ok_actions=[args.topic_arn], tags=args.tags,
                                                          **delay_alarm_args(args.endpoint_name, args.max_delay_s))
        self.register_outputs({"success_topic_arn": self.success_topic.arn, "error_topic_arn": self.error_topic.arn,
                               "s3_output_path": self.s3_output_path})
