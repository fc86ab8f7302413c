"""Real uvicorn servers as subprocesses on 127.0.0.1, one free port each, and what needs the real
model shared per session: a test process (pytest-xdist hands it whole files) starts each at most once.

Session-scoped here: a sine server in the default configuration, the random upstream-layout torch
checkpoint and one in-process torch backend loaded from it (the real model's onnx server is
tests/conftest.py's, shared with tests/bench/load). Tests only read
from them; a test that changes a server's state (shedding, drain, signals, counters it compares
exactly) or needs another configuration starts its own through `server_factory`."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProc:
    def __init__(self, env: dict[str, str], args: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = dict(os.environ)
        full_env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
        full_env.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "container", "serve", "--port", str(self.port), *(args or [])],
            cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink.append(line)

    def wait_ready(self, timeout: float = 60.0, want: int = 200) -> httpx.Response:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {''.join(self.stderr)[-2000:]}")
            try:
                last = httpx.get(self.url + "/ping", timeout=2)
                if last.status_code == want and (want == 200 or "loading" not in last.text):
                    return last
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not ready: {last and last.text} {''.join(self.stderr)[-2000:]}")

    def wait_for_stdout(self, holds, timeout: float = 60.0) -> list[str]:
        """The server's stdout lines (JSON: stage markers, EMF) once `holds(lines)` is true: an
        event waited for, where a fixed sleep is outlasted by a loaded machine's delays."""
        deadline = time.monotonic() + timeout
        while True:
            lines = list(self.stdout)
            if holds(lines):
                return lines
            if time.monotonic() > deadline:
                raise TimeoutError(f"no such stdout within {timeout} s; last lines: {lines[-5:]}")
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {''.join(self.stderr)[-2000:]}")
            time.sleep(0.05)

    def rss_mb(self) -> float:
        """Resident memory of the server process (Linux /proc), MiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def counter(metrics: str, name: str, outcome: str | None = None) -> int:
    """A counter's value in a /metrics text (Prometheus exposition), `outcome` picking the labelled
    series: servers shared by a session are compared before and after, as differences."""
    for line in metrics.splitlines():
        if line.startswith(name + "{") and (outcome is None or f'outcome="{outcome}"' in line):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError(f"{name} {outcome} not in /metrics")


@pytest.fixture
def server_factory():
    started: list[ServerProc] = []

    def make(env: dict[str, str] | None = None, args: list[str] | None = None, wait: bool = True):
        srv = ServerProc({k: str(v) for k, v in (env or {}).items()}, args)
        started.append(srv)
        if wait:
            srv.wait_ready()
        return srv

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def sine_server():
    """The sine backend in its default configuration, for tests that send requests and read the
    answers (documents, /ping, validation): each start costs an interpreter, the app's imports and
    a port. Counters on it move with every test that uses it: compare differences, not totals."""
    srv = ServerProc({"BACKEND": "sine"})
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


# Not in the CPU image; the Makefile installs them from container/requirements-torch.txt. Found, not
# imported: a test module is imported by every test process at collection (and by the fast tier's),
# and importing kokoro there (torch, transformers, spaCy) cost each of them 5 s of CPU for files most
# of them never run. A module marks itself with `needs_torch` and imports torch inside its tests.
TORCH_MISSING = next((f"BACKEND=torch needs {name} (container/requirements-torch.txt)"
                      for name in ("torch", "kokoro") if importlib.util.find_spec(name) is None), None)
needs_torch = pytest.mark.skipif(TORCH_MISSING is not None, reason=TORCH_MISSING or "")


def _need_torch():
    if TORCH_MISSING is not None:
        pytest.skip(TORCH_MISSING)


@pytest.fixture(scope="session")
def torch_model_dir(tmp_path_factory) -> Path:
    """MODEL_DIR in the upstream layout (config.json, kokoro-v1_0.pth, voices/af_random.pt): the real
    Kokoro-82M architecture, random weights (seed 0), the duration head fixed at 2 frames per token,
    written by the GPU benchmark's own writer. Building KModel and saving its 330 MB checkpoint is
    the expensive part of every torch test's setup: once per session. Read-only for the tests."""
    _need_torch()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_throughput import write_random_upstream_model
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return write_random_upstream_model(tmp_path_factory.mktemp("kokoro-random"))


@contextlib.contextmanager
def torch_process_settings():
    """What a torch backend's init_framework changes for the whole process (denormals flushed, the
    intra-op thread count), put back afterwards: right for a server, wrong for the rest of a test
    process (hypothesis and numpy expect IEEE subnormals)."""
    import torch
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def torch_backend(torch_model_dir):
    """One in-process TorchBackend (TORCH_WORKERS=0, INFER_CORES=1, CPU) on `torch_model_dir`,
    loaded once (its weight_norm folded). A test that runs it re-applies the process settings
    with `with torch_process_settings(): backend.init_framework()` (cheap: no model load)."""
    _need_torch()
    from container.backends.torch_backend import TorchBackend
    from container.settings import Settings
    backend = TorchBackend(Settings(backend="torch", model_dir=torch_model_dir, torch_device="cpu",
                                    torch_workers=0, infer_cores=1))
    with torch_process_settings():
        backend.init_framework()
        backend.load_weights()
    yield backend
    backend.close()
