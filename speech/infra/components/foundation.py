"""Foundation of one model: weights bucket, image repository, SageMaker execution role.

The stack owns what it stores: the bucket holds objects written outside Pulumi (the weight-cache
build, old versions) and the repository holds pushed images, so both are created with
force_destroy / force_delete and ``pulumi destroy`` removes them with their contents.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from speech.deploy.iam import assume_role_policy, component_log_group_arn, endpoint_log_group_arn, execution_role_policy


class FoundationArgs:
    def __init__(
        self,
        *,
        model: str,
        endpoint_name: str,
        account_id: pulumi.Input[str],
        region: pulumi.Input[str],
        image_repository_arn: str | None = None,
        tags: dict[str, str] | None = None,
        inference_component: str | None = None,
    ) -> None:
        self.inference_component = inference_component
        """hosting components: the inference component's name, whose containers log to their own group."""
        self.model = model
        """Model key in stack config; names the weights prefix."""
        self.endpoint_name = endpoint_name
        """Endpoint name, known at preview: scopes the role's log permissions."""
        self.account_id = account_id
        """AWS account the stack deploys to (for log group ARNs)."""
        self.region = region
        """AWS region the stack deploys to."""
        self.image_repository_arn = image_repository_arn
        """ARN of an existing repository the image comes from (image in config); None: the stack
        creates its own repository and builds the image into it."""
        self.tags = tags or {}
        """Tags for every taggable child."""


class Foundation(pulumi.ComponentResource):
    bucket: aws.s3.Bucket
    repository: aws.ecr.Repository | None
    role: aws.iam.Role
    weights_prefix: str

    def __init__(self, name: str, args: FoundationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:Foundation", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.weights_prefix = f"weights/{args.model}"

        self.bucket = aws.s3.Bucket(f"{name}-weights", force_destroy=True, tags=args.tags, opts=child)
        self.encryption = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights-encryption",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="AES256"
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        self.public_access_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-weights-public-access",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        self.versioning = aws.s3.BucketVersioning(
            f"{name}-weights-versioning",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )

        self.repository = None
        repository_arn: pulumi.Input[str] = args.image_repository_arn or ""
        if args.image_repository_arn is None:
            self.repository = aws.ecr.Repository(
                f"{name}-images",
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
                force_delete=True,
                tags=args.tags,
                opts=child,
            )
            repository_arn = self.repository.arn

        self.role = aws.iam.Role(
            f"{name}-execution",
            assume_role_policy=json.dumps(assume_role_policy("sagemaker.amazonaws.com")),
            description=f"SageMaker execution role of {args.endpoint_name}",
            tags=args.tags,
            opts=child,
        )
        prefix = self.weights_prefix
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-execution-policy",
            role=self.role.id,
            policy=pulumi.Output.all(self.bucket.arn, repository_arn, args.region, args.account_id).apply(
                lambda a: json.dumps(
                    execution_role_policy(
                        bucket_arn=a[0],
                        weights_prefix=prefix,
                        repository_arn=a[1],
                        log_group_arn=endpoint_log_group_arn(a[2], a[3], args.endpoint_name),
                        component_log_group_arn=component_log_group_arn(a[2], a[3], args.inference_component)
                        if args.inference_component else None,
                    )
                )
            ),
            opts=child,
        )
        self.register_outputs(
            {
                "bucket": self.bucket.bucket,
                "repository_url": self.repository.repository_url if self.repository else None,
                "role_arn": self.role.arn,
            }
        )
