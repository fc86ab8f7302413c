"""The one definition of the container's CloudWatch metrics: namespace, dimensions, metric names.

The container publishes them in embedded metric format (:mod:`container.metrics`); the Pulumi
program (``speech``) builds its dashboard and alarms from the same names, and a test pins that the
two agree. Why here: the image copies only ``container/`` (container/Dockerfile), so the
definition the server emits with must live inside that package; this module uses the standard
library only, so ``speech`` imports it without loading the server's dependencies (like
:mod:`container.markers`).
"""
from __future__ import annotations

NAMESPACE = "SpeechEndpoints/Container"
"""CloudWatch namespace of every container metric (the execution role may only write this one)."""

DIM_ENDPOINT = "EndpointName"
DIM_VARIANT = "VariantName"
DIM_MODEL = "Model"
DIMENSIONS = (DIM_ENDPOINT, DIM_VARIANT, DIM_MODEL)
"""One dimension set, in this order, on every EMF line. EndpointName and VariantName are the
names AWS/SageMaker uses, so one endpoint's container metrics never mix with another stack's or a
canary fleet's that serves the same model name."""

ENV_ENDPOINT = "ENDPOINT_NAME"
ENV_VARIANT = "VARIANT_NAME"
"""Environment variables the program sets on the SageMaker Model (SageMaker does not pass the
endpoint or variant name to the container itself)."""
LOCAL_ENDPOINT = "local"
"""EndpointName outside SageMaker (a local run, a benchmark): never mixes with a deployed one."""
DEFAULT_VARIANT = "AllTraffic"

# Metric names.
CONCURRENT = "ConcurrentRequests"
QUEUE_DEPTH = "QueueDepth"
ADMITTED = "Admitted"
REJECTED = "Rejected"
"""503 queue_saturated answers in the flush interval (count)."""
SHED = "Shed"
TTFAB_P95 = "TTFABp95"
"""p95 time to first audio byte over the flush interval, queueing included (ms)."""
SERVICE_P95 = "ServiceTimep95"
"""p95 uncontended service time over the flush interval (ms): from the moment a request's first
segment starts inference to its first audio byte, queueing excluded, counted only for requests
whose first audio came from a run with no other inference in flight (so it compares with the
measured c=1 p95 at any occupancy; absent in an interval without such a request). What the
slowdown alarm watches: it moves only when the instance itself is slower."""
PRESSURE = "PressureIndex"

UNITS = {CONCURRENT: "Count", QUEUE_DEPTH: "Count", ADMITTED: "Count", REJECTED: "Count", SHED: "Count",
         TTFAB_P95: "Milliseconds", SERVICE_P95: "Milliseconds", PRESSURE: "None"}


def dimensions(endpoint_name: str, variant_name: str, model: str) -> dict[str, str]:
    """The dimension values of one endpoint variant's container metrics."""
    return {DIM_ENDPOINT: endpoint_name, DIM_VARIANT: variant_name, DIM_MODEL: model}
