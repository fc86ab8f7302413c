"""How long each entry point takes to answer --version/--help, every bench and speech-deploy command's own
--help, and one argument error per bench command and one of speech-deploy's (a value outside its range, a
missing required flag, a bad stack name), against the bare interpreter start measured in the same run. Prints a markdown table of medians
and whether each row is under the target (--target-s, default 0.5 s).

    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py            # 7 runs per row
    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py --runs 15 --json

The rows run the installed console scripts when they are beside the interpreter (pip install -e .),
else ``python -m``. Runs are interleaved (round r of every row before round r+1), so a burst of
load on a shared machine spreads over all rows instead of landing on one. Exit 0 when every row
exited with its expected code, 1 otherwise, 2 for bad arguments.
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

BENCH_COMMANDS = ("qmax", "ttotal", "tcopy", "copies", "capacity", "plan", "validate", "observe", "drift", "thaw",
                  "simulate", "tune", "replay", "demo")
# One argument error per command: refused by the parser (a bounded number or a missing required flag), exit 2.
BAD_ARGS = {
    "qmax": ["--url", "http://127.0.0.1:9", "--slo-ms", "0"],
    "ttotal": ["--url", "http://127.0.0.1:9", "--timeout-s", "-1"],
    "tcopy": ["--starts", "0"],
    "copies": ["--margin", "2"],
    "capacity": ["--delta-concurrency", "-1"],
    "plan": ["--peak-rps", "nan"],
    "validate": ["--slo-ms", "0"],
    "observe": ["--slo-ms", "0"],
    "drift": ["--slo-ms", "0"],
    "thaw": ["--min", "0"],
    "simulate": ["--trace", "diurnal:peak=5", "--slo-share", "1.5"],
    "tune": ["--train-days", "0"],
    "replay": ["--trace", "steady:rps=1", "--slo-ms", "0"],
    "demo": ["--slo-ms", "0"],
}

ROWS = [
    ("baseline: python -c pass", [sys.executable, "-c", "pass"], 0),
    ("speech-bench --version", ["speech-bench", "--version"], 0),
    ("speech-bench --help", ["speech-bench", "--help"], 0),
    *((f"speech-bench {c} --help", ["speech-bench", c, "--help"], 0) for c in BENCH_COMMANDS),
    *((f"speech-bench {c} {' '.join(BAD_ARGS[c])}", ["speech-bench", c, *BAD_ARGS[c]], 2) for c in BENCH_COMMANDS),
    ("speech-deploy --help", ["speech-deploy", "--help"], 0),
    *((f"speech-deploy {c} --help", ["speech-deploy", c, "--help"], 0) for c in ("preview", "rehearse", "render")),
    ("speech-deploy render --stack ../x --out o", ["speech-deploy", "render", "--stack", "../x", "--out", "o"], 2),
    ("speech-policy --help", ["speech-policy", "--help"], 0),
    ("speech-policy check --help", ["speech-policy", "check", "--help"], 0),
    ("speech-container --help", ["speech-container", "--help"], 0),
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
    p.add_argument("--target-s", type=float, default=0.5, help="the target for each row's median (default 0.5 s)")
    p.add_argument("--only", default="", help="only rows whose command contains this text (the baseline always runs)")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if not 1 <= args.runs <= 100:
        print("--runs: 1 <= N <= 100", file=sys.stderr)
        return 2
    rows_spec = [r for i, r in enumerate(ROWS) if i == 0 or args.only in r[0]]
    argvs = [argv_of(cmd) for _, cmd, _ in rows_spec]
    times: list[list[float]] = [[] for _ in rows_spec]
    codes: list[set[int]] = [set() for _ in rows_spec]
    for _ in range(args.runs):
        for i, full in enumerate(argvs):
            t, rc = time_once(full)
            times[i].append(t)
            codes[i].add(rc)
    rows, ok = [], True
    base = statistics.median(times[0])
    for (name, _, want), ts, cs in zip(rows_spec, times, codes, strict=True):
        med = statistics.median(ts)
        ok &= cs == {want}
        rows.append({"command": name, "median_s": round(med, 3), "max_s": round(max(ts), 3),
                     "over_baseline_s": round(med - base, 3), "exit": sorted(cs), "expected_exit": want,
                     "under_target": med < args.target_s})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"| command | median s | max s | over `python -c pass` s | exit | < {args.target_s:g} s |\n"
              "|---|---:|---:|---:|---|---|")
        for r in rows:
            print(f"| `{r['command']}` | {r['median_s']:.3f} | {r['max_s']:.3f} | {r['over_baseline_s']:+.3f} | "
                  f"{','.join(map(str, r['exit']))} | {'yes' if r['under_target'] else 'NO'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
