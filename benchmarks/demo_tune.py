"""What the tuned plan adds to ``make demo`` (target: at most 30 s on 2 cores).

    .venv/bin/python benchmarks/demo_tune.py [--from out/demo] [--repeat 3]

Runs the demo's own step functions (bench.operations.demo, driven as the command drives them) on
measured artifacts copied into a temporary directory: the baseline is the simulate step as the demo ran it before the tune step (the plan
against every policy, with the PNGs), measured in the same run as the tune step and the simulate
step with the tuned plan beside the seed. ``--from DIR``: the newest qmax, ttotal and plan
artifacts a demo left there (the local container's measurements); without it, or when DIR has
none, the reference ml.g5.xlarge artifacts with the demo's inputs at their ladder's 3000 ms SLO.
Prints the median of --repeat runs per step and the time added.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REF_QMAX = ROOT / "artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
REF_TTOTAL = ROOT / "artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
TARGET_S = 30.0


def _sources(src: Path | None) -> tuple[Path, Path, Path | None, list[str], str]:
    """(qmax, ttotal, plan or None, demo flags, label)."""
    from bench.errors import BenchError
    from bench.operations.demo import newest_artifact, seed_plan_path

    if src is not None:
        try:
            return (newest_artifact(src, "qmax-*.json"), newest_artifact(src, "ttotal-*.json"), seed_plan_path(src), [],
                    f"the demo's artifacts in {src}")
        except BenchError:
            pass
    return REF_QMAX, REF_TTOTAL, None, ["--slo-ms", "3000"], "the reference ml.g5.xlarge artifacts"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", type=Path, default=ROOT / "out/demo")
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()

    from bench.cli.main import main as bench
    from bench.cli.parsers.demo import add_arguments
    from bench.commands.demo import drive
    from bench.operations.demo import seed_plan_path, simulate_step, tune_step
    from speech.files import load_artifact
    from speech.schema.plan_artifacts import PlanArtifact

    qmax_src, ttotal_src, plan_src, flags, label = _sources(opts.src)
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {"simulate (before: the plan alone)": [], "tune": [],
                                     "simulate (seed + tuned plan)": []}
    evaluations = 0
    for _ in range(opts.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            qp, tp = Path(shutil.copy(qmax_src, out)), Path(shutil.copy(ttotal_src, out))
            p = argparse.ArgumentParser()
            add_arguments(p)
            args = p.parse_args(["--out", str(out), *flags])
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                if plan_src is not None:
                    shutil.copy(plan_src, out)
                else:
                    bench(["plan", "--qmax", str(qp), "--ttotal", str(tp), "--slo-ms", f"{args.slo_ms:g}",
                           "--peak-rps", f"{args.peak_rps:g}", "--trough-rps", f"{args.trough_rps:g}",
                           "--surge-ratio", f"{args.surge_ratio:g}", "--allow-config-mismatch", "--out", str(out)])
                plan_path = seed_plan_path(out)
                plan = load_artifact(plan_path, PlanArtifact)
                t0 = time.perf_counter()
                drive(simulate_step(args, out, qp, tp, plan_path, plan))
                t1 = time.perf_counter()
                tuned = drive(tune_step(args, out, qp, tp, plan))
                t2 = time.perf_counter()
                drive(simulate_step(args, out, qp, tp, plan_path, plan, tuned))
                t3 = time.perf_counter()
            evaluations = tuned.tune.evaluations if tuned is not None and tuned.tune is not None else 0
            for name, s in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                times[name].append(s)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["simulate (before: the plan alone)"]
    added = med["tune"] + med["simulate (seed + tuned plan)"] - base
    print(f"make demo's steps after plan on {label}; median of {opts.repeat}; 2 cores, load {load0:.1f} before / "
          f"{os.getloadavg()[0]:.1f} after; bench tune simulated {evaluations} hours\n")
    print("| step | wall s | vs baseline |")
    print("|---|---:|---:|")
    for k, v in med.items():
        print(f"| {k}{' (baseline)' if v is base else ''} | {v:.1f} | {v - base:+.1f} |")
    print(f"\nadded to the demo: tune + (simulate with both - simulate before) = {added:.1f} s vs target <= {TARGET_S:g} s: "
          f"{'pass' if added <= TARGET_S else 'FAIL'}")
    return 0 if added <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
