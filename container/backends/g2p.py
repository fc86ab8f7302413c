"""Offline English G2P: misaki's espeak-ng mapping to Kokoro phonemes, espeak-ng from espeakng-loader.

No spaCy model and no network: espeak-ng's data ships inside the espeakng-loader wheel.
"""
from __future__ import annotations

from ..errors import ModelLoadError


class EspeakPhonemizer:
    def __init__(self, language: str = "en-us"):
        try:
            from misaki.espeak import EspeakG2P
        except ImportError as e:
            raise ModelLoadError(
                f"G2P unavailable: {e}. Install misaki, phonemizer-fork and espeakng-loader "
                "(see container/requirements.txt)") from e
        self._g2p = EspeakG2P(language=language)

    def __call__(self, text: str) -> str:
        ps, _ = self._g2p(text)
        return ps or ""
