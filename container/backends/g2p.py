"""Offline G2P: misaki's espeak-ng mapping to Kokoro phonemes, espeak-ng from espeakng-loader.

No spaCy model and no network: espeak-ng's data ships inside the espeakng-loader wheel, with
every language Kokoro's non-English pipelines also read through espeak. Japanese and Mandarin
need misaki's own dictionaries (misaki[ja], misaki[zh]), which this image does not carry.
"""
from __future__ import annotations

from ..errors import BadRequest, ModelLoadError
from ..tags import IPA_TAG

# Kokoro's language letters (its voice names start with them; Kokoro-FastAPI's lang_code) -> the
# espeak-ng voice misaki maps from. Only the languages this image can phonemize.
LANG_CODES = {"a": "en-us", "b": "en-gb", "e": "es", "f": "fr-fr", "h": "hi", "i": "it", "p": "pt-br"}
# Kokoro letters whose G2P is not espeak: accepted (a client written for Kokoro-FastAPI must not
# break) and spoken with G2P_LANGUAGE, with a warning that says so.
NOT_IN_IMAGE = {"j": "Japanese (misaki[ja])", "z": "Mandarin Chinese (misaki[zh])"}
_ALIASES = {"en": "en-us", "en-us": "en-us", "en-gb": "en-gb", "es": "es", "fr": "fr-fr", "fr-fr": "fr-fr",
            "hi": "hi", "it": "it", "pt": "pt-br", "pt-br": "pt-br"}


def languages_line() -> str:
    return ", ".join(f"{k} ({v})" for k, v in LANG_CODES.items())


def resolve_lang(code: str | None) -> tuple[str | None, str | None]:
    """lang_code -> (espeak language or None for G2P_LANGUAGE, warning or None). A code that is
    neither Kokoro's nor an espeak name this image has is a BadRequest listing the ones it has."""
    if code is None or not code.strip():
        return None, None
    c = code.strip().lower().replace("_", "-")
    if c in LANG_CODES:
        return LANG_CODES[c], None
    if c in _ALIASES:
        return _ALIASES[c], None
    if c in NOT_IN_IMAGE or c in ("ja", "zh", "cmn"):
        what = NOT_IN_IMAGE.get(c[:1], c)
        return None, (f"lang_code {code!r}: {what} G2P is not in this image; spoke G2P_LANGUAGE. "
                      f"This image speaks {languages_line()}")
    raise BadRequest(f"lang_code {code[:20]!r} is not a language this image speaks; use one of "
                     f"{languages_line()}", param="lang_code")


class EspeakPhonemizer:
    """Text -> Kokoro phonemes; one misaki EspeakG2P per language, made on first use. Called
    from the engine's single G2P thread only (espeak-ng is not thread-safe)."""

    def __init__(self, language: str = "en-us"):
        try:
            from misaki.espeak import EspeakG2P
        except ImportError as e:
            raise ModelLoadError(
                f"G2P unavailable: {e}. Install misaki, phonemizer-fork and espeakng-loader "
                "(see container/requirements.txt)") from e
        self._cls = EspeakG2P
        self.language = language
        self._by_lang = {language: EspeakG2P(language=language)}

    def __call__(self, text: str, lang: str | None = None) -> str:
        """Phonemes of `text`; an inline [word](/ipa/) contributes its IPA as written."""
        if "](/" not in text:
            return self._espeak(text, lang)
        out: list[str] = []
        pos = 0
        for m in IPA_TAG.finditer(text):
            before = text[pos:m.start()]
            if before.strip():
                out.append(self._espeak(before, lang))
            out.append(m.group(2).strip())
            pos = m.end()
        if text[pos:].strip():
            out.append(self._espeak(text[pos:], lang))
        return " ".join(p for p in out if p)

    def _espeak(self, text: str, lang: str | None) -> str:
        lang = lang or self.language
        g2p = self._by_lang.get(lang)
        if g2p is None:
            g2p = self._by_lang[lang] = self._cls(language=lang)
        ps, _ = g2p(text)
        return ps or ""
