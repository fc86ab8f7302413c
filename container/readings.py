"""The readings normalize.py chooses between where one written form has several: a year or a
count (2048 files), a range (5-10), a version (2.0.1), a slash (12/25, 50/50, $5/month), a
roman numeral (Chapter IV, Henry VIII), a service number (911); and the characters no English
voice should read aloud (markup, emoji, scripts English G2P spells as "Chinese letter").

Libraries do the parts a library does: `roman` parses numerals, `emoji` finds emoji (its table
follows Unicode's emoji data, which a character class would not), `regex` gives Unicode script
properties (\\p{Han}); num2words makes the words (normalize.cardinal / ordinal / year). What is
left here is the choice of reading, which no library makes: the rules and their cue words.
"""
from __future__ import annotations

import re

import emoji
import regex  # type: ignore[import-untyped]  # no stubs installed; Unicode script properties
import roman

from .normalize_words import cardinal, digits, ordinal, year
from .tags import CONTROL_TAG, IPA_TAG, PAUSE_TAG  # noqa: F401  (normalize and stage read them from here)

# ---- years and counts --------------------------------------------------------------------------

# A four-digit number is a year only where a year is meant: after one of these words, in a
# "from 1990 to 2000" pair, or before an era. Anywhere else it is a count ("2048 files" is
# "two thousand forty-eight files", not "twenty forty-eight").
_YEAR_CUES = ("in", "since", "by", "until", "till", "from", "through", "during", "before", "after",
              "around", "circa", "year", "early", "late", "mid", "spring", "summer", "autumn", "fall",
              "winter", "between", "of the year")
_YEAR_CUE = re.compile(rf"(?i)\b(?:{'|'.join(_YEAR_CUES)})[ ]$")
_FROM_TO = re.compile(r"(?i)\b(?:from|between) (?:1[1-9]\d\d|20\d\d) (?:to|and) $")
_ERA = re.compile(r"^\s?(?:AD|BC|BCE|CE|A\.D\.|B\.C\.)(?!\w)")
# A plural noun right after the number makes it a count even after a cue ("by 1500 points").
_PLURAL_AFTER = re.compile(r"^ (?!(?:was|is|has|his|its|this|us|as|thus|plus)\b)[a-z]+s\b")
YEAR_OR_COUNT = re.compile(r"(?<![\w.,$€£/:-])(1[1-9]\d\d|20\d\d)(?![\w,%]|\.\d)")


def year_or_count(m: re.Match) -> str:
    """1100-2099: a year after a cue word ("in 1999", "from 1990 to 2000") or before an era
    ("1066 AD"), unless a plural noun follows; otherwise a count ("2048 files")."""
    n = int(m.group(1))
    before, after = m.string[max(0, m.start() - 24):m.start()], m.string[m.end():]
    if _ERA.match(after):
        return year(n)
    if (_YEAR_CUE.search(before) or _FROM_TO.search(before)) and not _PLURAL_AFTER.match(after):
        return year(n)
    return cardinal(n)


# ---- ranges, versions, slashes -----------------------------------------------------------------

RANGE = re.compile(r"(?<![\w.\-/])(\d+(?:\.\d+)?)\s?[-–]\s?(\d+(?:\.\d+)?)(?![\w\-/]|\.\d)")


def range_words(m: re.Match) -> str:
    """5-10 -> "five to ten"; 1990-1995 -> "nineteen ninety to nineteen ninety-five" (both ends
    four-digit years). Dates (2025-12-01) and phone numbers are matched before this rule."""
    a, b = m.group(1), m.group(2)
    if all(re.fullmatch(r"1[1-9]\d\d|20\d\d", x) for x in (a, b)) and int(a) < int(b):
        return f"{year(int(a))} to {year(int(b))}"
    return f"{cardinal(a)} to {cardinal(b)}"


VERSION = re.compile(r"(?<![\w.])(\d+(?:\.\d+){2,})(?![\w]|\.\d)")


def version_words(m: re.Match) -> str:
    """2.0.1 -> "two point zero point one"; four parts of at most 255 are an IPv4 address, read
    with "dot" ("one ninety-two dot ..." would be wrong either way; "point" is for versions)."""
    parts = m.group(1).split(".")
    if len(parts) == 4 and all(int(p) <= 255 for p in parts):
        return " dot ".join(cardinal(int(p)) for p in parts)
    return " point ".join(cardinal(int(p)) for p in parts)


PER = re.compile(r"(?<=[\d%])\s?/\s?(?=[A-Za-z]+\b)")
"""$5/month, 60/hour, 10%/year: the slash between an amount and a word is "per"."""

SAME_BOTH_SIDES = re.compile(r"(?<![\w/.])(\d+)/(\1)(?![\w/]|\.\d)")


def same_both_sides(m: re.Match) -> str:
    """50/50 -> "fifty-fifty" (a split, not a fraction that equals one)."""
    w = cardinal(int(m.group(1)))
    return f"{w}-{w}"


MONTH_DAY = re.compile(r"(?<![\w/.])(\d{1,2})/(\d{1,2})(?![\w/]|\.\d)")
OVER = re.compile(r"(?<![\w/.])(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)(?![\w/]|\.\d)")


def over(m: re.Match) -> str:
    """What is left of number/number once dates and fractions are read: "a over b"."""
    return f"{cardinal(m.group(1))} over {cardinal(m.group(2))}"


# ---- phone numbers without an area code, service numbers ---------------------------------------

LOCAL_PHONE = re.compile(r"(?<![\w\-.])(\d{3})-(\d{4})(?![\w\-]|\.\d)")


def local_phone(m: re.Match) -> str:
    """555-1234 -> "five five five, one two three four" (a seven-digit local number)."""
    return f"{digits(m.group(1))}, {digits(m.group(2))}"


# N11 service codes are said digit by digit; 911 always (it is never read as a number in speech),
# the others after a dialling verb ("call 311" but "311 people").
SERVICE = re.compile(r"(?<![\w.,$])(?:(?i:(call|dial|dialed|dialled|dialing|text|phone) )([2-8]11)|(911))(?![\w,]|\.\d)")


def service(m: re.Match) -> str:
    if m.group(3):
        return digits(m.group(3))
    return f"{m.group(1)} {digits(m.group(2))}"


# ---- roman numerals ----------------------------------------------------------------------------

# Read as a cardinal after these words ("Chapter IV" is "Chapter four", "World War II" "two").
_CARDINAL_CUES = ("Chapter", "Part", "Book", "Volume", "Vol", "Act", "Scene", "Section", "Article", "Title",
                  "Appendix", "Phase", "Stage", "Level", "Round", "Episode", "Season", "Type", "Class",
                  "Category", "Step", "Unit", "War", "Bowl", "Rocky", "Star Wars Episode", "Grade", "Tier")
ROMAN_CARDINAL = re.compile(rf"\b({'|'.join(_CARDINAL_CUES)}) ([IVXLC]+)\b(?!['’]\w)")
# A capitalised name before a numeral of two letters or more is a regnal or generational number
# ("Henry VIII" is "Henry the eighth"). One letter (I, V, X) is left alone after a name: "Malcolm
# X" and the pronoun I would be misread.
ROMAN_REGNAL = re.compile(r"\b([A-Z][a-z]+) ([IVX]{2,})\b(?!['’]\w)")


def _roman_value(s: str) -> int | None:
    try:
        return roman.fromRoman(s)
    except roman.InvalidRomanNumeralError:
        return None


# Words after which a single letter is a grade or a kind, not a numeral ("Type C", "Class C").
_LETTER_KINDS = ("Type", "Class", "Category", "Grade", "Tier", "Level", "Unit", "Step")


def roman_cardinal(m: re.Match) -> str:
    cue, numeral = m.group(1), m.group(2)
    if len(numeral) == 1 and (numeral in "LC" or cue in _LETTER_KINDS):
        return m.group(0)  # "Type C" is a kind of connector, "Grade C" a mark
    n = _roman_value(numeral)
    return m.group(0) if n is None else f"{cue} {cardinal(n)}"


def roman_regnal(m: re.Match) -> str:
    n = _roman_value(m.group(2))
    if n is None or m.group(1) in _CARDINAL_CUES or n > 40:
        return m.group(0)
    return f"{m.group(1)} the {ordinal(n)}"


# ---- characters not to read aloud --------------------------------------------------------------

MARKUP = re.compile(r"<\?[^<>]*\?>|<!--.*?-->|</?[A-Za-z][\w:.-]*(?:\s+[^<>]*?)?/?>", re.S)
"""XML/HTML/SSML tags (<speak>, <break time="1s"/>, </p>): dropped, their text kept. `x < y`
is not a tag (no letter right after the <)."""


def strip_markup(text: str) -> str:
    return MARKUP.sub(" ", text)


def drop_emoji(text: str) -> str:
    """Emoji are not spoken ("pizza" from espeak's emoji table, with no word timestamps and a
    hole in the audio): removed, the text around them kept."""
    return emoji.replace_emoji(text, replace=" ")


# Scripts an English voice cannot read: espeak spells each character ("Chinese letter"). The
# name of the language and the voices (Kokoro's naming) that would read it.
FOREIGN_SCRIPTS: dict[str, tuple[str, str]] = {
    "Han": ("Chinese", "a Mandarin voice (zf_xiaobei, zf_xiaoni, zm_yunjian; lang_code z)"),
    "Hiragana": ("Japanese", "a Japanese voice (jf_alpha, jm_kumo; lang_code j)"),
    "Katakana": ("Japanese", "a Japanese voice (jf_alpha, jm_kumo; lang_code j)"),
    "Hangul": ("Korean", "none: Kokoro has no Korean voice"),
    "Thai": ("Thai", "none: Kokoro has no Thai voice"),
    "Arabic": ("Arabic", "none: Kokoro has no Arabic voice"),
    "Hebrew": ("Hebrew", "none: Kokoro has no Hebrew voice"),
    "Cyrillic": ("Russian or another Cyrillic language", "none: Kokoro has no Cyrillic voice"),
    "Devanagari": ("Hindi", "a Hindi voice (hf_alpha, hm_omega; lang_code h)"),
}
_FOREIGN = regex.compile("|".join(rf"\p{{Script={s}}}+" for s in FOREIGN_SCRIPTS))
_CJK_PUNCT = regex.compile(r"[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")


def foreign_scripts(text: str) -> list[str]:
    """The scripts in `text` an English voice cannot read, in FOREIGN_SCRIPTS' order."""
    return [s for s in FOREIGN_SCRIPTS if regex.search(rf"\p{{Script={s}}}", text)]


def drop_foreign(text: str) -> str:
    """Runs of those scripts (and the CJK punctuation around them) removed; the rest kept."""
    out = _FOREIGN.sub(" ", text)
    return _CJK_PUNCT.sub(" ", out) if out != text else out
