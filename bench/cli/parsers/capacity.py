"""``bench capacity``: its description and flags, apart from the command (nothing heavy imported, so ``--help`` answers at once)."""

from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLE_FLEET = """\
{"kind": "fleet", "schema_version": 1,
 "instances": [{"name": "i-1", "instance_type": "ml.g5.12xlarge", "accelerator_memory_mib": 98304,
                "used_accelerator_memory_mib": 73728, "copies": {"kokoro-82m": 3}}],
 "models": {"kokoro-82m": {"copy_memory_mib": 24576, "concurrency_per_copy": 37.5, "t_copy_s": 48.1,
            "t_total_s": 320.2, "new_instance_type": "ml.g5.12xlarge",
            "new_instance_accelerator_memory_mib": 98304}}}"""


EXAMPLE_CPU_FLEET = """\
{"kind": "fleet", "schema_version": 1,
 "instances": [{"name": "i-1", "instance_type": "ml.c7i.4xlarge", "cpu_cores": 16, "used_cpu_cores": 12,
                "host_memory_mib": 32768, "used_host_memory_mib": 7590, "copies": {"kokoro-82m": 3}}],
 "models": {"kokoro-82m": {"copy_cpu_cores": 4, "copy_host_memory_mib": 2530, "concurrency_per_copy": 6,
            "t_copy_s": 20.5, "t_total_s": 290, "new_instance_type": "ml.c7i.4xlarge",
            "new_instance_cpu_cores": 16, "new_instance_host_memory_mib": 32768}}}"""


DESCRIPTION = """\
Evaluate an increase in concurrency for one model against a fleet: how many copies fit into the
spare room of running instances, where they go, how many new instances the rest needs, and when
each part serves (T_copy for copies on running instances, T_total for new instances). A copy fits
an instance only if every resource it requests fits there: CPU cores, host memory and accelerator
memory (an inference component's NumberOfCpuCoresRequired, MinMemoryRequiredInMb and
NumberOfAcceleratorDevicesRequired). Placement is best-fit decreasing: each copy goes where it
leaves the fewest copies' worth of room on the resource it makes scarcest. Says so when free room
is split so that no copy fits although it would in total (fragmentation). No AWS calls.

  python -m bench capacity --fleet fleet.json --model kokoro-82m --delta-concurrency 120
  python -m bench capacity --fleet fleet.json --model kokoro-82m --delta-concurrency 120 --json

The fleet file (JSON, kind "fleet") is written by hand or read from a deployed endpoint
(read-only Describe*/List* calls; SageMaker does not say which instance holds which copy, so the
placement is inferred):

  python -m bench capacity --from-endpoint prod-kokoro --write-fleet fleet.json \\
      --t-copy-s 48 --t-total-s 320 [--concurrency-per-copy 37.5] [--region eu-west-1]
  python -m bench capacity --from-endpoint prod-kokoro --write-fleet fleet.json \\
      --copy-plan artifacts/copy-plan-kokoro-82m.json

Exit 0 all placed (or warn: instances needed, fragmentation), 1 copies that fit no instance at
all, 2 bad input (nothing written).

A fleet file by hand (one g5.12xlarge with three of its four GPUs taken; a copy takes a whole
device on SageMaker, so copy_memory_mib is one device's memory):

""" + EXAMPLE_FLEET + """

CPU-only copies (one c7i.4xlarge, 12 of its 16 vCPUs requested; instances name the resources
they have, models what one copy requests; leave out what a copy does not request):

""" + EXAMPLE_CPU_FLEET


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fleet", type=Path, metavar="FILE", help="fleet file (JSON) to evaluate against")
    p.add_argument("--model", metavar="NAME", help="model (fleet file key; an inference component's name when read "
                   "from an endpoint) whose concurrency grows")
    p.add_argument("--delta-concurrency", type=float, metavar="N", help="requests in flight to add (> 0)")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON (for CI)")
    g = p.add_argument_group("reading a deployed endpoint")
    g.add_argument("--from-endpoint", metavar="NAME", help="read the fleet from this inference-component endpoint")
    g.add_argument("--write-fleet", type=Path, metavar="FILE", help="write the fleet read with --from-endpoint here")
    g.add_argument("--t-copy-s", type=float, metavar="S", help="planning T_copy, seconds (the copy plan's t_copy.planning_s)")
    g.add_argument("--t-total-s", type=float, metavar="S", help="planning T_total, seconds (the plan's t_total.planning_s)")
    g.add_argument("--concurrency-per-copy", type=float, metavar="N",
                   help="requests in flight per copy at the scale-out target (default: each component's copy-scaling target)")
    g.add_argument("--copy-plan", type=Path, metavar="FILE",
                   help="copy plan (bench copies --ttotal ...): supplies --t-copy-s, --t-total-s and --concurrency-per-copy "
                   "(flags given explicitly win)")
    g.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
