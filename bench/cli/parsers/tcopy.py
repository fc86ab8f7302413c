"""``bench tcopy``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DESCRIPTION = """\
Measure T_copy: how long a new copy of the model takes to serve on an instance that is already
running (framework import, weights, warm-up; no instance provisioning, no image pull), and the
copy's memory footprint, which is what copies are packed into an instance by.

Local (--url of a running container, the first copy): starts a second server process of the same
model on a free port with --serve-cmd (default `python -m container serve`, --host/--port
appended unless the command contains {port}), --starts times, one after the other, while
--load-concurrency requests keep the first copy busy. Each start is timed from the spawn to the
first GET /ping 200 (polled every 20 ms), with the container's framework_init and weights_ready
stage markers; the footprint is what the new copy's /ping reports (peak RSS of the server and its
worker processes, accelerator memory on CUDA). The second process must report the same model as
the first (same /ping identity), else exit 2.

SageMaker (--inference-component NAME): raises the component's copy count by one
(UpdateInferenceComponentRuntimeConfig), polls DescribeInferenceComponent every --poll-s until
the component is InService with that many current copies, then puts the count back and waits
for it before the next start. T_copy there is the request to InService (a bound: up to one poll
late), on an instance that already runs, with no stage markers. SageMaker does not report a
copy's memory, so the footprint comes from a copy artifact measured on the same image with
--footprint-from FILE (named in the provenance). Copy scaling on the component must be
suspended (or absent) for the run, else exit 2: it would undo the added copy.

t_copy_s, the figure plans use, is the slowest start (--statistic max, default) or the
nearest-rank p95 (equal to the slowest below 20 starts).

  python -m bench tcopy --url http://127.0.0.1:8080 --starts 5
  python -m bench tcopy --url http://127.0.0.1:8080 --serve-cmd "python -m container serve --port {port}" --json
  python -m bench tcopy --inference-component prod-kokoro-82m-ic --footprint-from artifacts/copy-....json --starts 3

On SageMaker the copy count is put back on every way out (an AWS error that outlasts the
retries, the component going Failed, Ctrl-C, SIGTERM), and stderr says so, also with --json.
If AWS refuses that too, the error names the exact call to run:
aws sagemaker update-inference-component-runtime-config --inference-component-name NAME
--desired-runtime-config CopyCount=N --region REGION.

Writes copy-<model>-<slug>.json into --out. Exit 0 written, 1 a copy did not become ready
(nothing written), 2 bad input or an AWS error, 130 interrupted (the copy process is stopped,
or the copy count put back, either way).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target (one of)")
    g.add_argument("--url", metavar="URL", help="the running first copy, e.g. http://127.0.0.1:8080")
    g.add_argument("--inference-component", metavar="NAME", help="SageMaker inference component whose copy count is raised")
    p.add_argument("--footprint-from", type=Path, metavar="FILE",
                   help="SageMaker: copy artifact (bench tcopy --url on the same image) whose footprint this one records")
    p.add_argument("--poll-s", type=float, default=5.0, metavar="S", help="SageMaker polling interval (default 5)")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
    p.add_argument("--serve-cmd", default=f"{sys.executable} -m container serve", metavar="CMD",
                   help="command starting a copy (default: python -m container serve; {port} or --host/--port appended)")
    p.add_argument("--starts", type=int, default=5, metavar="N", help="copies started one after the other (default 5)")
    p.add_argument("--load-concurrency", type=int, default=1, metavar="N",
                   help="closed-loop requests on the first copy while the copies start (default 1; 0 = idle)")
    p.add_argument("--statistic", choices=["max", "p95"], default="max", help="which statistic is t_copy_s (default max)")
    p.add_argument("--timeout-s", type=float, default=300.0, metavar="S", help="give up on one start after (default 300)")
    p.add_argument("--model", default="kokoro-82m", metavar="NAME", help="model name in the artifact (default kokoro-82m)")
    p.add_argument("--instance-type", metavar="TYPE", help="override the fingerprint's instance type")
    p.add_argument("--image-digest", metavar="sha256:...", help="override the fingerprint's image digest")
    p.add_argument("--out", type=Path, default=Path("artifacts"), metavar="DIR", help="artifact directory (default artifacts/)")
    p.add_argument("--json", action="store_true", help="print the artifact as JSON (no progress bar)")
    p.set_defaults(plot=False)
