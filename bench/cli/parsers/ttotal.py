"""``bench ttotal``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import add_target_arguments
from bench.k8s.options import add_kubernetes_arguments

DESCRIPTION = """\
Measure T_total: from the moment more capacity is asked for until traffic is served at the
ladder's latency again, phase by phase.

SageMaker (--endpoint): freezes scaling, forces desired + 1 (UpdateEndpointWeightsAndCapacities),
then timestamps instance_logging (the new log stream's first event), the container's stage
markers from that stream, in_service (DescribeEndpoint CurrentInstanceCount) and
traffic_recovered (a probe load whose rolling p95 is back at the ladder's own p95 for the
per-instance concurrency); then puts the desired count back and restores scaling.

Local (--url of a running container): starts a second server process on a free port with
--serve-cmd (default `python -m container serve`, --host/--port appended unless the command
contains {port}) and times its stage markers, first /ping 200 and first served request;
provisioning phases are recorded as not applicable.

The artifact holds what was measured. The report and plot also show the planning T_total as
`bench plan` computes it (speech.plan.formulas.planning_t_total: + metric period x datapoints to alarm +
scale-out cooldown, with the plan's default reaction policy; a stack that sets its own reaction
policy plans with that one), and name the phase that dominates and what shortens it.
The qmax artifact must come from the same fingerprint and transport (else exit 2, nothing written).

  python -m bench ttotal --qmax artifacts/qmax-....json --endpoint dev-kokoro-82m
  python -m bench ttotal --qmax artifacts/qmax-....json --url http://127.0.0.1:8080
  python -m bench ttotal --qmax artifacts/qmax-....json --kubernetes speech/dev-kokoro-82m --instance-type ml.g5.xlarge

Kubernetes (--kubernetes NAMESPACE/DEPLOYMENT, the kubeconfig's credentials): pauses the
autoscaler at the current count + 1 (the desired_set moment), then timestamps from the API the new
pod's creation, the node's creation and readiness when the cluster autoscaler had to add one, the
PodScheduled condition, the kubelet's Pulled event, the container's start, the Ready condition and
the first audio byte of one request through the API server's pod proxy; then restores the
autoscaler and the count (also on Ctrl-C and SIGTERM).

Exit 0 written, 1 the scale-out did not complete in --timeout-s, 2 bad input, 130 interrupted.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:

    p.add_argument("--qmax", required=True, type=Path, metavar="FILE", help="qmax artifact of the same fingerprint")
    add_target_arguments(p)
    p.add_argument("--serve-cmd", default=f"{sys.executable} -m container serve", metavar="CMD",
                   help="local mode: command starting a second server (default: python -m container serve)")
    p.add_argument("--probe-concurrency", type=int, default=None, metavar="N",
                   help="closed-loop probe load during the scale-out (default min(10, Q_max); 0 = no probe)")
    p.add_argument("--recover-window-s", type=float, default=60.0, metavar="S",
                   help="probe p95 must stay at the ladder's level this long to count as recovered (default 60)")
    p.add_argument("--poll-s", type=float, default=5.0, metavar="S", help="AWS polling interval (default 5)")
    p.add_argument("--timeout-s", type=float, default=1800.0, metavar="S", help="give up after (default 1800)")
    p.add_argument("--instance-type", metavar="TYPE", help="override the fingerprint's instance type")
    p.add_argument("--image-digest", metavar="sha256:...", help="override the fingerprint's image digest")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="artifact directory (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the artifact as JSON")
    p.add_argument("--plot", action="store_true", help="also write a phase waterfall PNG")

    add_kubernetes_arguments(p, "time a scale-out of this Deployment on a cluster (its autoscaler paused and restored; no "
                                "--url/--endpoint): pod created, node added, scheduled, image pulled, started, ready, first "
                                "audio byte through the API server's pod proxy")
    p.add_argument("--pod-port", type=int, default=8080, metavar="PORT",
                   help="with --kubernetes: the container's port for the first request (default 8080)")
