"""The container under benchmark: ``python -m container serve`` from this checkout on a free port of
127.0.0.1, started and stopped the same way by every container benchmark.

Not a benchmark itself (it prints nothing); the benchmarks import it as ``benchmarks.container_server``
with the repository root on ``sys.path``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

QUIET_ENV = {"HF_HUB_OFFLINE": "1", "SLO_MS": "600000", "QUEUE_MAX_DEPTH": "256", "METRICS_INTERVAL_S": "3600"}
"""A server that measures its backend, not its guards: no deadline shedding (SLO 10 min), a deep
queue, no metric lines in the way, and the model from the local cache only."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, alive: Callable[[], bool], wait_s: float, why_dead: Callable[[], str] = lambda: "") -> None:
    """Poll ``url``/ping until it answers 200. RuntimeError when ``alive()`` turns false first (with
    ``why_dead()``, e.g. the server's stderr tail), TimeoutError after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server exited during startup{': ' + why_dead() if why_dead() else ''}")
        try:
            if httpx.get(url + "/ping", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"server at {url} did not become ready in {wait_s:g} s")


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    port: int
    stderr: Path | None
    """The server's stderr file when started with a ``log_dir`` (else discarded)."""


def start(env_extra: dict[str, str], *, args: tuple[str, ...] = ("--log-level", "warning"),
          log_dir: Path | None = None, wait_s: float = 180.0) -> Server:
    """``python -m container serve --port <free> *args`` with this checkout on PYTHONPATH and
    ``env_extra`` over the environment; returns once /ping is 200 (the server is killed if not).
    ``log_dir``: keep its stdout and stderr there (``server-<port>.stdout``/``.stderr``)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    cmd = [sys.executable, "-m", "container", "serve", "--port", str(port), *args]
    err: Path | None = None
    if log_dir is None:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        err = log_dir / f"server-{port}.stderr"
        with open(log_dir / f"server-{port}.stdout", "w") as out, open(err, "w") as errf:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=errf)
    server = Server(proc, f"http://127.0.0.1:{port}", port, err)
    try:
        wait_ready(server.url, lambda: proc.poll() is None, wait_s,
                   lambda: err.read_text()[-2000:] if err is not None else "")
    except BaseException:
        stop(proc)
        raise
    return server


def stop(*procs: subprocess.Popen, wait_s: float = 30.0) -> None:
    """SIGTERM each (the server drains), then wait; kill any still running after ``wait_s``."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
