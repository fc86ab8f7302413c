"""How long ``bench tune`` takes for a day at 5000 rps peak (target: under 2 minutes on 2 cores).

    .venv/bin/python benchmarks/tune_day.py [--peak-rps 5000]

Runs the whole command (its default --draws 5, two held-out days, two perturbed days) in process,
with --jobs 1 and with the cores (--jobs), and prints a table: wall time, simulated days read,
seconds per day, against the baseline of the same run: an exhaustive grid over the same candidates
(the product of every knob's candidate count x the draws), estimated at the measured seconds per
simulated day of --jobs 1. The two runs' artifacts must be identical but for their creation time.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TARGET_S = 120.0


def _tune(peak_rps: float, jobs: int) -> tuple[int, float, float, dict, Any]:
    """bench tune in this process: (exit, wall s, this process's CPU s, the tune artifact's JSON and
    the artifact); its output directory is removed."""
    import json
    import shutil

    from bench.cli.main import main as bench
    from speech.files import load_artifact
    from speech.sim.artifact import TuneArtifact

    out = Path(tempfile.mkdtemp(prefix=f"tune-day-j{jobs}-"))
    buf = io.StringIO()
    t0, cpu0 = time.perf_counter(), time.process_time()
    with redirect_stdout(buf):
        rc = bench(["tune", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--slo-ms", "3000", "--trace",
                    f"diurnal:peak={peak_rps:g}", "--out", str(out), "--no-progress", "--jobs", str(jobs)])
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    file = next(out.glob("tune-*.json"))
    found = json.loads(file.read_text()), load_artifact(file, TuneArtifact)
    shutil.rmtree(out)
    return rc, wall, cpu, *found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-rps", type=float, default=5000.0)
    ap.add_argument("--jobs", type=int, default=None, help="the run judged against the target (default: the cores); "
                    "the baseline row is always --jobs 1")
    args = ap.parse_args()

    from bench.cli.parallel import default_jobs
    from speech.files import load_artifact

    jobs = args.jobs or default_jobs()
    load0 = os.getloadavg()[0]
    runs = {j: _tune(args.peak_rps, j) for j in dict.fromkeys((1, jobs))}
    rc, wall, cpu, art_json, art = runs[jobs]
    same = all({k: v for k, v in r[3].items() if k != "created_at"} == {k: v for k, v in art_json.items() if k != "created_at"}
               for r in runs.values())
    per_day = runs[1][1] / art.evaluations
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs
    from speech.sim.instance import build_instance
    from speech.sim.tune import Tuner

    q, t = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    tuner = Tuner(q, t, PlanInputs(slo_ms=3000, peak_rps=args.peak_rps, trough_rps=args.peak_rps / 20),
                  build_instance(q, t, slo_ms=3000), 0.995)
    grid = math.prod(len(v) for v in tuner.choices(tuner.seed_knobs()).values())
    draws = art.promise.draws or 1
    grid_s = grid * draws * per_day
    print(f"bench tune --trace diurnal:peak={args.peak_rps:g} (exit {rc}); {os.cpu_count()} cores, load "
          f"{load0:.1f} before / {os.getloadavg()[0]:.1f} after\n")
    print("| search | simulated days read | wall s | s per day read |")
    print("|---|---:|---:|---:|")
    for j, (_, w, _, _, _) in runs.items():
        print(f"| coordinate descent (bench tune --jobs {j}, incl. checks) | {art.evaluations} | {w:.0f} | "
              f"{w / art.evaluations:.2f} |")
    print(f"| baseline: exhaustive grid, same candidates, {draws} draws (estimated at --jobs 1) | {grid * draws} | "
          f"{grid_s:,.0f} | {per_day:.2f} |")
    print(f"\n--jobs {jobs}: {wall / runs[1][1]:.2f}x the --jobs 1 wall; CPU {cpu:.0f} s in this process (the rest in "
          f"its workers); artifacts identical to --jobs 1 but for the time: {'yes' if same else 'NO'}")
    ok = wall < TARGET_S and same
    print(f"\ntuned x floor {art.promise.cost_vs_floor:.2f} (seed {art.seed.cost_vs_floor:.2f}); wall {wall:.0f} s at "
          f"--jobs {jobs} vs target < {TARGET_S:g} s: {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
