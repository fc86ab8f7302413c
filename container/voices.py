"""Voice names: OpenAI aliases, blends, and the canonical id the engine and backends see.

A voice spec is one voice (`jf_alpha`) or a blend of several with optional weights
(`jf_alpha(2)+jm_kumo(1)`; equal weights when none are given). Its canonical form names each voice
once, in the order given, with weights normalised to sum to 1 (`jf_alpha(0.6667)+jm_kumo(0.3333)`);
a single voice is its bare name. Backends that blend (Kokoro style vectors) take the weighted mean.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import BadRequest, UnknownVoice

# OpenAI's built-in voice names -> candidates, first available wins. Upstream Kokoro v1.0 English
# voices come first (a/b: American/British English; the torch backend serves them from the upstream
# layout, whose weight-cache build refuses a voices/ folder lacking any of them:
# speech/deploy/weights.py REQUIRED_VOICES), then the five Japanese voices of the packaged int8
# export (the onnx backend's only voices).
DEFAULT_OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    "alloy": ("af_alloy", "jf_alpha"),
    "ash": ("am_adam", "jm_kumo"),
    "ballad": ("bm_george", "jm_kumo"),
    "coral": ("af_heart", "jf_gongitsune"),
    "echo": ("am_echo", "jm_kumo"),
    "fable": ("bm_fable", "jf_nezumi"),
    "onyx": ("am_onyx", "jm_kumo"),
    "nova": ("af_nova", "jf_tebukuro"),
    "sage": ("af_sarah", "jf_nezumi"),
    "shimmer": ("af_sky", "jf_tebukuro"),
    "verse": ("am_michael", "jm_kumo"),
    "marin": ("af_bella", "jf_alpha"),
    "cedar": ("am_liam", "jm_kumo"),
}

# A blend's voice names: no '+' or '-' (the operators). A single voice whose name has a '-' still
# works: resolve_voice looks the whole string up first.
_NAME = r"[A-Za-z0-9_.]+"
_WEIGHT = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_TERM = re.compile(rf"\s*([+-]?)\s*({_NAME})\s*(?:\(\s*({_WEIGHT})\s*\))?\s*")
MAX_BLEND_PARTS = 8


@dataclass(frozen=True)
class VoiceSpec:
    """Voices and signed weights, in the order first given; the absolute weights sum to 1.
    A negative weight subtracts that voice's style (Kokoro-FastAPI's `a-b`)."""

    parts: tuple[tuple[str, float], ...]

    @property
    def is_blend(self) -> bool:
        return len(self.parts) > 1 or self.parts[0][1] != 1.0

    @property
    def canonical(self) -> str:
        if not self.is_blend:
            return self.parts[0][0]
        out = ""
        for i, (name, weight) in enumerate(self.parts):
            sign = "-" if weight < 0 else ("+" if i else "")
            out += f"{sign}{name}({abs(weight):.4f})"
        return out


def parse_voice_spec(spec: str) -> VoiceSpec:
    """`a`, `a+b`, `a(2)+b(1)`, `a-b`, `a(1)-b(0.3)` -> VoiceSpec; BadRequest naming the part
    that does not parse. As Kokoro-FastAPI: every weight (default 1) is divided by the sum of
    all weights, and a term after '-' is subtracted."""
    weights: dict[str, float] = {}
    pos, n = 0, 0
    while pos < len(spec):
        m = _TERM.match(spec, pos)
        if not m or m.end() == pos or (n == 0 and m.group(1) == "-") or (n and not m.group(1)):
            bad = spec[pos:pos + 40]
            raise BadRequest(f"voice {spec[:80]!r}: cannot read {bad!r}; write a name or a blend like "
                             f"'jf_alpha(2)+jm_kumo(1)' or 'jf_alpha-jm_kumo(0.3)'", param="voice")
        n += 1
        if n > MAX_BLEND_PARTS:
            raise BadRequest(f"a blend takes at most {MAX_BLEND_PARTS} voices", param="voice")
        name, w = m.group(2), float(m.group(3)) if m.group(3) else 1.0
        if not w > 0 or w == float("inf"):
            raise BadRequest(f"voice {spec[:80]!r}: weight of {name!r} must be a positive number", param="voice")
        weights[name] = weights.get(name, 0.0) + (-w if m.group(1) == "-" else w)
        pos = m.end()
    if not weights:
        raise BadRequest("voice is empty", param="voice")
    total = sum(abs(w) for w in weights.values())
    if total == 0:
        raise BadRequest(f"voice {spec[:80]!r}: the weights cancel out", param="voice")
    return VoiceSpec(tuple((name, w / total) for name, w in weights.items()))


def parse_alias_table(value) -> dict[str, tuple[str, ...]]:
    """OPENAI_VOICES: `alias=cand|cand,alias=cand` or a JSON object (values: a string or a list).
    Returns only the entries given; `effective_aliases` lays them over the defaults."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            value = json.loads(text)
        else:
            out: dict[str, tuple[str, ...]] = {}
            for entry in filter(None, (e.strip() for e in text.split(","))):
                alias, sep, cands = entry.partition("=")
                if not sep or not alias.strip() or not cands.strip():
                    raise ValueError(f"OPENAI_VOICES entry {entry!r} is not 'alias=voice|voice'")
                out[alias.strip().lower()] = tuple(c.strip() for c in cands.split("|") if c.strip())
            return out
    if not isinstance(value, dict):
        raise ValueError("OPENAI_VOICES must be 'alias=voice|voice,...' or a JSON object")
    out = {}
    for alias, cands in value.items():
        names = (cands,) if isinstance(cands, str) else tuple(cands)
        if not names or not all(isinstance(c, str) and c.strip() for c in names):
            raise ValueError(f"OPENAI_VOICES[{alias!r}] needs one or more voice names")
        out[str(alias).strip().lower()] = tuple(c.strip() for c in names)
    return out


def effective_aliases(overrides: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {**DEFAULT_OPENAI_VOICES, **overrides}


def preferred_voices(aliases: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """alias -> its first candidate: what it would speak with the full upstream voice set."""
    return {a: c[0] for a, c in aliases.items() if c}


PREFERRED_DEFAULT_VOICES = ("af_heart",)
"""The default voice when none is configured and the backend has it: upstream's own default and its
best-graded English voice (VOICES.md); otherwise the first voice in name order."""


def default_voice(available: tuple[str, ...], configured: str | None) -> str | None:
    if configured and configured in available:
        return configured
    preferred = next((v for v in PREFERRED_DEFAULT_VOICES if v in available), None)
    return preferred or (available[0] if available else None)


def _usable(spec: str, available: set[str], blends: bool) -> VoiceSpec | None:
    try:
        parsed = parse_voice_spec(spec)
    except BadRequest:
        return None
    if parsed.is_blend and not blends:
        return None
    return parsed if all(n in available for n, _ in parsed.parts) else None


def resolve_alias_table(aliases: dict[str, tuple[str, ...]], available: tuple[str, ...],
                        fallback: str | None, blends: bool) -> dict[str, str]:
    """alias -> the canonical voice it speaks on this backend (first usable candidate, else fallback)."""
    avail = set(available)
    out = {}
    for alias, cands in aliases.items():
        hit = next((p for p in (_usable(c, avail, blends) for c in cands) if p is not None), None)
        if hit is not None:
            out[alias] = hit.canonical
        elif fallback is not None:
            out[alias] = fallback
    return out


FULL_SET_HINT = ("to serve every upstream voice, give the server weights that have them: MODEL_DIR with "
                 "kokoro-onnx's kokoro-v1.0.int8.onnx and voices-v1.0.bin (CPU image) or the upstream "
                 "checkpoint (GPU image); see docs/container.md, 'Voices in the image'")


def closest_voice(name: str, available: tuple[str, ...]) -> str | None:
    """The voice to speak for a Kokoro voice name the weights lack: the same language and gender,
    else the same English family (a/b) and gender, else the same gender, else the first voice.
    None for a name outside Kokoro's naming (a typo gets a 400, not a guess)."""
    m = _KOKORO_NAME.match(name)
    if not m or not available:
        return None
    lang, gender = m.groups()
    kokoro = [(v, k) for v in available if (k := _KOKORO_NAME.match(v))]
    for same in (lambda k: k.group(1) == lang and k.group(2) == gender,
                 lambda k: k.group(1) in "ab" and lang in "ab" and k.group(2) == gender,
                 lambda k: k.group(2) == gender):
        hit = next((v for v, k in kokoro if same(k)), None)
        if hit is not None:
            return hit
    return available[0]


def resolve_voice(requested: str | None, *, available: tuple[str, ...], aliases: dict[str, str],
                  fallback: str | None, blends: bool, substitute: bool = False,
                  notes: list[str] | None = None, preferred: dict[str, str] | None = None) -> str | None:
    """What a request asked for -> the canonical voice id to synthesize with.

    None -> the default voice; an alias (case-insensitive) -> its table entry; else a voice or
    blend of this backend's voices. UnknownVoice/BadRequest name the value and what is accepted.
    `substitute`: a Kokoro name the weights lack speaks closest_voice(), and `notes` gets a
    sentence saying so; so does an alias whose `preferred` (first) voice is missing."""
    if requested is None:
        return fallback
    key = requested.strip().lower()
    alias = aliases.get(key)
    if alias is not None:
        want = (preferred or {}).get(key)
        if notes is not None and want and want != alias and want not in available:
            notes.append(f"voice {requested!r} speaks {alias} here: this image's weights lack {want}; {FULL_SET_HINT}")
        return alias
    if not available:  # a backend without named voices takes whatever it is given
        return requested
    if requested in available:  # a name with a '-' is a voice, not a subtraction
        return requested
    spec = parse_voice_spec(expand_aliases(requested, aliases))
    missing = [n for n, _ in spec.parts if n not in available]
    swaps = {n: closest_voice(n, available) for n in missing} if substitute else {}
    if missing and all(swaps.get(n) for n in missing):
        if notes is not None:
            notes.append("; ".join(f"voice {n!r} is not in this image, spoke {swaps[n]} (the closest it has)"
                                   for n in missing) + f"; {FULL_SET_HINT}")
        merged: dict[str, float] = {}
        for n, w in spec.parts:
            merged[swaps.get(n) or n] = merged.get(swaps.get(n) or n, 0.0) + w
        spec = VoiceSpec(tuple(merged.items())) if any(merged.values()) else spec
        missing = []
    if missing:
        kokoro = _KOKORO_NAME.match(missing[0])
        raise UnknownVoice(f"unknown voice {missing[0]!r}; use one of {', '.join(available)}, "
                           f"an alias ({', '.join(sorted(aliases))}) or a blend like 'a(2)+b(1)'"
                           + (f"; {FULL_SET_HINT}" if kokoro else ""),
                           param="voice", extra={"voices": list(available)})
    if spec.is_blend and not blends:
        raise BadRequest(f"voice {requested[:80]!r} is a blend; this backend does not blend voices",
                         param="voice")
    return spec.canonical


def expand_aliases(spec: str, aliases: dict[str, str]) -> str:
    """A blend whose parts name OpenAI voices ('alloy+echo') with each alias replaced by the
    single voice it speaks here (an alias that is itself a blend stays unknown)."""
    def sub(m: re.Match) -> str:
        hit = aliases.get(m.group(2).lower())
        if hit is None or not re.fullmatch(_NAME, hit):
            return m.group(0)
        return m.group(0).replace(m.group(2), hit, 1)
    return _TERM.sub(sub, spec)


# Kokoro's voice names say language and gender in their first two letters (af_heart: American
# English, female), as upstream's VOICES.md lists them; other names (the sine backend's) say neither.
KOKORO_LANGUAGES = {
    "a": "en-us", "b": "en-gb", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja",
    "p": "pt-br", "z": "zh",
}
_KOKORO_NAME = re.compile(r"^([abefhijpz])([fm])_[a-z0-9]+$")


def voice_info(name: str) -> dict:
    """{"id", "name", "language", "gender"} for GET /v1/audio/voices (None where not known)."""
    m = _KOKORO_NAME.match(name)
    return {"id": name, "name": name,
            "language": KOKORO_LANGUAGES[m.group(1)] if m else None,
            "gender": {"f": "female", "m": "male"}[m.group(2)] if m else None}


def voice_letter(voice: str | None, preferred: dict[str, str]) -> str | None:
    """Kokoro's language letter a voice's name implies (Kokoro-FastAPI's rule: its first letter;
    a blend: its first voice; an OpenAI name: the voice it names upstream); None outside Kokoro's
    naming."""
    if not voice:
        return None
    first = _TERM.match(voice.strip())
    name = first.group(2) if first else voice.strip()
    name = preferred.get(name.lower(), name)
    m = _KOKORO_NAME.match(name)
    return m.group(1) if m else None
