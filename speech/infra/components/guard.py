"""Safe instance-type changes: scaling is deregistered before the endpoint update, re-registered after.
The same function also reads the variant's desired instance count before a new endpoint
configuration is made (``desired_count``), so an update keeps the capacity it has (below).

SageMaker refuses UpdateEndpoint when it changes the instance type of a variant that is a
registered scalable target. Pulumi updates the endpoint before anything registered after it, so
the order is made explicit in the resource graph:

1. ``<model>-scaling-guard-run`` (an ``aws.lambda_.Invocation`` whose trigger is the instance type)
   deregisters the variant's scalable target (which deletes its policies) when the instance type
   changes; the endpoint depends on it, so this happens before the endpoint update. On a first
   deploy there is nothing to deregister and it returns at once.
2. The endpoint updates to the new instance type.
3. The scalable target carries the instance type in a tag that is ``replace_on_changes`` with
   ``delete_before_replace``, and so do its policies: Pulumi deletes (no-op, already gone) and
   re-creates them after the endpoint, with the plan of the new stack config.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from speech.deploy.iam import assume_role_policy, scaling_guard_policy
from speech.deploy.scaling import SCALABLE_DIMENSION, SERVICE_NAMESPACE
from speech.infra.components.lambda_code import RETRY_CODE, retry_budget_s

TAG_INSTANCE_TYPE = "speech:instance-type"
"""Tag on the scalable target whose change replaces it (delete first, then create)."""
REPLACE_ON = [f'tags["{TAG_INSTANCE_TYPE}"]']
GUARD_TIMEOUT_S = 60 + retry_budget_s()
"""The guard's Lambda timeout: a minute for the call itself, plus the IAM-propagation retries."""

GUARD_CODE = RETRY_CODE + '''
import boto3


def desired_count(event):
    """The variant's desired instance count now, within [floor, ceiling]; the floor when the
    endpoint does not exist yet (a first deploy) or reports no such variant."""
    sm = boto3.client("sagemaker")
    try:
        ep = with_iam_retry(sm.describe_endpoint, EndpointName=event["endpoint_name"])
    except sm.exceptions.ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ValidationException":  # "Could not find endpoint"
            return {"desired_instance_count": event["floor"], "source": "no endpoint yet"}
        raise
    for v in ep.get("ProductionVariants", []):
        if v.get("VariantName") == event["variant"]:
            now = int(v.get("DesiredInstanceCount") or v.get("CurrentInstanceCount") or 0)
            kept = max(event["floor"], min(event["ceiling"], now))
            return {"desired_instance_count": kept, "source": f"desired {now} now"}
    return {"desired_instance_count": event["floor"], "source": "no such variant"}


def handler(event, context):
    if event.get("action") == "desired_count":
        return desired_count(event)
    aas = boto3.client("application-autoscaling")
    try:
        # Denied while the role policy created moments ago propagates (first deploy): retried.
        with_iam_retry(aas.deregister_scalable_target, ServiceNamespace="@SERVICE_NAMESPACE@",
                       ResourceId=event["resource_id"], ScalableDimension="@SCALABLE_DIMENSION@")
    except aas.exceptions.ObjectNotFoundException:
        return {"deregistered": False, "instance_type": event["instance_type"]}
    return {"deregistered": True, "instance_type": event["instance_type"]}
'''.replace("@SERVICE_NAMESPACE@", SERVICE_NAMESPACE).replace("@SCALABLE_DIMENSION@", SCALABLE_DIMENSION)


class ScalingGuardArgs:
    def __init__(self, *, endpoint_name: str, resource_id: str, instance_type: str, account_id: pulumi.Input[str],
                 region: pulumi.Input[str], tags: dict[str, str] | None = None) -> None:
        self.endpoint_name = endpoint_name
        """Endpoint whose variant may be scaled."""
        self.resource_id = resource_id
        """Application Auto Scaling resource id of the variant, ``endpoint/<name>/variant/<variant>``."""
        self.instance_type = instance_type
        """The instance type this update deploys: a change re-runs the guard."""
        self.account_id = account_id
        """AWS account (ARNs in the guard's policy)."""
        self.region = region
        """AWS region (ARNs in the guard's policy)."""
        self.tags = tags or {}
        """Tags for the role and the function."""


class ScalingGuard(pulumi.ComponentResource):
    invocation: aws.lambda_.Invocation

    def __init__(self, name: str, args: ScalingGuardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:ScalingGuard", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.role = aws.iam.Role(f"{name}", assume_role_policy=json.dumps(assume_role_policy("lambda.amazonaws.com")),
                                 tags=args.tags, opts=child)
        self.function = aws.lambda_.Function(
            f"{name}", role=self.role.arn, runtime="python3.12", handler="index.handler",
            timeout=GUARD_TIMEOUT_S,
            code=pulumi.AssetArchive({"index.py": pulumi.StringAsset(GUARD_CODE)}), tags=args.tags, opts=child,
        )
        self.policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=self.role.id,
            policy=pulumi.Output.all(args.region, args.account_id, self.function.name).apply(
                lambda a: json.dumps(scaling_guard_policy(
                    scalable_target_arn_prefix=f"arn:aws:application-autoscaling:{a[0]}:{a[1]}:scalable-target",
                    endpoint_arn=f"arn:aws:sagemaker:{a[0]}:{a[1]}:endpoint/{args.endpoint_name.lower()}",
                    log_group_arn=f"arn:aws:logs:{a[0]}:{a[1]}:log-group:/aws/lambda/{a[2]}",
                ))
            ),
            opts=child,
        )
        self.invocation = aws.lambda_.Invocation(
            f"{name}-run",
            function_name=self.function.name,
            input=json.dumps({"resource_id": args.resource_id, "instance_type": args.instance_type}),
            triggers={"instance_type": args.instance_type},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.policy]),
        )
        self.register_outputs({"result": self.invocation.result})


def initial_count(result: str, floor: int, ceiling: int | None = None) -> int:
    """The initial instance count of a new endpoint configuration from the capacity read's result
    (``{"desired_instance_count": n}``), within [floor, ceiling]; the floor when it carries none."""
    try:
        n = json.loads(result).get("desired_instance_count")
    except (TypeError, ValueError, AttributeError):
        return floor
    if not isinstance(n, int | float) or n < floor:
        return floor
    return int(min(n, ceiling)) if ceiling is not None else int(n)
