"""A real, selectable backend that makes tones: for gate/drain/protocol tests and for exercising
the measurement CLI without a model. Slow on purpose when SINE_DELAY_MS is set."""
from __future__ import annotations

import time

import numpy as np

from .base import AUDIO_S_PER_TOKEN, Backend, Prepared

_FREQS = {"sine_a4": 440.0, "sine_c5": 523.25, "sine_e5": 659.25}


class SineBackend(Backend):
    name = "sine"
    voices = tuple(_FREQS)

    def __init__(self, settings):
        self.delay_s = settings.sine_delay_ms / 1000.0
        self.max_batch_size = settings.sine_max_batch

    def load_weights(self) -> None:
        pass

    def prepare(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        n = len(text.strip())
        # Same length -> same batch, as a real padded batch would need.
        return Prepared(payload=n, voice=voice, speed=speed, n_tokens=n, batch_key=n)

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        if self.delay_s:
            # One delay per batch (batching pays off like on a GPU), cut short by abort() as an
            # onnx run is: in 5 ms steps.
            end = time.monotonic() + self.delay_s
            while time.monotonic() < end:
                if all(p.aborted for p in batch):
                    raise RuntimeError("run aborted")
                time.sleep(min(0.005, max(0.0, end - time.monotonic())))
        out = []
        for p in batch:
            n = int(p.n_tokens * AUDIO_S_PER_TOKEN / p.speed * self.sample_rate)
            t = np.arange(n, dtype=np.float32) / self.sample_rate
            out.append((0.3 * np.sin(2 * np.pi * _FREQS[p.voice] * t)).astype(np.float32))
        return out

    def warmup(self) -> None:
        pass
