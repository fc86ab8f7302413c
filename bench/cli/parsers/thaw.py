"""``bench thaw``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.k8s.options import add_kubernetes_arguments

DESCRIPTION = """\
Restore the scalable target of an endpoint to exactly what qmax/ttotal/validate --live found before freezing it
(min, max and suspended state, and the desired instance count when qmax pinned one instance),
from the state file they wrote before changing anything
(~/.cache/speech-endpoints/freeze-<endpoint>.json, or --state-dir). Runs that end normally,
fail or are interrupted restore by themselves; thaw is for a run killed outright (SIGKILL).

Without a state file, --min N --max N registers those bounds and resumes all scaling.

  python -m bench thaw --endpoint prod-kokoro-82m
  python -m bench thaw --kubernetes speech/prod-kokoro-82m [--autoscaler keda]

Kubernetes (--kubernetes NAMESPACE/DEPLOYMENT): puts back the HPA's minReplicas/maxReplicas (or
the ScaledObject's paused-replicas annotation, absent or its old value) and the Deployment's
replicas from ~/.cache/speech-endpoints/k8s-<namespace>-<deployment>.json.

Exit 0 restored (or nothing to do), 2 bad input or no such endpoint.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint name")
    p.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="where the freeze state was saved (default ~/.cache/speech-endpoints)")
    p.add_argument("--min", dest="min_capacity", type=int, metavar="N", help="min capacity when no state file exists")
    p.add_argument("--max", dest="max_capacity", type=int, metavar="N", help="max capacity when no state file exists")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object: {"endpoint", "action": restored|registered|nothing, "message", ...}')

    add_kubernetes_arguments(p, "restore this Deployment's autoscaler instead of an endpoint's scaling")
