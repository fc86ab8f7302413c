"""Real uvicorn servers as subprocesses on 127.0.0.1, one free port each."""
from __future__ import annotations

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
def onnx_server():
    srv = ServerProc({"BACKEND": "onnx"})
    try:
        srv.wait_ready(timeout=120)
        yield srv
    finally:
        srv.stop()
