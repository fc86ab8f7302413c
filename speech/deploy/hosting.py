"""What SageMaker hosting accepts, and the hosting settings derived from measurements (pure).

Each rule states the AWS limit it checks (botocore's sagemaker service model) and the unit.
"""

from __future__ import annotations

import math
import re

from speech.schema.artifacts import TtotalArtifact
from speech.errors import ConfigError

ENDPOINT_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""SageMaker EndpointName: pattern ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``, at most 63 characters."""
ENDPOINT_NAME_MAX = 63

STARTUP_TIMEOUT_MIN_S = 60
STARTUP_TIMEOUT_MAX_S = 3600
"""ContainerStartupHealthCheckTimeoutInSeconds and ModelDataDownloadTimeoutInSeconds: 60..3600."""
STARTUP_TIMEOUT_UNMEASURED_S = 600
"""Before T_total is measured: room for a cold GPU framework import, weights load and warm-up."""
STARTUP_SAFETY = 3.0
STARTUP_MARGIN_S = 60.0
MODEL_DATA_DOWNLOAD_TIMEOUT_S = 600
"""Copying the weights prefix (about 90 MB for Kokoro int8) to /opt/ml/model."""
ROUTING_STRATEGY = "LEAST_OUTSTANDING_REQUESTS"
"""Requests go to the instance with the fewest in flight: the surge alarm's per-instance Maximum
assumes balanced instances, which random routing does not give at high concurrency."""


def endpoint_name(stack: str, model: str) -> str:
    """``<stack>-<model>``, or a :class:`ConfigError` naming the limit SageMaker would refuse it at."""
    name = f"{stack}-{model}"
    if len(name) > ENDPOINT_NAME_MAX or not ENDPOINT_NAME_RE.match(name):
        why = (f"{len(name)} characters, SageMaker allows {ENDPOINT_NAME_MAX}" if len(name) > ENDPOINT_NAME_MAX
               else "SageMaker allows letters, digits and '-' only, starting and ending with a letter or digit")
        raise ConfigError(
            f"speech-endpoints:models.{model}: endpoint name {name!r} (stack {stack!r} + model {model!r}) is invalid: "
            f"{why}; fix: use a shorter stack or model name"
        )
    return name


def startup_phase_s(ttotal: TtotalArtifact) -> float | None:
    """Measured seconds from ``container_started`` to ``ready`` (/ping 200), or None when not measured."""
    at = {p.name: p.offset_s for p in ttotal.phases if p.applicable and p.offset_s is not None}
    if "container_started" not in at or "ready" not in at or at["ready"] < at["container_started"]:
        return None
    return at["ready"] - at["container_started"]


def startup_health_check_timeout_s(ttotal: TtotalArtifact | None) -> int:
    """Container start-up health-check timeout, seconds: 3 x the measured start-up + 60 s, within
    SageMaker's 60..3600; 600 s when T_total has not been measured."""
    startup = startup_phase_s(ttotal) if ttotal is not None else None
    if startup is None:
        return STARTUP_TIMEOUT_UNMEASURED_S
    raw = math.ceil(STARTUP_SAFETY * startup + STARTUP_MARGIN_S)
    return max(STARTUP_TIMEOUT_MIN_S, min(STARTUP_TIMEOUT_MAX_S, raw))
