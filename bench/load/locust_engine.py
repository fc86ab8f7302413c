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

import argparse
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
from typing import TYPE_CHECKING, Any

from bench.errors import TargetError, UsageError

if TYPE_CHECKING:  # numpy-backed: imported where a run needs it, so --help stays light
    from bench.load.schedule import Schedule

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
LOCAL_MAX_RPS = 500
"""--engine auto uses the asyncio engine up to this rate at the trace's busiest second: where its
send-late p99 stayed about 10 ms on a busy shared 2-core machine (benchmarks/replay_scale.py,
docs/load-at-scale.md); Locust above it."""
CONNECT_WAIT_S = 60
"""How long the master waits for the expected workers before giving up (exit 2, named)."""
STOP_GRACE_S = 10.0
MASTER_NICE = 10
"""The local master runs this much nicer than its workers: every Locust report interval (3 s) it
turns the workers' rows into the rows file and merges their statistics, a burst of CPU that, on a
machine whose cores the workers fill, would otherwise take a worker's core and delay its sends
(measured: the late requests of a 2-worker run on 2 cores clustered at those reports)."""


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


def add_engine_arguments(p: argparse.ArgumentParser, files: bool) -> None:
    """--engine, --workers, --master-bind, --expect-workers (and, with ``files``, --csv/--html)."""
    g = p.add_argument_group("load engine")
    g.add_argument("--engine", choices=["auto", "local", "locust"], default="auto",
                   help=f"local asyncio process or Locust processes (default auto: local up to {LOCAL_MAX_RPS} rps)")
    g.add_argument("--workers", type=int, default=None, metavar="N", help="--engine locust: local worker processes (default: the cores)")
    g.add_argument("--master-bind", metavar="HOST:PORT", help="--engine locust: bind the master here for workers on other machines")
    g.add_argument("--expect-workers", type=int, default=None, metavar="N", help="with --master-bind: wait for N workers")
    if files:
        g.add_argument("--csv", action="store_true", help="--engine locust: also write Locust's CSV files beside the artifact")
        g.add_argument("--html", action="store_true", help="--engine locust: also write Locust's HTML report beside the artifact")


def engine_options(args: argparse.Namespace, peak_rps: float | None, transport: str = "stream"):
    """The engine --engine/auto picks, checked against the other engine flags: ("local", None) or
    ("locust", EngineOptions). Bad combinations are UsageErrors (exit 2)."""
    workers, bind, expect = getattr(args, "workers", None), getattr(args, "master_bind", None), getattr(args, "expect_workers", None)
    # --csv DIR / --html FILE are every command's own files (bench.cli.results); with Locust its own
    # CSV and HTML are written beside them, so they pick no engine.
    locust_flags = [f for f, v in (("--workers", workers), ("--master-bind", bind), ("--expect-workers", expect))
                    if v not in (None, False)]
    engine = getattr(args, "engine", "auto")
    if engine == "auto":
        wants = bool(locust_flags) or (peak_rps is not None and peak_rps > LOCAL_MAX_RPS)
        engine = "locust" if wants and importlib.util.find_spec("locust") is not None and transport == "stream" else "local"
    if engine == "local":
        if locust_flags:
            raise UsageError(f"{', '.join(locust_flags)}: only with --engine locust")
        return "local", None
    require_locust()
    if transport != "stream":
        raise UsageError(f"--engine locust sends --transport stream only (not {transport}); use --engine local")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: must be >= 1")
    if expect is not None and expect < 1:
        raise UsageError(f"--expect-workers {expect}: must be >= 1")
    if bind:
        parse_bind(bind)
        if workers is not None:
            raise UsageError("--workers starts local workers; with --master-bind the workers are remote: pass --expect-workers N")
        if expect is None:
            raise UsageError("--master-bind needs --expect-workers N (how many remote workers to wait for)")
    elif expect is not None:
        raise UsageError("--expect-workers is for remote workers: add --master-bind HOST:PORT (or use --workers N)")
    return "locust", EngineOptions(workers=workers or os.cpu_count() or 1, master_bind=bind, expect_workers=expect)


def locust_target(target: Any) -> dict:
    """What the Locust workers send to, from a checked target."""
    from bench.load.targets import SageMakerTarget

    if isinstance(target, SageMakerTarget):
        return {"sagemaker_endpoint": target.endpoint, "aws_region": target.session.region_name,
                "inference_component": target.inference_component}
    return {"host": target.url}


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
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, master.pid, MASTER_NICE)
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
        _cleanup(work)
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
        elif kind == "go":
            result.meta["start_at"] = rec["start_at"]
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


class LocustLevels:
    """``bench validate --live --engine locust``: each closed-loop level (N requests in flight,
    settle then measure) as one Locust run, N users spread over the workers; the same
    :class:`~bench.load.loadgen.LevelResult` the asyncio session returns, with its window in this
    process's perf_counter time (for the CloudWatch window)."""

    def __init__(self, target: dict, opts: EngineOptions, mix: str) -> None:
        self.target, self.opts, self.mix = target, opts, mix
        self.workers = 0
        self.dead: list[str] = []

    def level(self, concurrency: int, settle_s: float, measure_s: float, texts=None, on_progress=None):
        import numpy as np

        from bench.load.loadgen import LevelResult
        from bench.load.targets import Outcome

        res = run_locust(self.target, self.opts, closed={"users": concurrency, "settle_s": settle_s, "measure_s": measure_s,
                                                         "mix": self.mix}, timeout_s=settle_s + measure_s + 120)
        if res.interrupted:
            raise KeyboardInterrupt
        self.workers = max(self.workers, res.workers)
        self.dead += res.dead
        # Rows are relative to the common start (wall clock start_at): place them on this clock.
        t0 = time.perf_counter() - (time.time() - float(res.meta.get("start_at", time.time())))
        lo, hi = t0 + settle_s, t0 + settle_s + measure_s
        outs = [Outcome(start=t0 + r[4], end=t0 + r[5], ttfab_s=None if r[2] is None else r[2] / 1000, ok=r[3] == "ok",
                        rejected=r[3] == "rejected", error=None if r[3] in ("ok", "rejected") else r[3]) for r in res.rows]
        area = sum(max(0.0, min(o.end, hi) - max(o.start, lo)) for o in outs)
        ttfab = np.array([o.ttfab_s * 1000 for o in outs if o.ok and o.ttfab_s is not None and lo <= o.start + o.ttfab_s <= hi])
        return LevelResult(concurrency=concurrency, measure_s=measure_s, outcomes=[o for o in outs if lo <= o.end <= hi],
                           ttfab_ms=ttfab, inflight_mean=area / measure_s if measure_s > 0 else 0.0, loop_lag_p99_ms=0.0,
                           cpu_fraction=0.0, window=(lo, hi))

    def close(self) -> None:
        return None
