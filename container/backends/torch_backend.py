"""kokoro.KModel on torch (GPU instances). Weights from a local directory in the upstream layout:
MODEL_DIR/config.json, MODEL_DIR/kokoro-v1_0.pth (any *.pth), MODEL_DIR/voices/*.pt.
torch and kokoro are imported only here, so the CPU image never needs them."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelLoadError
from .base import MAX_TOKENS, Backend, Prepared
from .g2p import EspeakPhonemizer


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, settings):
        self.settings = settings

    def init_framework(self) -> None:
        try:
            import torch
            from kokoro import KModel
        except ImportError as e:
            raise ModelLoadError(f"BACKEND=torch needs torch and kokoro installed: {e}") from e
        self._torch, self._KModel = torch, KModel
        self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def load_weights(self) -> None:
        d = self.settings.model_dir
        if d is None or not Path(d).is_dir():
            raise ModelLoadError(f"BACKEND=torch needs MODEL_DIR with config.json, *.pth, voices/*.pt (got {d})")
        d = Path(d)
        config, weights, voices = d / "config.json", sorted(d.glob("*.pth")), sorted((d / "voices").glob("*.pt"))
        if not config.exists() or not weights or not voices:
            raise ModelLoadError(f"MODEL_DIR {d} lacks config.json, *.pth or voices/*.pt")
        torch = self._torch
        # repo_id given so KModel does not warn; config and model paths keep it off the hub.
        self.model = self._KModel(repo_id="hexgrad/Kokoro-82M", config=str(config),
                                  model=str(weights[0])).to(self.device).eval()
        self.style = {p.stem: torch.load(p, weights_only=True).to(self.device) for p in voices}
        self.voices = tuple(sorted(self.style))
        self.g2p = EspeakPhonemizer(self.settings.g2p_language)

    def prepare(self, text: str, voice: str, speed: float) -> Prepared:
        ps = self.g2p(text)[:MAX_TOKENS]
        return Prepared(payload=ps, voice=voice, speed=speed, n_tokens=len(ps))

    def infer(self, batch: list[Prepared], threads: int) -> list[np.ndarray]:
        out = []
        with self._torch.inference_mode():
            for p in batch:
                if not p.payload:
                    out.append(np.zeros(0, np.float32))
                    continue
                ref = self.style[p.voice][len(p.payload) - 1]
                audio = self.model(p.payload, ref, p.speed)
                out.append(audio.float().cpu().numpy().ravel())
        return out
