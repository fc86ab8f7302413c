"""kokoro.KModel on torch (GPU instances). Weights from a local directory in the upstream layout:
MODEL_DIR/config.json, MODEL_DIR/kokoro-v1_0.pth (one *.pth), MODEL_DIR/voices/*.pt.
torch and kokoro are imported only here, so the CPU image never needs them. The model copy
itself (load, checks, one run) is backends/torch_model.py, shared with the worker processes."""
from __future__ import annotations

import json
import logging
import os
import queue
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError
from ..timing import timed_phonemes
from .base import MAX_TOKENS, Backend, Prepared
from .g2p import EspeakPhonemizer
from .torch_model import LocalModel, import_kmodel, resolve_model_files, sha256_file

# Kept for callers of the old names (benchmarks/gpu_throughput.py).
_import_kmodel = import_kmodel
__all__ = ["TorchBackend", "resolve_model_files"]

# TORCH_STREAMS=auto on CUDA. One run of this model is a few hundred small kernels with three
# host syncs in between (durations, LSTM lengths), so a lone run leaves the GPU idle between them;
# four runs on four streams fill those gaps (see benchmarks/gpu_throughput.py for the measurement).
_AUTO_CUDA_STREAMS = 4


def _auto_cuda_workers(cpu_count: int) -> int:
    """TORCH_WORKERS=auto on CUDA: one worker per two cores (each worker's launch thread keeps a
    core busy; the other half is left for G2P, HTTP and torch's own helper threads), 2 to 8."""
    return max(2, min(8, cpu_count // 2))

log = logging.getLogger("container.torch")


class TorchBackend(Backend):
    name = "torch"
    supports_timestamps = True  # KModel reports its predicted durations (pred_dur)
    supports_blends = True  # a blend is the signed weighted sum of the voices' tables (torch_model.py)

    def __init__(self, settings):
        self.settings = settings
        self._lanes: queue.SimpleQueue | None = None
        self._pool = None  # torch_workers.WorkerPool when TORCH_WORKERS > 0
        self.workers = 0
        self.layout = "not initialised"

    def init_framework(self) -> None:
        # Everything comes from MODEL_DIR; should a code path still reach for the hub, it must
        # fail here at once instead of downloading on an instance. Read when huggingface_hub is
        # imported, so it is set before kokoro pulls it in.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            KModel = import_kmodel()
        except ImportError as e:
            raise ModelLoadError(f"BACKEND=torch needs torch and kokoro installed: {e}") from e
        self._torch, self._KModel = torch, KModel
        want = self.settings.torch_device
        if want == "cuda" and not torch.cuda.is_available():
            raise ModelLoadError("TORCH_DEVICE=cuda but torch sees no GPU "
                                 f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); "
                                 "use TORCH_DEVICE=auto or cpu")
        self.device = want if want != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        streams, workers = self.settings.torch_streams, self.settings.torch_workers
        if workers == "auto":
            workers = _auto_cuda_workers(self.settings.usable_cores) if self.device == "cuda" else 0
        self.workers = int(workers)
        if self.workers:
            # Model copies in worker processes (torch_workers.py): each runs one segment at a
            # time, so the engine's slots are the worker count; TORCH_STREAMS does not apply.
            n = self.workers
            name = (torch.cuda.get_device_name() if self.device == "cuda" else
                    f"{max(1, self.settings.infer_cores // n)} intra-op threads each")
            if self.device == "cpu":
                torch.set_flush_denormal(True)  # this process runs no model; workers set their own
        elif self.device == "cuda":
            n = _AUTO_CUDA_STREAMS if streams == "auto" else int(streams)
            # One lane = one CUDA stream; a run takes a free lane, so runs in flight never share
            # a stream and the GPU can overlap one run's kernels with another's host-side gaps.
            self._lanes = queue.SimpleQueue()
            for _ in range(n):
                self._lanes.put(torch.cuda.Stream())
            name = torch.cuda.get_device_name()
        else:
            n = 1 if streams == "auto" else int(streams)
            # Denormal floats make x86 arithmetic many times slower (measured 2-4x on this model
            # with random weights); audio has no use for magnitudes below 1e-38.
            torch.set_flush_denormal(True)
            torch.set_num_threads(max(1, self.settings.infer_cores // n))
            name = f"{torch.get_num_threads()} intra-op threads per run"
        # The engine reads these: n runs at once, and a run gains nothing from a "width".
        self.parallel_runs = n
        self.width_matters = False
        # On a GPU a whole paragraph takes tens of ms, so sentence-by-sentence streaming buys no
        # first-byte time there, while each extra model call costs ~1900 host-side op launches
        # (the bottleneck): sentences are packed into segments up to MAX_SEGMENT_CHARS.
        self.pack_segments = self.device == "cuda"
        if self.workers:
            self.layout = (f"{self.device} ({name}), {n} worker processes, one run and one copy "
                           "of the weights each")
        else:
            self.layout = f"{self.device} ({name}), {n} run(s) in flight, one shared copy of the weights"
        log.info("torch layout: %s", self.layout)

    @contextmanager
    def _lane(self):
        """A CUDA stream of its own for this run (CPU: nothing to pick)."""
        if self._lanes is None:
            yield
            return
        stream = self._lanes.get()
        try:
            with self._torch.cuda.stream(stream):
                yield
        finally:
            self._lanes.put(stream)

    def load_weights(self) -> None:
        config, weights, voices = resolve_model_files(self.settings.model_dir)
        if self.workers:
            self._load_workers(config, weights, voices)
            return
        self.local = LocalModel(self._torch, self._KModel, self.device)
        self.local.load(config, weights, voices)
        self.weights_sha256 = sha256_file(weights)
        self.voices = tuple(sorted(self.local.style))
        self._voice_files = {p.stem: p for p in voices}
        # Same offline espeak path as the onnx backend: no spaCy model, no network.
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def _load_workers(self, config: Path, weights: Path, voices: list[Path]) -> None:
        """Worker layout: the copies load in their processes (each checks the checkpoint as the
        in-process layout does); this process keeps only what G2P and /ping need."""
        from .torch_workers import WorkerPool
        try:
            self.vocab = json.loads(config.read_text(encoding="utf-8"))["vocab"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelLoadError(f"cannot read the vocabulary from {config}: {type(e).__name__}: {e}") from e
        # CPU workers split INFER_CORES between them instead of each spanning all of them.
        pool = WorkerPool(self.settings.model_copy(update={
            "torch_device": self.device,
            "infer_cores": max(1, self.settings.infer_cores // self.workers)}), self.workers)
        # Warm-up happens in warmup(), on every worker, so WARMUP=0 still means none.
        pool.start(warm=False)
        self._pool = pool
        self.weights_sha256 = sha256_file(weights)
        self.voices = tuple(sorted(p.stem for p in voices))
        self._voice_files = {p.stem: p for p in voices}
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def voice_table(self, voice: str) -> np.ndarray:
        """The table the model would use for `voice`, read from the voice files (the worker
        layout keeps no tables in this process)."""
        from ..voices import parse_voice_spec
        total = None
        for name, w in parse_voice_spec(voice).parts:
            t = self._torch.load(self._voice_files[name], map_location="cpu", weights_only=True)
            t = t.float().reshape(-1, 1, 256) * w
            total = t if total is None else total + t
        assert total is not None  # parse_voice_spec yields at least one part
        return total.numpy().astype(np.float32)

    def close(self) -> None:
        """Stop the worker processes (worker layout); nothing to do in-process."""
        if self._pool is not None:
            self._pool.close()

    def prepare(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        return self.prepare_phonemes(self.g2p(text, lang), voice, speed)

    def prepare_phonemes(self, phonemes: str, voice: str, speed: float) -> Prepared:
        # KModel drops phonemes outside its vocabulary; count what it will actually see, because
        # the context (MAX_TOKENS + 2 pads) and the style row both depend on that number.
        vocab = self.token_vocab()
        ps = "".join(c for c in phonemes if c in vocab)[:MAX_TOKENS]
        return Prepared(payload=ps, voice=voice, speed=speed, n_tokens=len(ps))

    def token_vocab(self) -> dict[str, int]:
        return self.vocab if self._pool is not None else self.local.vocab

    def phonemize(self, text: str, lang: str | None = None) -> str:
        vocab = self.token_vocab()
        return "".join(c for c in self.g2p(text, lang) if c in vocab)

    def prepare_timed(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        vocab = self.token_vocab()
        ps, words = timed_phonemes(text, partial(self.g2p, lang=lang), vocab, MAX_TOKENS)
        return Prepared(payload=ps, voice=voice, speed=speed, n_tokens=len(ps), words=words)

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        # KModel takes one segment per call: its duration step (repeat_interleave over a squeezed
        # pred_dur) fails for batch > 1, so max_batch_size stays 1 (container/README.md).
        if self._pool is not None:
            runs = [self._pool.call_timed(p.payload, p.voice, p.speed) if p.payload
                    else (np.zeros(0, np.float32), None) for p in batch]
        else:
            with self._lane(), self._torch.inference_mode():
                runs = [self.local.run(p.payload, p.voice, p.speed) for p in batch]
        for p, (_, dur) in zip(batch, runs, strict=True):
            p.durations = dur
        return [audio for audio, _ in runs]

    def warmup(self) -> None:
        # Every lane once: the first run on a stream pays cuDNN/cuBLAS setup and LSTM weight
        # flattening, which must not land on a client's first request.
        p = self.prepare("Warming up the model.", self.voices[0], 1.0)
        if self._pool is not None:
            self._pool.warm(p.payload, p.voice, p.speed)
            return
        for _ in range(self.parallel_runs or 1):
            self.infer([p], threads=1)
        if self.device == "cuda":
            self._torch.cuda.synchronize()
