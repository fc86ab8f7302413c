"""TORCH_WORKERS: model copies in worker processes, one run at a time each.

Why processes: a Kokoro call is ~1,900 small ops launched from Python. Several runs on CUDA
streams in one process share one GIL, so their host-side launches take turns and throughput
stops growing at ~4 runs with the GPU still partly idle (container/README.md, GPU table). Each
worker here is its own interpreter with its own copy of the weights (82M parameters, ~330 MB in
float32), so launches proceed in parallel on separate CPU cores.

Protocol, one duplex pipe per worker: the parent sends (call_id, phonemes, voice, speed, seed)
and gets (call_id, (float32 audio, frames per input token), None) or (call_id, None, error
text) back; None asks the worker to stop.
A reader thread per worker hands replies to the waiting caller. When a worker's pipe ends (the
process died: OOM kill, CUDA fault), every call waiting on it and every later call raise
WorkerDied at once, never a hang. A worker whose parent dies sees its pipe end and exits, so
no copy of the model outlives the server.

Workers are started with the 'spawn' method (CUDA cannot be used in a forked child); spawn
passes the parent's sys.path to the child, so a PYTHONPATH-installed site (the GPU benchmark's
/tmp/site) resolves there too.
"""
from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..errors import ModelLoadError, ModelUnavailable

log = logging.getLogger("container.torch.workers")


class WorkerDied(ModelUnavailable):
    """A worker process ended while serving; the instance has lost model capacity (503)."""


def _worker_main(settings, index: int, conn, warm: bool) -> None:
    """Entry point in the child: load one in-process copy, then serve calls until told to stop
    or until the parent's end of the pipe closes."""
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch

        from .torch_model import LocalModel, import_kmodel, resolve_model_files

        # One run at a time in this process: concurrency comes from the other workers.
        device = settings.torch_device
        stream = None
        if device == "cuda":
            # A stream of its own, as each in-process run has (the default stream syncs with all).
            stream = torch.cuda.Stream()
            name = torch.cuda.get_device_name()
        else:
            # Denormal floats make x86 arithmetic many times slower; audio has no use for them.
            torch.set_flush_denormal(True)
            torch.set_num_threads(max(1, settings.infer_cores))
            name = f"{torch.get_num_threads()} intra-op threads"
        local = LocalModel(torch, import_kmodel(), device)
        local.load(*resolve_model_files(settings.model_dir))
        if warm:
            # The child has no G2P: a fixed phoneme string ("warming up.") does the first-call set-up.
            _run(torch, local, stream, "".join(c for c in "wˈɔɹmɪŋ ˈʌp." if c in local.vocab),
                 min(local.style), 1.0)
        conn.send(("ready", os.getpid(), f"{device} ({name}), one run at a time"))
    except BaseException as e:  # any load failure goes back as text: the parent raises it as a 503
        detail = getattr(e, "detail", None) or f"{type(e).__name__}: {e}"
        try:
            conn.send(("error", os.getpid(), detail))
        except OSError:
            pass
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # parent gone: exit rather than hold GPU memory as an orphan
        if msg is None:
            return
        call_id, payload, voice, speed, seed = msg
        try:
            if seed is not None:
                torch.manual_seed(seed)
            audio, dur = _run(torch, local, stream, payload, voice, speed)
            reply: tuple[Any, Any, str | None] = (call_id, (np.ascontiguousarray(audio, dtype=np.float32), dur), None)
        except Exception as e:
            reply = (call_id, None, f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


def _run(torch, local, stream, payload: str, voice: str | None, speed: float | None):
    """(audio, durations) of one segment on this worker's copy, on its own CUDA stream if any."""
    if not payload:
        return np.zeros(0, np.float32), None
    with torch.inference_mode():
        if stream is None:
            return local.run(payload, voice, speed)
        with torch.cuda.stream(stream):
            return local.run(payload, voice, speed)


class _Worker:
    def __init__(self, index: int, proc, conn):
        self.index = index
        self.proc = proc
        self.conn = conn
        self.pending: dict[int, Future] = {}
        self.send_lock = threading.Lock()
        self.dead: str | None = None
        self.reader: threading.Thread | None = None

    @property
    def busy(self) -> int:
        return len(self.pending)


class WorkerPool:
    """N spawned workers, each with its own copy of the model; call() runs one segment on the
    least busy live worker and blocks until its audio (or a clear error) is back."""

    def __init__(self, settings, n: int, start_timeout_s: float = 600.0):
        import torch.multiprocessing as mp

        self.n = n
        self._ctx = mp.get_context("spawn")
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self.workers: list[_Worker] = []
        self._settings = settings
        self._start_timeout_s = start_timeout_s

    def start(self, warm: bool) -> list[str]:
        """Start all workers, loading in parallel; ModelLoadError (and no process left behind)
        if any of them fails to load."""
        for i in range(self.n):
            parent, child = self._ctx.Pipe(duplex=True)
            proc = self._ctx.Process(target=_worker_main, name=f"torch-worker-{i}",
                                     args=(self._settings, i, child, warm), daemon=True)
            proc.start()
            child.close()  # the parent keeps only its end, so a dead child reads as EOF
            self.workers.append(_Worker(i, proc, parent))
        layouts, errors = [], []
        deadline = time.monotonic() + self._start_timeout_s
        for w in self.workers:
            msg = None
            try:
                if w.conn.poll(max(0.0, deadline - time.monotonic())):
                    msg = w.conn.recv()
            except (EOFError, OSError):
                pass
            if msg is None:
                w.proc.join(1)
                errors.append(f"worker {w.index} exited during load (exit code {w.proc.exitcode})"
                              if w.proc.exitcode is not None else
                              f"worker {w.index} did not load within {self._start_timeout_s:.0f} s")
            elif msg[0] == "error":
                errors.append(f"worker {w.index}: {msg[2]}")
            else:
                layouts.append(msg[2])
        if errors:
            self.close()
            raise ModelLoadError(f"TORCH_WORKERS={self.n}: " + "; ".join(errors))
        for w in self.workers:
            w.reader = threading.Thread(target=self._read, args=(w,), daemon=True,
                                        name=f"torch-worker-{w.index}-reader")
            w.reader.start()
        log.info("torch workers ready: pids %s", [w.proc.pid for w in self.workers])
        return layouts

    def _read(self, w: _Worker) -> None:
        while True:
            try:
                call_id, audio, error = w.conn.recv()
            except (EOFError, OSError, ValueError, TypeError):
                break
            fut = w.pending.pop(call_id, None)
            if fut is None:
                continue
            if error is None:
                fut.set_result(audio)
            else:
                fut.set_exception(RuntimeError(f"torch worker {w.index}: {error}"))
        self._mark_dead(w)

    def _mark_dead(self, w: _Worker) -> None:
        w.proc.join(2)
        code = w.proc.exitcode
        with self._lock:
            if w.dead is None:
                w.dead = ("stopped" if self._closed else
                          f"torch worker {w.index} (pid {w.proc.pid}) exited with code {code}")
            pending, w.pending = w.pending, {}
        if not self._closed:
            log.error("%s; %d call(s) in flight on it failed", w.dead, len(pending))
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(WorkerDied(w.dead))

    def dead(self) -> list[str]:
        return [w.dead for w in self.workers if w.dead]

    def call(self, payload: str, voice: str, speed: float, seed: int | None = None) -> np.ndarray:
        """Run one segment on the least busy live worker; WorkerDied (503) if that worker ends
        first or none is alive."""
        return self.call_timed(payload, voice, speed, seed)[0]

    def call_timed(self, payload: str, voice: str, speed: float, seed: int | None = None):
        """call(), plus the model's predicted frames per input token: (audio, durations)."""
        return self._submit(None, (payload, voice, speed, seed)).result()

    def warm(self, payload: str, voice: str, speed: float) -> None:
        """One call on every worker, in parallel: each pays its first-call costs (cuDNN/cuBLAS
        set-up, LSTM weight flattening) here instead of on a client's first request."""
        futs = [self._submit(w, (payload, voice, speed, None)) for w in self.workers]
        for f in futs:
            f.result()

    def _submit(self, worker: _Worker | None, args: tuple) -> Future:
        fut: Future = Future()
        call_id = next(self._ids)
        with self._lock:
            live = [w for w in self.workers if w.dead is None]
            if self._closed or not live:
                raise WorkerDied("torch workers are stopped" if self._closed else
                                 "every torch worker has exited: " + "; ".join(self.dead()))
            w = worker or min(live, key=lambda x: (x.busy, x.index))
            if w.dead is not None:
                raise WorkerDied(w.dead)
            w.pending[call_id] = fut
        try:
            with w.send_lock:
                w.conn.send((call_id, *args))
        except (BrokenPipeError, OSError, ValueError):
            # The reader thread fails this future (and the others) once it sees the pipe end.
            pass
        return fut

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask every worker to stop, wait, then terminate (and kill) whatever is left."""
        with self._lock:
            self._closed = True
        for w in self.workers:
            try:
                with w.send_lock:
                    w.conn.send(None)
            except (BrokenPipeError, OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout_s
        for w in self.workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.proc.is_alive():
                w.proc.terminate()
                w.proc.join(2)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(2)
            try:
                w.conn.close()
            except OSError:
                pass
        for w in self.workers:
            if w.reader is not None:
                w.reader.join(2)
