"""Where the suite's CPU goes: each test's CPU seconds, its own and its processes', by file and by test.

    .venv/bin/python benchmarks/suite_cpu.py                      # the whole suite, as make test runs it
    .venv/bin/python benchmarks/suite_cpu.py --top 20 -- tests/container

pytest's ``--durations`` gives wall time, which on a 2-core machine running two test processes is
mostly the other process's work or a wait; what a cut saves is CPU. This runs pytest (``-n JOBS
--dist loadfile``, the Makefile's way) with itself loaded as a plugin: when a test ends, the plugin
reads from /proc the CPU of the test process and of every process below it (servers, CLIs, Locust
workers, torch workers; those already reaped are in their parent's cutime/cstime) and writes the
difference since the previous test. A session server's CPU lands on the test that made it work; a
file's first test carries the process's start and collection. Reading /proc after every test costs
a few per cent of the run. Processes that outlive their parent (re-parented to init) are not counted.

Prints the files and the tests with the most CPU, and the total; exits with pytest's exit code.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HZ = os.sysconf("SC_CLK_TCK")
OUT_ENV = "SUITE_CPU_DIR"
_last = [0.0]
_last_wall = [0.0]


def _stat_fields(pid: str) -> list[str] | None:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and every live process below it, each with its reaped children
    (utime + stime + cutime + cstime, /proc/PID/stat fields 14-17)."""
    children: dict[int, list[list[str]]] = collections.defaultdict(list)
    for d in os.listdir("/proc"):
        if d.isdigit() and (f := _stat_fields(d)) is not None:
            children[int(f[1])].append([d, *f])
    own = _stat_fields(str(root))
    total = sum(int(x) for x in own[11:15]) / HZ if own else 0.0
    stack = [root]
    while stack:
        for row in children.get(stack.pop(), []):
            total += sum(int(x) for x in row[12:16]) / HZ
            stack.append(int(row[0]))
    return total


def record(nodeid: str) -> None:
    """One line for a test that just ended: CPU and wall seconds since the previous one, its id."""
    out = os.environ.get(OUT_ENV)
    if not out:
        return
    now, wall = tree_cpu_s(os.getpid()), time.monotonic()
    spent, _last[0] = now - _last[0], now
    waited, _last_wall[0] = (wall - _last_wall[0]) if _last_wall[0] else 0.0, wall
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(out) / f"cpu-{worker}.tsv", "a", encoding="utf-8") as fh:
        fh.write(f"{spent:.2f}\t{waited:.2f}\t{nodeid}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """(the plugin) runs in the process that runs the test. Not pytest_runtest_logfinish: under
    pytest-xdist the controller gets that hook too, for every worker's test, and its own process
    tree holds every worker, so each test was counted a second time with the whole machine's CPU."""
    yield
    record(item.nodeid)


def read_rows(out: Path) -> list[tuple[float, float, str]]:
    rows = []
    for path in sorted(out.glob("cpu-*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            spent, waited, nodeid = line.split("\t", 2)
            rows.append((float(spent), float(waited), nodeid))
    return rows


def table(rows: list[tuple[float, float, str]], top: int) -> str:
    """By file and by test: CPU seconds, and wall seconds (the test process's own time since its
    previous test ended; with one process a core, what wall has beyond CPU is mostly waiting)."""
    cpu: dict[str, float] = collections.defaultdict(float)
    wall: dict[str, float] = collections.defaultdict(float)
    for spent, waited, nodeid in rows:
        cpu[nodeid.split("::")[0]] += spent
        wall[nodeid.split("::")[0]] += waited
    total = sum(cpu.values())
    lines = [f"CPU seconds by file (top {top} of {len(cpu)}; {total:.0f} s in {len(rows)} tests)", "",
             "| CPU s | share | wall s | file |", "|---:|---:|---:|---|"]
    lines += [f"| {s:.1f} | {100 * s / total:.1f}% | {wall[f]:.1f} | {f} |"
              for f, s in sorted(cpu.items(), key=lambda kv: -kv[1])[:top]]
    lines += ["", f"CPU seconds by test (top {top})", "", "| CPU s | wall s | test |", "|---:|---:|---|"]
    lines += [f"| {s:.1f} | {w:.1f} | {n} |" for s, w, n in sorted(rows, reverse=True)[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="auto", help="pytest-xdist processes (default auto: one a core)")
    ap.add_argument("--top", type=int, default=30, help="rows of each table (default 30)")
    args, extra = ap.parse_known_args(argv)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    if args.top < 1:
        ap.error("--top must be at least 1")
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as out:
        env = {**os.environ, OUT_ENV: out, "PYTHONPATH": os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as make test runs it (the Makefile unexports it)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_cpu",
               "-n", args.jobs, "--dist", "loadfile", *extra]
        rc = subprocess.run(cmd, env=env, cwd=here.parent).returncode
        rows = read_rows(Path(out))
    if rows:
        print()
        print(table(rows, args.top))
    return rc


if __name__ == "__main__":
    sys.exit(main())
