"""``speech-deploy render``: its description and flags (the command: :mod:`speech.commands.render`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speech.cli import stack_name

DESCRIPTION = """\
A stack's Kubernetes models as plain manifests, for kubectl, Argo CD, Flux or Helm users who do
not run Pulumi.

The objects are the ones the Pulumi program creates (speech.deploy.kubernetes.objects, one spec for
both): per model one file <stack>-<model>.yaml with its objects in apply order (the provenance
ConfigMap, Deployment, Service, PodDisruptionBudget and, when a measured, feasible plan exists, the
HorizontalPodAutoscaler or KEDA ScaledObject). Everything is rendered and checked before the first
file is written, and each file is written atomically: a refused stack leaves the output directory as
it was. Apply with kubectl apply -f DIR (the namespace must exist).
"""
EPILOG = ("exit 0 written, 2 bad input (nothing written), 130 interrupted. "
          "example: python -m speech render --stack-dir examples --stack k8s-gpu --out out/k8s-gpu && "
          "kubectl apply -f out/k8s-gpu (docs/kubernetes.md)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, type=stack_name, metavar="NAME",
                        help="stack name, reads Pulumi.NAME.yaml (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    parser.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                        help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory the manifests are written to (created; a model's file is replaced whole)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON (errors too)")
