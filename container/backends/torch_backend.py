"""kokoro.KModel on torch (GPU instances). Weights from a local directory in the upstream layout:
MODEL_DIR/config.json, MODEL_DIR/kokoro-v1_0.pth (one *.pth), MODEL_DIR/voices/*.pt.
torch and kokoro are imported only here, so the CPU image never needs them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError
from .base import MAX_TOKENS, Backend, Prepared
from .g2p import EspeakPhonemizer

# The submodules KModel loads from the .pth, each a state dict (upstream: keys prefixed "module.").
_PARTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
_STYLE_DIM = 256


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def resolve_model_files(model_dir: Path | None) -> tuple[Path, Path, list[Path]]:
    """(config.json, the .pth, voices/*.pt) or ModelLoadError naming what is missing and where."""
    if model_dir is None:
        raise ModelLoadError("BACKEND=torch needs MODEL_DIR with config.json, *.pth and voices/*.pt")
    d = Path(model_dir)
    if not d.is_dir():
        raise ModelLoadError(f"MODEL_DIR {d} does not exist")
    config, weights, voices = d / "config.json", sorted(d.glob("*.pth")), sorted((d / "voices").glob("*.pt"))
    missing = [name for name, found in (("config.json", config.exists()), ("*.pth", weights),
                                        ("voices/*.pt", voices)) if not found]
    if missing:
        raise ModelLoadError(f"MODEL_DIR {d} lacks {', '.join(missing)}")
    if len(weights) > 1:
        # Picking one silently could serve weights other than the ones the deployment meant.
        raise ModelLoadError(f"MODEL_DIR {d} holds several *.pth ({', '.join(p.name for p in weights)}); keep one")
    return config, weights[0], voices


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, settings):
        self.settings = settings

    def init_framework(self) -> None:
        # Everything comes from MODEL_DIR; should a code path still reach for the hub, it must
        # fail here at once instead of downloading on an instance. Read when huggingface_hub is
        # imported, so it is set before kokoro pulls it in.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from kokoro import KModel
        except ImportError as e:
            raise ModelLoadError(f"BACKEND=torch needs torch and kokoro installed: {e}") from e
        self._torch, self._KModel = torch, KModel
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device == "cpu":
            # Denormal floats make x86 arithmetic many times slower (measured 2-4x on this model
            # with random weights); audio has no use for magnitudes below 1e-38.
            torch.set_flush_denormal(True)

    def _check_state_dict(self, weights: Path) -> None:
        """KModel falls back to load_state_dict(strict=False) when keys do not match, so a .pth
        of another architecture would load as random weights and serve noise without a word."""
        torch = self._torch
        try:
            # mmap: only the key names are needed here, not a second copy of the tensors.
            sd = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
        except Exception as e:  # torch raises pickle/zip/runtime errors for corrupt files
            raise ModelLoadError(f"cannot read {weights}: {type(e).__name__}: {e}") from e
        if not isinstance(sd, dict) or set(sd) != set(_PARTS):
            got = sorted(sd) if isinstance(sd, dict) else type(sd).__name__
            raise ModelLoadError(f"{weights} is not a Kokoro checkpoint: top-level keys {got}, want {list(_PARTS)}")
        for part in _PARTS:
            have = {k.removeprefix("module.") for k in sd[part]}
            want = set(getattr(self.model, part).state_dict())
            if have != want:
                miss, extra = sorted(want - have), sorted(have - want)
                raise ModelLoadError(
                    f"{weights} does not match config.json in {part}: {len(miss)} missing keys "
                    f"{miss[:3]}, {len(extra)} unexpected {extra[:3]}")

    def _load_voice(self, path: Path):
        try:
            t = self._torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            raise ModelLoadError(f"cannot read voice {path}: {type(e).__name__}: {e}") from e
        if not hasattr(t, "shape") or t.shape[-1] != _STYLE_DIM or t.numel() % _STYLE_DIM:
            raise ModelLoadError(f"voice {path} has shape {tuple(getattr(t, 'shape', ()))}, "
                                 f"want (rows, 1, {_STYLE_DIM})")
        # Upstream packs are (510, 1, 256); one row is then the (1, 256) reference KModel takes.
        return t.float().reshape(-1, 1, _STYLE_DIM).to(self.device)

    def load_weights(self) -> None:
        config, weights, voices = resolve_model_files(self.settings.model_dir)
        try:
            # repo_id given so KModel does not warn; config and model paths keep it off the hub.
            self.model = self._KModel(repo_id="hexgrad/Kokoro-82M", config=str(config),
                                      model=str(weights)).to(self.device).eval()
        except Exception as e:  # missing hyperparameter, bad JSON, corrupt or foreign .pth: all 503
            raise ModelLoadError(f"cannot load KModel from {config} and {weights.name}: "
                                 f"{type(e).__name__}: {e}") from e
        self._check_state_dict(weights)
        self.weights_sha256 = _sha256(weights)
        self.style = {p.stem: self._load_voice(p) for p in voices}
        self.voices = tuple(sorted(self.style))
        # Same offline espeak path as the onnx backend: no spaCy model, no network.
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def prepare(self, text: str, voice: str, speed: float) -> Prepared:
        ps = self.g2p(text)
        # KModel drops phonemes outside its vocabulary; count what it will actually see, because
        # the context (MAX_TOKENS + 2 pads) and the style row both depend on that number.
        vocab = self.model.vocab
        ps = "".join(c for c in ps if c in vocab)[:MAX_TOKENS]
        return Prepared(payload=ps, voice=voice, speed=speed, n_tokens=len(ps))

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        out = []
        with self._torch.inference_mode():
            for p in batch:
                if not p.payload:
                    out.append(np.zeros(0, np.float32))
                    continue
                table = self.style[p.voice]
                ref = table[min(len(p.payload), len(table)) - 1]
                audio = self.model(p.payload, ref, p.speed)
                out.append(audio.float().cpu().numpy().ravel())
        return out
