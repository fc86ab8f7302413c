"""Steps 5-7 of a rehearsal (:mod:`speech.infra.rehearse`): the started container's /ping awaited
within the start-up timeout, one real sentence synthesized through /invocations, SIGTERM and the
drain."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

from speech.infra.rehearse_steps import Check

SENTENCE = "The endpoint is ready to speak, and this sentence proves it."
SAMPLE_RATE = 24000
MIN_AUDIO_S = 1.0
"""A dozen words at any sane speed last longer than a second."""
STOP_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen, base: str, timeout_s: float, log_path: Path | None = None) -> Check:
    """/ping 200 within the start-up timeout. A container that exits first (it refuses a MODEL_DIR
    lacking its backend's files, exit 3) is named with the last line it printed (``log_path``)."""
    import httpx

    t0 = time.monotonic()
    last = "no answer"
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            said = ""
            if log_path is not None and log_path.exists():
                lines = log_path.read_text(errors="replace").strip().splitlines()
                said = f": {lines[-1]}" if lines else ""
            return Check("ping", False, f"the container exited {proc.returncode} before /ping answered 200{said}",
                         time.monotonic() - t0)
        try:
            r = httpx.get(f"{base}/ping", timeout=2.0)
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            if r.status_code == 200:
                return Check("ping", True, f"/ping 200 after {time.monotonic() - t0:.1f} s (timeout {timeout_s:g} s): "
                             f"{json.dumps(body, sort_keys=True)}", time.monotonic() - t0)
            if body.get("status") == "error":
                # A load error never heals: SageMaker would fail the health check at the timeout.
                return Check("ping", False, f"/ping 503, model not loaded: {body.get('detail')}", time.monotonic() - t0)
            last = f"/ping {r.status_code} {body.get('status', '')}".strip()
        except httpx.HTTPError as err:
            last = f"{err.__class__.__name__}"
        time.sleep(0.5)
    return Check("ping", False, f"no /ping 200 within the container start-up timeout {timeout_s:g} s (last: {last})",
                 time.monotonic() - t0)


def synthesize(base: str, text: str = SENTENCE) -> Check:
    import httpx
    import numpy as np

    t0 = time.monotonic()
    try:
        r = httpx.post(f"{base}/invocations", json={"text": text, "response_format": "pcm", "stream": False},
                       timeout=120.0)
    except httpx.HTTPError as err:
        return Check("synthesize", False, f"/invocations failed: {err!r}", time.monotonic() - t0)
    took = time.monotonic() - t0
    if r.status_code != 200:
        return Check("synthesize", False, f"/invocations {r.status_code}: {r.text[:300]}", took)
    pcm = np.frombuffer(r.content[: len(r.content) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    audio_s = len(pcm) / SAMPLE_RATE
    rms = float(np.sqrt(np.mean(pcm ** 2))) if len(pcm) else 0.0
    if audio_s < MIN_AUDIO_S or rms < 1e-3:
        return Check("synthesize", False, f"{audio_s:.2f} s of audio, RMS {rms:.4f}: expected at least {MIN_AUDIO_S:g} s "
                     "of non-silent speech", took)
    return Check("synthesize", True, f"{len(text)} characters -> {audio_s:.2f} s of 24 kHz speech (RMS {rms:.3f}) "
                 f"in {took:.1f} s", took)


def stop(proc: subprocess.Popen, drain_s: float) -> Check:
    t0 = time.monotonic()
    if proc.poll() is not None:
        return Check("stop", False, f"the container had already exited {proc.returncode}")
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=drain_s + STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return Check("stop", False, f"no exit within {drain_s + STOP_GRACE_S:g} s of SIGTERM (killed)", time.monotonic() - t0)
    took = time.monotonic() - t0
    return Check("stop", rc == 0, f"SIGTERM -> exit {rc} in {took:.1f} s", took)
