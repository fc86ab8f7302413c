"""How fast `python -m bench plan` answers, end to end, against the interpreter's own start-up.

Target: well under a second on the reference artifacts (it imports neither pulumi nor boto3).

    .venv/bin/python benchmarks/plan_latency.py [--runs 7]

Prints a table: median and worst wall time of the whole command, of a bare interpreter start
(the floor nobody can beat) and of the plan function alone (in-process, warm).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TARGET_S = 1.0


def wall(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        plan_cmd = [sys.executable, "-m", "bench", "plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL),
                    "--peak-rps", "5000", "--trough-rps", "10", "--out", out, "--json"]
        cli = wall(plan_cmd, args.runs)
    bare = wall([sys.executable, "-c", "pass"], args.runs)

    sys.path.insert(0, str(ROOT))
    from speech.files import load_artifact
    from speech.plan.realtime import build_plan
    from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
    from speech.schema.config import PlanInputs

    q, t = load_artifact(QMAX, QmaxArtifact), load_artifact(TTOTAL, TtotalArtifact)
    inputs = PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=5000, trough_rps=10)
    build_plan(q, t, inputs)
    fn = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        build_plan(q, t, inputs)
        fn.append(time.perf_counter() - t0)

    rows = [
        ("python -c pass (floor)", bare),
        ("python -m bench plan (reference)", cli),
        ("build_plan() in process, warm", fn),
    ]
    print("| what | median s | worst s |")
    print("|---|---:|---:|")
    for name, xs in rows:
        print(f"| {name} | {statistics.median(xs):.3f} | {max(xs):.3f} |")
    ok = statistics.median(cli) < TARGET_S
    print(f"\nbench plan median {statistics.median(cli):.3f} s vs target < {TARGET_S:.1f} s: {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
