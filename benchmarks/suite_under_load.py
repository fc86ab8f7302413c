"""The suite, several runs in a row, on a machine kept busy beside it: does any verdict depend on load?

    .venv/bin/python benchmarks/suite_under_load.py --runs 5 --load 2
    .venv/bin/python benchmarks/suite_under_load.py --runs 5 --load 2 -- -m "not slow"   # the fast tier

``--load N`` starts N processes that spin on the CPU for the whole measurement (on this project's
2-core machine, 2 of them double the run queue: every test then gets about half the CPU it gets on an
idle machine); they stop when the runs end, on Ctrl-C, and when this script is killed. Each run is
``python -m pytest -q -n JOBS --dist loadfile`` plus whatever follows ``--``. The table gives each run's
exit code, wall time and pytest's closing line; the exit code is 0 only when every run passed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CLOSING = re.compile(r"^=*\s*(\d+ (passed|failed).*?)\s*=*$")


def spin(stop_at: float) -> None:
    """Busy work until ``stop_at`` (monotonic seconds), in short slices so a terminate lands at once."""
    x = 0
    while time.monotonic() < stop_at:
        for _ in range(100_000):
            x += 1


def closing_line(output: str) -> str:
    """pytest's summary line ("N passed, M failed ... in S s"), or what the run printed last."""
    for line in reversed(output.splitlines()):
        m = CLOSING.match(line.strip())
        if m:
            return m.group(1)
    tail = output.strip().splitlines()[-1:] or ["(no output)"]
    return tail[0][:120]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="runs in a row (default 5)")
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the suite (default 2)")
    ap.add_argument("--jobs", default="auto", help="pytest-xdist processes (default auto: one a core)")
    ap.add_argument("--keep-failed", type=Path, metavar="DIR", help="write each failed run's whole output to DIR/run-N.log")
    ap.add_argument("--max-hours", type=float, default=6.0, help="the busy processes stop after this at the latest")
    args, extra = ap.parse_known_args(argv)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    if args.runs < 1 or args.load < 0:
        ap.error("--runs must be at least 1 and --load at least 0")
    stop_at = time.monotonic() + args.max_hours * 3600
    burners = [mp.Process(target=spin, args=(stop_at,), daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", args.jobs, "--dist", "loadfile", *extra]
    rows = []
    try:
        for run in range(1, args.runs + 1):
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            took = time.monotonic() - t0
            rows.append((run, proc.returncode, took, closing_line(proc.stdout + proc.stderr)))
            print(f"run {run}: exit {proc.returncode} in {took:.0f} s: {rows[-1][3]}", flush=True)
            if proc.returncode != 0:
                failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED") or ln.startswith("ERROR")]
                print("\n".join(failed[:20]), flush=True)
                if args.keep_failed:
                    # The whole output of a failed run: the tracebacks say whether load or behaviour failed it.
                    args.keep_failed.mkdir(parents=True, exist_ok=True)
                    log = args.keep_failed / f"run-{run}.log"
                    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
                    print(f"full output: {log}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for b in burners:
            b.terminate()
        for b in burners:
            b.join(5)
    print(f"\n{args.load} busy processes beside `{' '.join(cmd[2:])}` on {os.cpu_count()} cores\n")
    print("| run | exit | wall s | pytest |")
    print("|---|---|---|---|")
    for run, rc, took, line in rows:
        print(f"| {run} | {rc} | {took:.0f} | {line} |")
    passed = sum(rc == 0 for _, rc, _, _ in rows)
    print(f"\n{passed} of {len(rows)} runs passed")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
