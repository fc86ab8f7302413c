"""Runs the shipped locustfile on real Locust processes and reads back what they measured.

A master (``locust --master --headless``) and N local worker processes (``locust --worker``), or a
master bound to HOST:PORT for workers started on other machines. This process never imports
Locust (importing it monkey-patches the interpreter for gevent): it starts the processes,
watches them, and reads the rows file the master appends to (bench/load/locustfile.py). A local
worker that exits early is named with its exit code; the master names any worker that stopped
answering. Ctrl-C (KeyboardInterrupt here) stops the master the way Ctrl-C would, so workers send
their last rows and Locust writes its CSV and HTML, then ends whatever is left.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import TargetError, UsageError
from bench.load.schedule import Schedule

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
CONNECT_WAIT_S = 60
"""How long the master waits for the expected workers before giving up (exit 2, named)."""
STOP_GRACE_S = 10.0


def require_locust() -> None:
    if importlib.util.find_spec("locust") is None:
        raise UsageError("--engine locust needs Locust: pip install 'speech-endpoints[load]' (or use --engine local)")


def parse_bind(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--master-bind {value!r}: expected HOST:PORT, e.g. 0.0.0.0:5557")
    return host, int(port)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class EngineOptions:
    workers: int = 1
    """Local worker processes (ignored with ``master_bind``)."""
    master_bind: str | None = None
    expect_workers: int | None = None
    csv_prefix: Path | None = None
    html: Path | None = None
    quiet: bool = False


@dataclass
class LocustResult:
    rows: list[list] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    workers: int = 0
    dead: list[str] = field(default_factory=list)
    """One line per worker that did not finish its share, naming it and why."""
    interrupted: bool = False
    sent: int = 0
    worker_cpu_s: float = 0.0
    """CPU the workers spent on their shares (from the share's start to its last answer), summed."""


def worker_command(host: str, port: int) -> str:
    return f"locust -f {shlex.quote(str(LOCUSTFILE))} --worker --master-host {host} --master-port {port}"


def run_locust(target: dict, opts: EngineOptions, *, schedule: Schedule | None = None, closed: dict | None = None,
               timeout_s: float) -> LocustResult:
    """One Locust run: the open-loop ``schedule``, or one closed-loop level (``closed``: users,
    settle_s, measure_s, mix). ``target``: {"host": url} or {"sagemaker_endpoint", "aws_region",
    "inference_component"}. Returns the merged rows; raises TargetError when no worker could run."""
    require_locust()
    work = Path(tempfile.mkdtemp(prefix="speech-locust-"))
    rows_path = work / "rows.jsonl"
    if opts.master_bind:
        bind_host, port = parse_bind(opts.master_bind)
        n = opts.expect_workers or 1
    else:
        bind_host, port, n = "127.0.0.1", _free_port(), opts.workers
    users = closed["users"] if closed else n
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--master",
            "--master-bind-host", bind_host, "--master-bind-port", str(port), "--expect-workers", str(n),
            "--expect-workers-max-wait", str(CONNECT_WAIT_S), "-u", str(users), "-r", str(users), "--only-summary",
            "--exit-code-on-error", "0", "--loglevel", "WARNING", "--trace-rows", str(rows_path)]
    if "host" in target:
        argv += ["--host", target["host"]]
    else:
        argv += ["--sagemaker-endpoint", target["sagemaker_endpoint"]]
        if target.get("aws_region"):
            argv += ["--aws-region", target["aws_region"]]
        if target.get("inference_component"):
            argv += ["--inference-component", target["inference_component"]]
    if closed:
        argv += ["--trace-mode", "closed", "--level-settle-s", str(closed["settle_s"]), "--level-measure-s",
                 str(closed["measure_s"]), "--trace-mix", closed.get("mix", "mixed")]
    else:
        assert schedule is not None
        argv += ["--trace-schedule", str(schedule.save(work / "schedule.npz"))]
    if opts.csv_prefix:
        argv += ["--csv", str(opts.csv_prefix)]
    if opts.html:
        argv += ["--html", str(opts.html)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The package must import in every Locust process the same way it does here.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    procs: list[tuple[str, subprocess.Popen]] = []
    logs = []

    def spawn(name: str, args: list[str]) -> subprocess.Popen:
        log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        logs.append(log)
        # Own session: a terminal's Ctrl-C reaches only this process, which then stops the run in order.
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
        procs.append((name, p))
        return p

    result = LocustResult()
    early: list[str] = []
    t_start = time.monotonic()
    master = spawn("master", argv)
    workers: list[tuple[int, subprocess.Popen]] = []
    try:
        if opts.master_bind:
            if not opts.quiet:
                print(f"locust master on {bind_host}:{port}, waiting up to {CONNECT_WAIT_S} s for {n} worker(s); on each "
                      f"worker machine run:\n  {worker_command('<this-host>', port)}", file=sys.stderr)
        else:
            for i in range(n):
                workers.append((i, spawn(f"worker-{i}", [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
                                                         "--master-host", "127.0.0.1", "--master-port", str(port),
                                                         "--loglevel", "WARNING"])))
        deadline = t_start + CONNECT_WAIT_S + timeout_s
        noted: set[int] = set()
        while master.poll() is None:
            if time.monotonic() > deadline:
                raise TargetError(f"the Locust run did not end within {timeout_s + CONNECT_WAIT_S:.0f} s; logs in {work}")
            for i, w in workers:
                # Exit 0 is a worker the master told to quit; anything else died under the run.
                if i not in noted and w.poll() is not None and w.returncode != 0:
                    noted.add(i)
                    early.append(f"local worker process {i} (pid {w.pid}) exited with code {w.returncode} "
                                 f"{time.monotonic() - t_start:.1f} s after the start")
            time.sleep(0.1)
    except KeyboardInterrupt:
        result.interrupted = True
        with contextlib.suppress(ProcessLookupError):
            master.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            master.wait(STOP_GRACE_S)
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.terminate()
        for _, p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
    _read_rows(rows_path, result)
    # A local worker that exited early is usually also the one the master named; keep one line each.
    named_pids = {d.split("pid ", 1)[1].split(" ", 1)[0].rstrip(")") for d in result.dead if "pid " in d}
    result.dead += [e for e in early if e.split("pid ", 1)[1].split(")", 1)[0] not in named_pids]
    if result.interrupted:
        return result
    if not result.meta:
        tail = (work / "master.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise TargetError(f"the Locust master ended without starting the run (exit {master.returncode}): "
                          f"{' | '.join(tail) or 'no output'}; logs in {work}")
    if result.workers and len(result.dead) >= result.workers and not result.rows:
        raise TargetError(f"no Locust worker completed: {'; '.join(result.dead)}; logs in {work}")
    _cleanup(work)
    return result


def _read_rows(path: Path, result: LocustResult) -> None:
    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed master
        kind = rec.get("type")
        if kind == "meta":
            result.meta = rec
            result.workers = int(rec.get("workers", 0))
        elif kind == "rows":
            result.rows.extend(rec["rows"])
        elif kind == "done":
            result.sent += int(rec.get("sent", 0))
            result.worker_cpu_s += float(rec.get("cpu_s") or 0.0)
        elif kind == "dead":
            where = f"pid {rec['pid']} on {rec['host']}" if rec.get("pid") else f"client {rec.get('client')}"
            result.dead.append(f"worker {rec['worker']} ({where}) {rec['reason']} at {rec.get('at_s', 0):.1f} s")


def _cleanup(work: Path) -> None:
    for p in work.iterdir():
        p.unlink()
    work.rmdir()
