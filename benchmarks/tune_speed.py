"""How long the tuner takes for a day, against the code before the speed-up, in the same run.

    .venv/bin/python benchmarks/tune_speed.py [--traces diurnal,two-peak] [--base REV] [--jobs 2]

Each trace is tuned as benchmarks/plan_cost.py tunes it (speech.sim.tune.Tuner on seeds 1..5 with
the forecast history and the crowd check, two passes), then the seed's and the winner's
cost_vs_floor read as ``bench tune``'s promise reads them: three runs, each in its own process,

* ``base``: the tree of ``--base`` (``git archive``, default :data:`BASE`: the commit before the
  speed-up) with ``--jobs 1``: the baseline;
* ``now``: this tree, ``--jobs 1``;
* ``now, --jobs N``: this tree with a process pool of N workers (``bench tune --jobs``).

It prints one row per trace and run: CPU seconds (the process's and its workers'), wall seconds,
simulated days, and whether the result is the baseline's (the winner's knobs, every simulated
day's summary, the floors, the share bound and the crowd check, compared as JSON). CPU seconds are
the measure on a shared machine (the wall time moves with the load); the load average is printed.
Exit 1 when a result differs from the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "cb71c71"
"""The commit before the tuner's speed-up (issue 45's "tune a day in under 2 minutes on 2 cores")."""
TREE_PATHS = ("speech", "bench", "benchmarks", "artifacts", "data")


def _result(tu, seed, best) -> dict:
    """What the run found, as JSON: compared between the runs, never timed."""
    from dataclasses import asdict

    def cand(c) -> dict:
        return {"knobs": asdict(c.knobs), "days": [asdict(d) for d in c.days], "floor_hours": list(c.floor_hours),
                "bound": asdict(c.share_bound), "x_floor": c.x_floor}

    check = tu.crowd_check
    return {"best": cand(best), "seed": cand(seed), "evaluations": tu.evaluations, "skipped": tu.skipped,
            "crowd_check": None if check is None else {
                "crowds": check.crowds, "winner": cand(check.winner),
                "tried": [[label, None if c is None else cand(c)] for label, c in check.tried]}}


def worker(trace: str, jobs: int) -> dict:
    """One tune in this process, with the tree first on sys.path (the caller set it)."""
    import numpy as np
    import plan_cost as pc  # the tree's own benchmarks/plan_cost.py

    from bench.cli.parallel import process_map
    from speech.sim.tune import Tuner

    q, t, model = pc.reference_model()
    cpu0, wall0 = time.process_time(), time.monotonic()
    spec = pc.TRACES[trace]
    train = [(i, pc.day(spec, 1 + i)) for i in range(5)]
    rate = np.mean(np.stack([a for _, a in train]), axis=0)
    with process_map(jobs) as (pmap, width):
        tu = Tuner(q, t, pc.seed_inputs(train[0][1]), model, pc.SLO_SHARE, schedule_rate=rate, map_fn=pmap, width=width,
                   forecast_history=pc.forecast_history(train))
        seed, best = tu.search(train, passes=2)
        if hasattr(tu, "ensure_floors"):  # the promise's floors, side by side while the pool runs
            tu.ensure_floors(seed, best)
        x_floors = seed.x_floor, best.x_floor  # what bench tune's promise reads
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu0 + children.ru_utime + children.ru_stime
    return {"cpu_s": cpu, "wall_s": time.monotonic() - wall0, "simulated": tu.simulated, "x_floors": x_floors,
            "result": _result(tu, seed, best)}


def _run(tree: Path, trace: str, jobs: int) -> dict:
    """:func:`worker` in a fresh process on ``tree``."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--tree", str(tree), "--traces", trace,
           "--jobs", str(jobs), "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=tree, env=env)
    got = json.loads(out.read_text())
    out.unlink()
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="diurnal,two-peak", help="plan_cost.py's trace names, comma-separated")
    ap.add_argument("--base", default=BASE, help=f"the baseline's git revision (default {BASE})")
    ap.add_argument("--jobs", type=int, default=2, help="workers of the pooled run (default 2)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path[:0] = [str(args.tree), str(args.tree / "benchmarks")]
        args.out.write_text(json.dumps(worker(args.traces, args.jobs), default=repr))
        return 0

    traces = [t for t in args.traces.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="tune-speed-base-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, *TREE_PATHS], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        print(f"tune speed: base {args.base} against this tree ({ROOT}); load {os.getloadavg()[0]:.1f} at the start")
        print()
        print("| trace | run | CPU s | wall s | simulated days | result |")
        print("|---|---|---|---|---|---|")
        differs = False
        for trace in traces:
            runs = [("base", base, 1), ("now", ROOT, 1), (f"now, --jobs {args.jobs}", ROOT, args.jobs)]
            ref = None
            for label, tree, jobs in runs:
                got = _run(tree, trace, jobs)
                same = ref is None or (got["result"] == ref["result"] and got["x_floors"] == ref["x_floors"])
                differs |= not same
                ref = ref or got
                ratio = "" if got is ref else f" ({got['cpu_s'] / ref['cpu_s']:.2f}x)"
                print(f"| {trace} | {label} | {got['cpu_s']:.1f}{ratio} | {got['wall_s']:.1f} | {got['simulated']} | "
                      f"{'baseline' if got is ref else ('the same' if same else 'DIFFERS')} |", flush=True)
        print()
        print(f"load {os.getloadavg()[0]:.1f} at the end (2 cores shared: wall seconds are that load's)")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
