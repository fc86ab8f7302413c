"""Pulumi components of a speech endpoint (import pulumi). The gate (speech.gate), the scaling spec
(speech.scaling) and the IAM documents (speech.components.iam) are pure."""

from .autoscaling import Autoscaling, AutoscalingArgs
from .cache import ModelCache, ModelCacheArgs
from .endpoint import Endpoint, EndpointArgs
from .foundation import Foundation, FoundationArgs
from .inference import ComponentEndpoint, ComponentEndpointArgs, CopyAutoscaling, CopyAutoscalingArgs
from .observability import Observability, ObservabilityArgs

__all__ = [
    "Autoscaling", "AutoscalingArgs", "ComponentEndpoint", "ComponentEndpointArgs", "CopyAutoscaling",
    "CopyAutoscalingArgs", "Endpoint", "EndpointArgs", "Foundation", "FoundationArgs",
    "ModelCache", "ModelCacheArgs", "Observability", "ObservabilityArgs",
]
