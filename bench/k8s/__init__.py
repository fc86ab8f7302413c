"""Kubernetes API calls of the bench commands, through the official ``kubernetes`` client: the
cluster connection (:mod:`~bench.k8s.client`), the objects' names (:mod:`~bench.k8s.names`), the
autoscaler paused and always restored (:mod:`~bench.k8s.pause`), a scale-out's phases from the pod's
conditions and events (:mod:`~bench.k8s.phases`) and the live HPA/ScaledObject against the plan
(:mod:`~bench.k8s.drift`)."""
