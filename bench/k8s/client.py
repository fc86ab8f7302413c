"""One cluster connection (the official ``kubernetes`` client, from a kubeconfig) and its errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.errors import TargetError, UsageError

T = TypeVar("T")
KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"


class Cluster:
    """The API groups the bench commands use, on one ApiClient (no process-wide configuration)."""

    def __init__(self, api_client: Any, context: str | None = None) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.context = context
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.autoscaling = client.AutoscalingV2Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with the API's refusals as one-line errors naming ``what``."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as err:
            hint = {401: "the kubeconfig's credentials were refused", 403: "the kubeconfig's user may not do this (RBAC)",
                    404: "not found: check --kubernetes NAMESPACE/NAME and the kubeconfig's context"}.get(err.status, "")
            raise TargetError(f"Kubernetes API: {what}: {err.status} {err.reason}" + (f"; {hint}" if hint else "")) from None
        except HTTPError as err:
            raise TargetError(f"Kubernetes API: {what}: cannot reach the API server ({err})") from None


def connect(kubeconfig: Path | None, context: str | None) -> Cluster:
    """A client for the kubeconfig (default: $KUBECONFIG or ~/.kube/config) and its context."""
    from kubernetes import config

    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig) if kubeconfig else None, context=context,
                                            persist_config=False)
    except (config.ConfigException, OSError, TypeError) as err:
        raise UsageError(f"--kubeconfig/--context: {err}; point --kubeconfig at a kubeconfig with a current context "
                         "(or pass --context)") from None
    return Cluster(api, context)
