"""Pulumi components of a speech endpoint (import pulumi). :class:`SpeechModel` (``model.py``) is one
model, composing the others; the program makes one per model. The gate (speech.deploy.gate), the
scaling spec (speech.deploy.scaling) and the IAM documents (speech.deploy.iam) are pure."""

from speech.infra.components.autoscaling import Autoscaling, AutoscalingArgs
from speech.infra.components.cache import ModelCache, ModelCacheArgs
from speech.infra.components.endpoint import Endpoint, EndpointArgs
from speech.infra.components.foundation import Foundation, FoundationArgs
from speech.infra.components.inference import ComponentEndpoint, ComponentEndpointArgs, CopyAutoscaling, CopyAutoscalingArgs
from speech.infra.components.model import SpeechModel, SpeechModelArgs
from speech.infra.components.observability import Observability, ObservabilityArgs

__all__ = [
    "Autoscaling", "AutoscalingArgs", "ComponentEndpoint", "ComponentEndpointArgs", "CopyAutoscaling",
    "CopyAutoscalingArgs", "Endpoint", "EndpointArgs", "Foundation", "FoundationArgs",
    "ModelCache", "ModelCacheArgs", "Observability", "ObservabilityArgs", "SpeechModel", "SpeechModelArgs",
]
