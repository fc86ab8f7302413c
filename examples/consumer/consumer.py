"""The consumer's logic, importable by the tests (they run it under Pulumi's mocks)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

SUPPORTED_OUTPUTS_VERSION = 1
"""The outputs_version this program was written against; another one stops it with a clear error."""


def client_policy(endpoint: dict[str, Any]) -> dict[str, Any]:
    """The calls the producer says its endpoint takes (``runtime_actions``) on its ARN only."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "CallSpeechEndpoint", "Effect": "Allow", "Action": list(endpoint["runtime_actions"]),
                       "Resource": [endpoint["arn"]]}],
    }


def _endpoint(outputs: list[Any], model: str) -> dict[str, Any]:
    version, endpoints = outputs
    if version != SUPPORTED_OUTPUTS_VERSION:
        raise pulumi.RunError(f"speech stack outputs_version is {version}, this program reads "
                              f"{SUPPORTED_OUTPUTS_VERSION}; update it to the new contract (README 'Stack outputs')")
    if model not in endpoints:
        raise pulumi.RunError(f"speech stack has no model {model!r}; it serves {', '.join(sorted(endpoints))}")
    return endpoints[model]


def define(producer: str, model: str, role: str) -> dict[str, pulumi.Output]:
    ref = pulumi.StackReference(producer)
    endpoint = pulumi.Output.all(ref.require_output("outputs_version"), ref.require_output("endpoints")).apply(
        lambda o: _endpoint(o, model))
    policy = aws.iam.RolePolicy(f"{model}-client", role=role,
                                policy=endpoint.apply(lambda e: json.dumps(client_policy(e))))
    out = {"endpoint_name": endpoint.apply(lambda e: e["name"]), "runtime_call": endpoint.apply(lambda e: e["runtime_call"]),
           "streaming": endpoint.apply(lambda e: e["streaming"]), "policy": policy.policy}
    for k, v in out.items():
        pulumi.export(k, v)
    return out
