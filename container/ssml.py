"""SSML -> the inline tags the engine reads ([pause:Ns], [voice:name], [rate:x], [word](/ipa/)),
for `ssml: true` and POST /dev/ssml (Kokoro-FastAPI's subset, plus simple say-as).

Parsed with the standard library's ElementTree (expat); a document that declares a DOCTYPE or
entities is refused before parsing, so no entity expansion happens. Elements outside the subset
keep their text and lose their markup, as Kokoro-FastAPI does.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .errors import BadRequest
from .normalize_words import cardinal, digits, ordinal

# strength= of <break> in seconds (Kokoro-FastAPI's table; SSML 1.1 leaves the values to the engine).
BREAK_STRENGTH_S = {"none": 0.0, "x-weak": 0.0, "weak": 0.25, "medium": 0.5, "strong": 1.0, "x-strong": 1.5}
# rate= keywords of <prosody> as speed multipliers (Kokoro-FastAPI's table).
PROSODY_RATE = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
RATE_MIN, RATE_MAX = 0.25, 4.0
SAY_AS = ("characters", "spell-out", "digits", "telephone", "cardinal", "number", "ordinal")
ELEMENTS: dict[str, str] = {
    "speak": "root element, container only",
    "break": "silence from time= (s or ms) or strength=, becomes [pause:Ns]",
    "prosody": "rate= (keyword, percent or multiplier) for its content; pitch and volume are ignored",
    "voice": "name= speaks its content in that voice, then the voice before",
    "phoneme": "ph= with alphabet=ipa is spoken as given ([word](/ipa/))",
    "sub": "alias= is spoken instead of the text",
    "say-as": "interpret-as= characters/spell-out (letter by letter), digits/telephone (digit by "
              "digit), cardinal/number, ordinal; others keep the text for normalization",
    "desc": "dropped with its text (a description of audio, not speech)",
}
IGNORED = ("emphasis", "lang", "audio", "mark", "p", "s", "w", "token", "lexicon", "meta", "metadata")
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$", re.I)
_ROOT = re.compile(r"^(?:\s|<\?xml[^>]*\?>|<!--.*?-->)*<speak[\s>/]", re.S)
MAX_PAUSE_S = 10.0


def is_ssml(text: str) -> bool:
    return bool(_ROOT.match(text))


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower()


def _break_s(el: ET.Element) -> float:
    t = el.get("time")
    if t:
        m = _TIME.match(t)
        if m:
            v = float(m.group(1))
            return min(v / 1000 if m.group(2).lower() == "ms" else v, MAX_PAUSE_S)
    return BREAK_STRENGTH_S.get((el.get("strength") or "medium").lower(), 0.5)


def _rate(value: str) -> float:
    v = value.strip().lower()
    if v in PROSODY_RATE:
        return PROSODY_RATE[v]
    try:
        x = float(v[:-1]) / 100 if v.endswith("%") else float(v)
    except ValueError:
        return 1.0
    return min(max(x, RATE_MIN), RATE_MAX)


def _say_as(kind: str, text: str) -> str:
    t = text.strip()
    if kind in ("characters", "spell-out"):
        return " ".join(c for c in t if not c.isspace())
    if kind in ("digits", "telephone"):
        return ", ".join(digits(g) for g in re.split(r"[\s.\-()]+", t) if g) if kind == "telephone" else digits(t)
    num = t.replace(",", "")
    if kind in ("cardinal", "number") and re.fullmatch(r"-?\d+(?:\.\d+)?", num):
        return cardinal(num)
    if kind == "ordinal" and re.fullmatch(r"\d+(?:st|nd|rd|th)?", num):
        return ordinal(int(re.sub(r"\D", "", num)))
    return text


def _render(el: ET.Element, out: list[str], voice: str, rate: float) -> None:
    tag = _local(el.tag)
    if tag == "desc":
        out.append(el.tail or "")
        return
    if tag == "break":
        s = _break_s(el)
        if s > 0:
            out.append(f" [pause:{s:g}s] ")
        out.append(el.tail or "")
        return
    inner_voice, inner_rate = voice, rate
    if tag == "voice" and el.get("name"):
        inner_voice = el.get("name", "").strip()
    if tag == "prosody" and el.get("rate"):
        inner_rate = _rate(el.get("rate", ""))
    if tag == "phoneme" and el.get("ph") and (el.get("alphabet") or "ipa").lower() == "ipa":
        word = "".join(el.itertext()).strip() or "word"
        out.append(f" [{word}](/{el.get('ph', '').strip()}/) ")
        out.append(el.tail or "")
        return
    if tag == "sub" and el.get("alias") is not None:
        out.append(el.get("alias", ""))
        out.append(el.tail or "")
        return
    if tag == "say-as" and (el.get("interpret-as") or "").lower() in SAY_AS:
        out.append(_say_as((el.get("interpret-as") or "").lower(), "".join(el.itertext())))
        out.append(el.tail or "")
        return
    if inner_voice != voice:
        out.append(f" [voice:{inner_voice}] ")
    if inner_rate != rate:
        out.append(f" [rate:{inner_rate:g}] ")
    out.append(el.text or "")
    for child in el:
        _render(child, out, inner_voice, inner_rate)
    if inner_voice != voice:
        out.append(f" [voice:{voice}] ")
    if inner_rate != rate:
        out.append(f" [rate:{rate:g}] ")
    if tag in ("p", "s"):
        out.append(" ")
    out.append(el.tail or "")


def translate(text: str, voice: str = "") -> str:
    """SSML -> inline tags. Not SSML (no <speak> root): returned as given. A <voice> needs the
    request's own voice to switch back to: without one (`voice` empty) voice changes are dropped
    and their text kept. BadRequest for malformed SSML or a DOCTYPE/ENTITY declaration."""
    if re.search(r"<!(?:DOCTYPE|ENTITY)", text, re.I) and "<speak" in text:
        raise BadRequest("SSML with a DOCTYPE or ENTITY declaration is refused; send the <speak> element only",
                         param="input")
    if not is_ssml(text):
        return text
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as e:
        raise BadRequest(f"malformed SSML: {e}", param="input") from None
    out: list[str] = []
    _render(root, out, voice or "\0", 1.0)
    rendered = "".join(out)
    if not voice:
        rendered = re.sub(r"\[voice:[^\]]*\]", " ", rendered)
    return re.sub(r"[ \t]+", " ", rendered).strip()
