from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadRequest

# Kokoro's style tables have 510 rows and the model's context is 512 tokens with the two pads.
MAX_TOKENS = 510
# Rough speech rate at speed 1.0, used only to schedule (deadlines, shedding), never for output.
AUDIO_S_PER_TOKEN = 0.07


@dataclass
class Prepared:
    """One segment after G2P: what the inference stage needs, plus scheduling hints."""

    payload: Any
    voice: str
    speed: float
    n_tokens: int
    batch_key: Hashable = None
    # Word timestamps (prepare_timed): (word, first token, past its last token) in payload order,
    # and the frames per model input token that infer() fills in from the model's own output.
    words: list[tuple[str, int, int]] | None = None
    durations: Any = None
    # abort(): set once the request is gone; a backend that can stop a run keeps its handle here.
    aborted: bool = False
    abort_handle: Any = None

    @property
    def est_audio_s(self) -> float:
        return self.n_tokens * AUDIO_S_PER_TOKEN / max(self.speed, 1e-3)


class Backend(ABC):
    name: str = "base"
    sample_rate: int = 24000
    # >1 lets the scheduler hand over several segments with the same batch_key at once.
    max_batch_size: int = 1
    # How many infer() calls may run at once. None: INFER_CORES, and `threads` in infer() says how
    # many of those cores one call uses (the CPU layout). A backend that knows better (one GPU with
    # several streams) sets it in init_framework or load_weights.
    parallel_runs: int | None = None
    # False when infer() gains nothing from more `threads` (a GPU): each call then takes one slot,
    # and a lone segment no longer holds every slot while new segments arrive.
    width_matters: bool = True
    # True: consecutive sentences are packed into segments of up to MAX_SEGMENT_CHARS (fewer model
    # calls per request) instead of one segment per sentence (earliest first audio on a CPU).
    pack_segments: bool = False
    voices: tuple[str, ...] = ()
    # True when prepare/infer accept a blend's canonical id ("a(0.6000)+b(0.4000)", see voices.py).
    supports_blends: bool = False

    # Set by load_weights where the backend knows it: sha256 of the weights it serves, so a
    # measurement can tell two models apart even when no image digest is known (local runs).
    weights_sha256: str | None = None

    def identity(self) -> dict[str, str]:
        """What /ping reports about the model; bench hashes it into a local fingerprint."""
        out = {"backend": self.name}
        if self.weights_sha256:
            out["weights_sha256"] = self.weights_sha256
        return out

    def init_framework(self) -> None:  # noqa: B027 - optional hook: a backend with nothing to import keeps the no-op
        """Import the ML framework (stage framework_init)."""

    @abstractmethod
    def load_weights(self) -> None:
        """Load the model and voices (stage weights_ready); raise ModelLoadError if missing."""

    @abstractmethod
    def prepare(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        """G2P for one segment (`lang`: an espeak language, None for G2P_LANGUAGE). Runs in the
        single G2P thread (espeak is not thread-safe)."""

    # The model's phoneme vocabulary (character -> input id); None for a backend without G2P.
    def token_vocab(self) -> dict[str, int] | None:
        return None

    def phonemize(self, text: str, lang: str | None = None) -> str:
        """Kokoro phonemes of `text`, only characters the model's vocabulary has (G2P thread)."""
        raise BadRequest(f"BACKEND={self.name} has no G2P (use BACKEND=onnx or torch)")

    def voice_table(self, voice: str) -> np.ndarray:
        """A voice's (or a blend's canonical id's) style table, float32 (rows, 1, 256), for
        /v1/audio/voices/combine."""
        raise BadRequest(f"BACKEND={self.name} has no style tables (use BACKEND=onnx or torch)")

    def prepare_phonemes(self, phonemes: str, voice: str, speed: float) -> Prepared:
        """A segment given as phonemes (no G2P): /dev/generate_from_phonemes."""
        raise BadRequest(f"BACKEND={self.name} does not take phonemes (use BACKEND=onnx or torch)")

    @abstractmethod
    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        """float32 mono audio per item. May run in several threads at once."""

    # True when prepare_timed/word_times work: the model reports its predicted durations.
    supports_timestamps: bool = False

    def prepare_timed(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        """prepare() plus the word spans word_times() needs."""
        raise NotImplementedError

    def word_times(self, p: Prepared, audio: np.ndarray) -> list[tuple[str, float, float]]:
        """(word, start s, end s) from the start of this segment's audio, from the durations
        infer() stored on the Prepared (container/timing.py)."""
        from ..timing import word_times
        if p.durations is None or not p.words:
            return []
        return word_times(p.words, p.durations, int(audio.size), self.sample_rate)

    def abort(self, p: Prepared) -> None:
        """Stop the run of `p` if the backend can (its request was cancelled); the run then ends
        early with an error or finishes as usual. Default: it finishes as usual."""
        p.aborted = True

    def close(self) -> None:  # noqa: B027 - optional hook: a backend with nothing to release keeps the no-op
        """Release what load_weights started (processes, devices); called once at shutdown."""

    def warmup(self) -> None:
        voice = self.voices[0]
        self.infer([self.prepare("Warm up.", voice, 1.0)], threads=1)
