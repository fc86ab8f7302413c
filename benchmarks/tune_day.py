"""How long ``bench tune`` takes for a day at 5000 rps peak (target: under 2 minutes on 2 cores).

    .venv/bin/python benchmarks/tune_day.py [--peak-rps 5000]

Runs the whole command (its default --draws 5, two held-out days, two perturbed days) in process and
prints a table: wall time, simulated days, seconds per simulated day, against the baseline of the
same run: an exhaustive grid over the same candidates (the product of every knob's candidate
count x the draws), estimated at the measured seconds per simulated day.
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TARGET_S = 120.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-rps", type=float, default=5000.0)
    args = ap.parse_args()

    from bench.cli.main import main as bench
    from speech.files import load_artifact
    from speech.sim.artifact import TuneArtifact

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        buf = io.StringIO()
        t0, cpu0 = time.perf_counter(), time.process_time()
        with redirect_stdout(buf):
            rc = bench(["tune", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--slo-ms", "3000", "--trace",
                        f"diurnal:peak={args.peak_rps:g}", "--out", out, "--no-progress"])
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        art = load_artifact(next(Path(out).glob("tune-*.json")), TuneArtifact)
    per_day = wall / art.evaluations
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
    print(f"bench tune --trace diurnal:peak={args.peak_rps:g} (exit {rc}); 2 cores, load "
          f"{load0:.1f} before / {os.getloadavg()[0]:.1f} after\n")
    print("| search | simulated days | wall s | s per day |")
    print("|---|---:|---:|---:|")
    print(f"| coordinate descent (bench tune, incl. checks) | {art.evaluations} | {wall:.0f} | {per_day:.2f} |")
    print(f"| baseline: exhaustive grid, same candidates, {draws} draws (estimated) | {grid * draws} | {grid_s:,.0f} | {per_day:.2f} |")
    print(f"\nCPU {cpu:.0f} s in this process (one core: about the wall on an idle machine, whatever the load now)")
    print(f"\ntuned x floor {art.promise.cost_vs_floor:.2f} (seed {art.seed.cost_vs_floor:.2f}); wall {wall:.0f} s vs target "
          f"< {TARGET_S:g} s: {'pass' if wall < TARGET_S else 'FAIL'}")
    return 0 if wall < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
