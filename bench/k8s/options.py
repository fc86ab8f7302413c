"""The flags every Kubernetes path of a bench command shares (no client import: --help stays light)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_kubernetes_arguments(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_argument_group("Kubernetes (the official client; the kubeconfig's credentials)")
    g.add_argument("--kubernetes", metavar="NAMESPACE/DEPLOYMENT", help=what)
    g.add_argument("--autoscaler", dest="k8s_autoscaler", choices=("hpa", "keda", "none"), default="hpa",
                   help="what scales the Deployment: an autoscaling/v2 HPA (default), a KEDA ScaledObject, or nothing")
    g.add_argument("--autoscaler-name", metavar="NAME",
                   help="the HPA's or ScaledObject's name (default: the Deployment's, as the stack renders them)")
    g.add_argument("--kubeconfig", type=Path, metavar="FILE", help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")


def k8s_target(args: argparse.Namespace):
    """The target the flags name, or None without --kubernetes."""
    from bench.k8s.names import parse_target

    spec = getattr(args, "kubernetes", None)
    if not spec:
        return None
    return parse_target(spec, args.k8s_autoscaler, args.autoscaler_name)
