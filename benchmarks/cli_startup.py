"""How long each entry point takes to answer --version/--help (and a command's own --help), against
the bare interpreter start measured in the same run. Prints a markdown table of medians.

    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py            # 7 runs per row
    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py --runs 15 --json

The rows run the installed console scripts when they are beside the interpreter (pip install -e .),
else ``python -m``. Exit 0 when every command exited 0, 1 otherwise, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

ROWS = [
    ("baseline: python -c pass", [sys.executable, "-c", "pass"]),
    ("speech-bench --version", ["speech-bench", "--version"]),
    ("speech-bench --help", ["speech-bench", "--help"]),
    ("speech-bench plan --help", ["speech-bench", "plan", "--help"]),
    ("speech-bench qmax --help", ["speech-bench", "qmax", "--help"]),
    ("speech-deploy --help", ["speech-deploy", "--help"]),
    ("speech-deploy preview --help", ["speech-deploy", "preview", "--help"]),
    ("speech-policy --help", ["speech-policy", "--help"]),
    ("speech-policy check --help", ["speech-policy", "check", "--help"]),
    ("speech-container --help", ["speech-container", "--help"]),
]
MODULE = {"speech-bench": "bench", "speech-deploy": "speech", "speech-policy": "policy", "speech-container": "container"}


def argv_of(cmd: list[str]) -> list[str]:
    if cmd[0] in MODULE:
        script = BIN / cmd[0]
        return [str(script), *cmd[1:]] if script.exists() else [sys.executable, "-m", MODULE[cmd[0]], *cmd[1:]]
    return cmd


def time_once(argv: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=120)
    return time.perf_counter() - t0, r.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7, help="runs per row (median reported; default 7)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if not 1 <= args.runs <= 100:
        print("--runs: 1 <= N <= 100", file=sys.stderr)
        return 2
    rows, ok = [], True
    base = None
    for name, cmd in ROWS:
        full = argv_of(cmd)
        times, codes = zip(*(time_once(full) for _ in range(args.runs)), strict=True)
        med = statistics.median(times)
        base = med if base is None else base
        ok &= all(c == 0 for c in codes)
        rows.append({"command": name, "median_s": round(med, 3), "max_s": round(max(times), 3),
                     "over_baseline_s": round(med - base, 3), "exit": sorted(set(codes))})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("| command | median s | max s | over `python -c pass` s | exit |\n|---|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['command']} | {r['median_s']:.3f} | {r['max_s']:.3f} | {r['over_baseline_s']:+.3f} | {r['exit']} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
