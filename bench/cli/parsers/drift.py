"""``bench drift``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.k8s.options import add_kubernetes_arguments

DESCRIPTION = """\
Compare what is deployed for each model of a stack (scalable target min/max and suspended
state, scaling policies, their alarms) with the stack config and the plan computed from the
stack's own measurements (the same build_plan the program and policy pack use). Read-only:
only Describe* calls.

Names frozen scaling (a killed qmax/ttotal: run `bench thaw`), orphan policies (not one of
<endpoint>-scale-out / -scale-in / -surge), missing policies and alarms, and every value that
differs from the plan. Endpoint names are <stack>-<model> unless --endpoint is given.

Also compares the deployed fingerprint (instance type of the endpoint configuration's AllTraffic
variant, image digest of its model's container) with the stack config's instance_type/image and
with the fingerprint of the measurements the plan rests on: a new image or instance type has new
latency, so measurements of another one are drift (unless the stack sets allow_config_mismatch,
as the program does).

  python -m bench drift --stack dev
  python -m bench drift --stack dev --endpoint dev-kokoro-82m --json

A stack's hosting: kubernetes models are read from the cluster (--kubeconfig, --context): each
Deployment <stack>-<model>'s HPA or ScaledObject against the plan as the stack renders it, and its
image digest against the stack's.

Kubernetes (--kubernetes NAMESPACE/DEPLOYMENT, no --stack): reads the live HorizontalPodAutoscaler
(or KEDA ScaledObject, --autoscaler keda) through the kubeconfig's credentials and compares it with
the plan rendered as an HPA (--plan FILE) or the HPA bench tune --platform kubernetes wrote (--hpa
FILE): min/max replicas, the in-flight metric and its AverageValue target, the behavior, cron
floors, and whether it is paused (a measurement not restored) or unable to scale.

  python -m bench drift --kubernetes speech/dev-kokoro-82m --plan plan-kokoro-82m.json
  python -m bench drift --kubernetes speech/dev-kokoro-82m --autoscaler keda --hpa out/tune/keda-kokoro-82m-diurnal.json

Exit 0 and `preflight-ok` when clean, 1 on any drift, 2 bad input (no such stack file/endpoint).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", metavar="NAME",
                   help="stack whose Pulumi.NAME.yaml describes the models (NAME, ORG/NAME or ORG/PROJECT/NAME)")
    p.add_argument("--stack-dir", type=Path, default=Path("."), metavar="DIR",
                   help="where Pulumi.NAME.yaml lives (default .); artifact paths in it are relative to it")
    p.add_argument("--endpoint", metavar="NAME", help="endpoint name when not <stack>-<model> (needs one model or --model)")
    p.add_argument("--model", metavar="NAME", help="check only this model")
    p.add_argument("--region", metavar="REGION",
                   help="AWS region (default: the stack's aws:region, else the environment's)")
    p.add_argument("--json", action="store_true", help="print {ok, endpoints: {name: [issues]}} as JSON")

    add_kubernetes_arguments(p, "check this Deployment's autoscaler on a cluster instead of a stack's endpoints")
    p.add_argument("--plan", type=Path, metavar="FILE", help="with --kubernetes: the plan whose HPA the cluster should run")
    p.add_argument("--hpa", type=Path, metavar="FILE", help="with --kubernetes: bench tune --platform kubernetes's tuned HPA")
    p.add_argument("--metric", default="speech_concurrent_requests", metavar="NAME",
                   help="with --kubernetes: the Pods metric the HPA scales on (default speech_concurrent_requests)")
