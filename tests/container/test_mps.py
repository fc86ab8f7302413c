"""NVIDIA MPS in the GPU image: what the `serve` entry script finds (nvidia-cuda-mps-control present,
starting, failing, or absent, as SageMaker documents no such binary in its containers) reaches /ping
as "mps", so a deployed endpoint says whether its torch workers share the GPU or time-slice it."""
from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "container" / "serve"


def _tool(bin_dir: Path, name: str, body: str) -> None:
    p = bin_dir / name
    p.write_text(f"#!/bin/sh\n{body}\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


@pytest.mark.slow
@pytest.mark.parametrize(("tools", "env", "found"), [
    ({"nvidia-smi": "exit 0"}, {}, "absent"),
    ({"nvidia-smi": "exit 0", "nvidia-cuda-mps-control": "exit 0"}, {}, "on"),
    ({"nvidia-smi": "exit 0", "nvidia-cuda-mps-control": "exit 1"}, {}, "failed"),
    ({"nvidia-smi": "exit 9"}, {}, "no-gpu"),
    ({"nvidia-smi": "exit 0", "nvidia-cuda-mps-control": "exit 0"}, {"TORCH_MPS": "0"}, "off"),
    ({"nvidia-smi": "exit 0", "nvidia-cuda-mps-control": "exit 0"}, {"BACKEND": "onnx"}, "off"),
], ids=["absent", "on", "failed", "no-gpu", "torch-mps-0", "cpu-backend"])
def test_serve_script_says_what_it_found_for_mps(tmp_path, tools, env, found):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        _tool(bin_dir, name, body)
    # `python` here only reports what the script exported before it would exec the server.
    _tool(bin_dir, "python", 'echo "SPEECH_MPS=$SPEECH_MPS"')
    run_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "BACKEND": "torch",
               "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "log"), **env}
    out = subprocess.run(["sh", str(SERVE)], env=run_env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert f"SPEECH_MPS={found}" in out.stdout.splitlines()[-1]


def test_ping_reports_the_mps_state_serve_found(server_factory, sine_server):
    srv = server_factory({"BACKEND": "sine", "SPEECH_MPS": "absent"})
    body = httpx.get(f"{srv.url}/ping", timeout=5).json()
    assert body["status"] == "ok" and body["mps"] == "absent"
    # the session's default server was not started by the script
    assert "mps" not in httpx.get(f"{sine_server.url}/ping", timeout=5).json()


@pytest.mark.slow  # runs the serve script as a subprocess
@pytest.mark.parametrize(("env", "port"), [({}, "8080"), ({"PORT": "9000"}, "9000"),
                                           ({"SAGEMAKER_BIND_TO_PORT": "9123", "PORT": "9000"}, "9123")])
def test_serve_listens_where_sagemaker_binds_it(tmp_path, env, port):
    """Both images declare accept-bind-to-port=true, so the port SageMaker passes wins (issue 34 F6)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "python", 'echo "ARGS=$*"')
    out = subprocess.run(["sh", str(SERVE)], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "BACKEND": "onnx", **env},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"ARGS=-m container serve --host 0.0.0.0 --port {port}"

