"""The platform-free plan rendered as Kubernetes objects (pure): :mod:`.sizing` turns the plan's
numbers into fields, :mod:`.objects` builds one model's objects as plain dicts (the one spec both the
Pulumi component and ``python -m speech render`` use), :mod:`.rules` restates what the API server and
KEDA refuse beyond the OpenAPI schemas."""
