"""Pulumi components of a speech endpoint (import pulumi). The gate and IAM documents are pure."""

from .autoscaling import Autoscaling, AutoscalingArgs
from .cache import ModelCache, ModelCacheArgs
from .endpoint import Endpoint, EndpointArgs
from .foundation import Foundation, FoundationArgs
from .gate import GateDecision, ModelDeployment, gate, plan_model
from .observability import Observability, ObservabilityArgs

__all__ = [
    "Autoscaling", "AutoscalingArgs", "Endpoint", "EndpointArgs", "Foundation", "FoundationArgs",
    "GateDecision", "ModelCache", "ModelCacheArgs", "ModelDeployment", "Observability",
    "ObservabilityArgs", "gate", "plan_model",
]
