"""How long one capacity evaluation takes when copies are placed by every resource they request
(CPU cores, host memory, accelerator memory) against the same fleet placed by accelerator memory
alone (the baseline, measured in the same run).

    .venv/bin/python benchmarks/capacity_placement.py [--runs 30] [--old-commit c0cc6b3]

The simulator's hot-load policy (speech.sim.hotload) calls evaluate_capacity at every scale-out,
so its cost per call bounds how long a day's simulation spends placing. Each fleet has N
instances, a quarter of each already taken, and a delta that needs about 2N copies (so both
placement and new instances are exercised). Columns: median microseconds per evaluation of the
accelerator-only fleet file (as before CPU placement existed), of the three-resource fleet, and
their ratio. With ``--old-commit`` (needs git) the accelerator-only implementation of that
commit runs on the same accelerator-only fleet as well.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def old_module(commit: str) -> ModuleType | None:
    """speech/plan/capacity.py as it was at ``commit``, imported under another name; None without git."""
    try:
        src = subprocess.run(["git", "show", f"{commit}:speech/plan/capacity.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "capacity_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("capacity_old", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["capacity_old"] = mod
    spec.loader.exec_module(mod)
    return mod


def fleets(n: int, cap: Any) -> tuple[Any, Any]:
    """An accelerator-only fleet (g5.12xlarge, one device of four per copy) and a CPU fleet
    (c7i.4xlarge, 4 cores + 2530 MiB per copy), each with n instances a quarter taken."""
    acc = cap.FleetState(
        instances=[cap.FleetInstance(name=f"i{k}", instance_type="ml.g5.12xlarge", accelerator_memory_mib=98304,
                                     used_accelerator_memory_mib=24576) for k in range(n)],
        models={"k": cap.FleetModel(copy_memory_mib=24576, concurrency_per_copy=10, t_copy_s=40, t_total_s=320,
                                    new_instance_type="ml.g5.12xlarge", new_instance_accelerator_memory_mib=98304)},
    )
    if not hasattr(cap.FleetInstance, "free"):
        return acc, None
    cpu = cap.FleetState(
        instances=[cap.FleetInstance(name=f"i{k}", instance_type="ml.c7i.4xlarge", cpu_cores=16, used_cpu_cores=4,
                                     host_memory_mib=32768, used_host_memory_mib=2530) for k in range(n)],
        models={"k": cap.FleetModel(copy_cpu_cores=4, copy_host_memory_mib=2530, concurrency_per_copy=10, t_copy_s=20,
                                    t_total_s=290, new_instance_type="ml.c7i.4xlarge", new_instance_cpu_cores=16,
                                    new_instance_host_memory_mib=32768)},
    )
    return acc, cpu


def per_call_us(cap: Any, fleet: Any, delta: float, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cap.evaluate_capacity(fleet, "k", delta)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    from speech.plan import capacity, fleet

    # The current implementation, under the names one capacity.py held before the fleet file's
    # types and the placement rule moved out of it (what old_module() still finds at old commits).
    cap = SimpleNamespace(FleetState=fleet.FleetState, FleetInstance=fleet.FleetInstance, FleetModel=fleet.FleetModel,
                          evaluate_capacity=capacity.evaluate_capacity)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--old-commit", default=None, help="also time the accelerator-only implementation of this commit")
    args = ap.parse_args(argv)
    old = old_module(args.old_commit) if args.old_commit else None
    if args.old_commit and old is None:
        print(f"--old-commit {args.old_commit}: git show failed; timing the current implementation only")
    rows = []
    for n in (4, 16, 64, 256):
        acc, cpu = fleets(n, cap)
        delta = 2 * n * 10.0
        row = [n, int(delta / 10), per_call_us(cap, acc, delta, args.runs), per_call_us(cap, cpu, delta, args.runs)]
        if old is not None:
            row.append(per_call_us(old, fleets(n, old)[0], delta, args.runs))
        rows.append(row)
    head = f"{'instances':>9} {'copies':>6} {'accel-only us':>13} {'3-resource us':>13} {'ratio':>6}"
    print(head + (f" {'old impl. us':>12}" if old is not None else ""))
    for r in rows:
        line = f"{r[0]:>9} {r[1]:>6} {r[2]:>13.0f} {r[3]:>13.0f} {r[3] / r[2]:>6.2f}"
        print(line + (f" {r[4]:>12.0f}" if old is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
