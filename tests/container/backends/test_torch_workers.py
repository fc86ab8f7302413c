"""TORCH_WORKERS: the process-per-copy layout, run on CPU with 2 workers and random weights.
The same code path serves CUDA on a GPU machine (benchmarks/gpu_throughput.py measures it)."""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest

from container.backends.torch_backend import TorchBackend
from container.backends.torch_workers import WorkerDied
from container.settings import Settings
from tests.container.conftest import needs_torch

# torch and a Kokoro model in the real upstream architecture: not in the fast tier (make test-fast).
pytestmark = [pytest.mark.slow, needs_torch]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_match_in_process_audio_and_a_dead_worker_is_an_error(torch_model_dir, torch_backend):
    import torch

    threads = torch.get_num_threads()
    local = torch_backend  # the session's in-process copy of the same checkpoint, loaded once
    pooled = TorchBackend(Settings(backend="torch", model_dir=torch_model_dir, torch_device="cpu",
                                   torch_workers=2, infer_cores=2))
    try:
        local.init_framework()  # its process settings (denormals flushed, 1 thread), as a server has them
        pooled.init_framework()
        pooled.load_weights()
        assert pooled.parallel_runs == 2 and "2 worker processes" in pooled.layout
        assert local.layout.startswith("cpu") and local.workers == 0
        assert pooled.voices == local.voices and pooled.weights_sha256 == local.weights_sha256
        pids = [w.proc.pid for w in pooled._pool.workers]
        assert set(pids) <= set(_children(os.getpid())) and len(set(pids)) == 2

        p = local.prepare("Hello there.", "af_random", 1.0)
        assert pooled.prepare("Hello there.", "af_random", 1.0) == p  # same G2P and vocabulary
        torch.manual_seed(11)  # the decoder's harmonic source adds noise: same seed both sides
        want = local.infer([p], threads=1)[0]
        for _ in range(2):  # both workers (least busy, ties to the lowest index: worker 0 twice
            got = pooled._pool.call(p.payload, p.voice, p.speed, seed=11)  # unless it is busy)
            assert got.dtype == np.float32 and got.shape == want.shape
            assert float(np.abs(got - want).max()) == 0.0
        # the worker sends the model's durations back with the audio (word timestamps)
        audio, dur = pooled._pool.call_timed(p.payload, p.voice, p.speed, seed=11)
        assert dur.shape == (len(p.payload) + 2,) and int(dur.sum()) * 600 == audio.size == want.size
        timed = pooled.prepare_timed("Hello there.", "af_random", 1.0)
        assert [w for w, _, _ in pooled.word_times(timed, pooled.infer([timed], 1)[0])] == ["Hello", "there"]
        with ThreadPoolExecutor(2) as ex:  # two at once: each worker takes one
            outs = list(ex.map(lambda _: pooled.infer([p], threads=1)[0], range(2)))
        assert all(o.shape == want.shape for o in outs)
        assert pooled.infer([p.__class__(payload="", voice=p.voice, speed=1.0, n_tokens=0)], 1)[0].size == 0

        # Kill the worker serving a call in flight: the caller gets WorkerDied naming it, not a hang.
        with ThreadPoolExecutor(1) as ex:
            fut = ex.submit(pooled.infer, [p], 1)
            deadline = time.monotonic() + 30
            while not any(w.busy for w in pooled._pool.workers) and time.monotonic() < deadline:
                time.sleep(0.005)
            busy = next(w for w in pooled._pool.workers if w.busy)
            os.kill(busy.proc.pid, signal.SIGKILL)
            with pytest.raises(WorkerDied, match=rf"torch worker {busy.index} \(pid \d+\) exited with code -9"):
                fut.result(timeout=30)
        assert pooled._pool.dead() and pooled.infer([p], 1)[0].shape == want.shape  # the other serves
        other = next(w for w in pooled._pool.workers if w is not busy)
        os.kill(other.proc.pid, signal.SIGKILL)
        other.proc.join(10)
        with pytest.raises(WorkerDied, match="exited"):
            pooled.infer([p], 1)
    finally:
        pooled.close()
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)
    assert not any(_alive(pid) for pid in pids)
    with pytest.raises(WorkerDied, match="stopped"):
        pooled.infer([p], 1)


def test_worker_that_cannot_load_is_a_load_error_with_no_process_left(torch_model_dir, tmp_path):
    import torch

    from container.errors import ModelLoadError
    for name in ("config.json", "voices"):
        (tmp_path / name).symlink_to(torch_model_dir / name)
    (tmp_path / "kokoro-v1_0.pth").write_bytes(b"not a checkpoint")
    # One worker: every worker loads the same bad file and fails alike, so a second one only
    # imported torch once more before failing the same way.
    b = TorchBackend(Settings(backend="torch", model_dir=tmp_path, torch_device="cpu",
                              torch_workers=1, infer_cores=1))
    before = set(_children(os.getpid()))
    try:
        b.init_framework()
        with pytest.raises(ModelLoadError, match=r"TORCH_WORKERS=1: worker 0: cannot load KModel"):
            b.load_weights()
    finally:
        torch.set_flush_denormal(False)
    assert not [pid for pid in set(_children(os.getpid())) - before if _alive(pid)]


def test_server_with_workers_dead_worker_is_503_and_sigterm_leaves_no_process(torch_model_dir, server_factory):
    # One worker: the server's side of the pool (footprint, 503 once its workers are gone, SIGTERM)
    # is the same for any count, and two workers in one pool, each serving, are the test above's;
    # a second worker here loaded the model once more for nothing.
    srv = server_factory({"BACKEND": "torch", "MODEL_DIR": str(torch_model_dir), "TORCH_WORKERS": "1",
                          "INFER_CORES": "1", "TORCH_DEVICE": "cpu"}, wait=False)
    assert srv.wait_ready(timeout=180).status_code == 200
    workers = [pid for pid in _children(srv.proc.pid)
               if b"spawn_main" in (Path("/proc") / str(pid) / "cmdline").read_bytes()]
    assert len(workers) == 1, workers
    # The copy's footprint counts the worker: it holds its own weights.
    fp = httpx.get(srv.url + "/ping", timeout=10).json()["footprint"]
    assert fp["device"] == "cpu" and fp["processes"] >= 2
    outside = sum(int(next(ln.split()[1] for ln in (Path("/proc") / str(p) / "status").read_text().splitlines()
                           if ln.startswith("VmRSS:"))) for p in [srv.proc.pid, *workers]) * 1024
    assert fp["rss_bytes"] >= 0.75 * outside
    body = {"text": "Hello world.", "voice": "af_random", "response_format": "pcm", "stream": False}
    r = httpx.post(srv.url + "/invocations", json=body, timeout=60)
    assert r.status_code == 200 and len(r.content) > 0
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    r = httpx.post(srv.url + "/invocations", json=body, timeout=60)
    assert r.status_code == 503 and r.json()["error"] == "model_unavailable", r.text
    assert "exited" in r.json()["detail"]
    ping = httpx.get(srv.url + "/ping", timeout=10)
    assert ping.status_code == 503 and "exited" in ping.json()["detail"]
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(60) == 0
    assert not [pid for pid in workers + _children(srv.proc.pid) if _alive(pid)]
