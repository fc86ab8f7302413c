"""Text normalization: the written forms a reader expands in their head ($5.50, 12/01/2025,
3:30 p.m., https://example.com, Dr. Smith, 45%) turned into the words to say, before G2P.

Both backends (onnx on the CPU image, torch on the GPU image) phonemize with espeak through the
same engine, and the engine normalizes every segment here first, so what is said does not depend
on the backend. Number words come from num2words (already in the image: misaki depends on it);
this module only finds the written forms and chooses the reading (a date, a price, a time).
The switches are Kokoro-FastAPI's `normalization_options` (protocol.NormalizationOptions): the
master `normalize`, and one per family (urls, emails, phone numbers, units, "(s)", symbols).

English only: for other G2P languages the engine skips this step and espeak reads digits in
that language itself. Every rule is in `_RULES`, applied in order; the order matters (an email
before a URL, a price before a bare number, a date before a fraction).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Protocol

from . import readings as rd
from .normalize_words import cardinal, digits, ordinal, year


class Options(Protocol):
    """What normalize() reads (protocol.NormalizationOptions has these fields)."""

    normalize: bool
    unit_normalization: bool
    url_normalization: bool
    email_normalization: bool
    optional_pluralization_normalization: bool
    phone_normalization: bool
    replace_remaining_symbols: bool


class _Defaults:
    """Kokoro-FastAPI's defaults: everything on except units."""

    normalize = True
    unit_normalization = False
    url_normalization = True
    email_normalization = True
    optional_pluralization_normalization = True
    phone_normalization = True
    replace_remaining_symbols = True


DEFAULTS: Options = _Defaults()

# ---- rules -------------------------------------------------------------------------------------

_NUM = r"\d{1,3}(?:,\d{3})+|\d+"  # 1,234,567 or 1234567


def _num_words(s: str) -> str:
    """A written number (separators, decimals, sign) -> words."""
    s = s.replace(",", "")
    neg = s.startswith("-")
    s = s.lstrip("-+")
    try:
        value = Decimal(s)
    except InvalidOperation:
        return s
    words = cardinal(s) if "." in s else cardinal(int(value))
    return f"minus {words}" if neg else words


_OPTIONAL_PLURAL = re.compile(r"(?<=[A-Za-z])\(s\)")

_EMAIL = re.compile(r"(?<![\w.+-])([A-Za-z0-9][\w.+-]*)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?![\w@])")
_URL_CHARS = {".": " dot ", "/": " slash ", "-": " dash ", "_": " underscore ", "?": " question mark ",
              "=": " equals ", "&": " and ", ":": " colon ", "#": " hash ", "%": " percent ", "~": " tilde ",
              "+": " plus ", "@": " at "}
_TLDS = ("com|org|net|edu|gov|io|ai|dev|app|co|uk|us|de|fr|jp|ca|au|info|biz|me|tv|ly|gg|xyz|tech|cloud")
_URL = re.compile(rf"""(?xi)
    (?<![\w@/])
    (?:(?:https?|ftp)://[^\s<>"']+          # with a scheme: everything up to whitespace
      | www\.[^\s<>"']+                      # www.example.com/...
      | [a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:{_TLDS})(?::\d+)?(?:/[^\s<>"']*)?  # example.com/path
    )(?<![.,;:!?)\]'"])""")


def _spell_url_part(part: str) -> str:
    out = []
    for c in part:
        out.append(_URL_CHARS.get(c, c))
    return "".join(out)


def _url(m: re.Match) -> str:
    url = m.group(0)
    url = re.sub(r"^(?i:https?|ftp)://", "", url)
    url = url.rstrip("/")
    www = url.lower().startswith("www.")
    if www:
        url = url[4:]
    spoken = _spell_url_part(url)
    return re.sub(r"\s+", " ", ("w w w dot " if www else "") + spoken).strip()


def _email(m: re.Match) -> str:
    return re.sub(r"\s+", " ", f"{_spell_url_part(m.group(1))} at {_spell_url_part(m.group(2))}").strip()


# +1 (555) 123-4567, 555-123-4567, 555.123.4567, (555) 123 4567; +44 20 7946 0958
_PHONE_US = re.compile(r"(?<![\w+])(\+?1[\s.-]?)?\(?(\d{3})\)?[\s.-]?(\d{3})[\s.-](\d{4})(?![\w-])")
_PHONE_INTL = re.compile(r"(?<![\w+])\+(\d{1,3})((?:[\s.-]\d{1,4}){2,5})(?![\w-])")


def _phone_us(m: re.Match) -> str:
    parts = [digits(g) for g in m.groups()[1:]]
    lead = "plus one, " if m.group(1) and "1" in m.group(1) else ""
    return lead + ", ".join(parts)


def _phone_intl(m: re.Match) -> str:
    groups = [g for g in re.split(r"[\s.-]+", m.group(2)) if g]
    return f"plus {digits(m.group(1))}, " + ", ".join(digits(g) for g in groups)


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_MONTH_ABBR = {m[:3].lower(): m for m in _MONTHS} | {"sept": "September"}


def _date_words(month: int, day: int, yr: int | None) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    out = f"{_MONTHS[month - 1]} {ordinal(day)}"
    return f"{out}, {year(yr)}" if yr is not None else out


def _full_year(y: str) -> int:
    n = int(y)
    return n if len(y) == 4 else (2000 + n if n < 50 else 1900 + n)


_DATE_SLASH = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_DATE_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_MONTH_NAME = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS), "Sept"])
_DATE_NAMED = re.compile(rf"\b({_MONTH_NAME})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?")


def _date_slash(m: re.Match) -> str:
    a, b, y = int(m.group(1)), int(m.group(2)), _full_year(m.group(3))
    # US order (month/day) unless the first number cannot be a month.
    month, day = (a, b) if a <= 12 else (b, a)
    return _date_words(month, day, y) or m.group(0)


def _date_iso(m: re.Match) -> str:
    return _date_words(int(m.group(2)), int(m.group(3)), int(m.group(1))) or m.group(0)


def _date_named(m: re.Match) -> str:
    month = _MONTH_ABBR[m.group(1)[:4].lower() if m.group(1).lower().startswith("sept") else m.group(1)[:3].lower()]
    words = _date_words(_MONTHS.index(month) + 1, int(m.group(2)), int(m.group(3)) if m.group(3) else None)
    return words or m.group(0)


# 3:30 pm, 3:30PM, 14:05, 3 p.m., 11am, 9:00:15
_AMPM = r"([AaPp])\.?\s?[Mm]\b\.?"
_TIME_HM = re.compile(rf"(?<![\d:])(\d{{1,2}}):(\d{{2}})(?::(\d{{2}}))?(?:\s?{_AMPM})?(?![\d:])")
_TIME_H = re.compile(rf"(?<![\d:.,])(\d{{1,2}})\s?{_AMPM}")


def _ampm(letter: str | None, matched: str, text: str, end: int) -> str:
    if not letter:
        return ""
    # "at 3 p.m." ending the text keeps its full stop (the abbreviation's dot doubles as it).
    stop = "." if matched.endswith(".") and text[end:].strip() == "" else ""
    # "AM": espeak reads the pair as letters ("A M"); "a m" would be the article "uh" and "em".
    return f" {letter.upper()}M{stop}"


def _time_hm(m: re.Match) -> str:
    h, mi, sec, ap = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    if h > 24 or mi > 59:
        return m.group(0)
    hour = cardinal(h)
    if mi == 0:
        words = hour if ap else (f"{hour} hundred" if h > 12 or m.group(1).startswith("0") else f"{hour} o'clock")
    elif mi < 10:
        words = f"{hour} oh {cardinal(mi)}"
    else:
        words = f"{hour} {cardinal(mi)}"
    if sec and int(sec):
        words += f" and {cardinal(int(sec))} second{'s' if int(sec) != 1 else ''}"
    return words + _ampm(ap, m.group(0), m.string, m.end())


def _time_h(m: re.Match) -> str:
    h = int(m.group(1))
    if not 1 <= h <= 12:
        return m.group(0)
    return cardinal(h) + _ampm(m.group(2), m.group(0), m.string, m.end())


_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "sen", "sen"),
               "₹": ("rupee", "rupees", "paisa", "paise")}
_SCALES = {"k": "thousand", "thousand": "thousand", "m": "million", "mn": "million", "million": "million",
           "b": "billion", "bn": "billion", "billion": "billion", "t": "trillion", "trillion": "trillion"}
_MONEY = re.compile(rf"(-)?([$€£¥₹])\s?({_NUM})(\.\d+)?(?:\s?(thousand|million|billion|trillion|mn|bn|[kKmMbBtT])\b)?")


def _money(m: re.Match) -> str:
    neg, sym, whole, frac, scale = m.groups()
    one, many, sub_one, sub_many = _CURRENCIES[sym]
    sign = "minus " if neg else ""
    if scale:
        amount = _num_words(whole + (frac or ""))
        return f"{sign}{amount} {_SCALES[scale.lower()]} {many}"
    units = int(whole.replace(",", ""))
    if frac and len(frac) > 3:  # $0.005: not a price in cents, read the number
        return f"{sign}{_num_words(whole + frac)} {many}"
    cents = int((frac[1:] + "0")[:2]) if frac else 0
    parts = []
    if units or not cents:
        parts.append(f"{cardinal(units)} {one if units == 1 else many}")
    if cents:
        parts.append(f"{cardinal(cents)} {sub_one if cents == 1 else sub_many}")
    return sign + " and ".join(parts)


_PERCENT = re.compile(rf"(?<![\w.])(-?(?:{_NUM})(?:\.\d+)?)\s?%")

# Units (Kokoro-FastAPI's unit_normalization, off by default): symbol -> (singular, plural).
# Short symbols that are also words or letters ("in", "m", "s", "h", "g", "l") count only when
# written against the number ("5m", "3in"), never after a space ("5 in the morning").
_UNITS = {
    "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "PB": ("petabyte", "petabytes"), "kB": ("kilobyte", "kilobytes"),
    "Kb": ("kilobit", "kilobits"), "Mb": ("megabit", "megabits"), "Gb": ("gigabit", "gigabits"),
    "Kbps": ("kilobit per second", "kilobits per second"), "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"), "lb": ("pound", "pounds"),
    "lbs": ("pounds", "pounds"), "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "mi": ("mile", "miles"),
    "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"), "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"), "min": ("minute", "minutes"), "hr": ("hour", "hours"), "hrs": ("hours", "hours"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"),
    "kW": ("kilowatt", "kilowatts"), "kWh": ("kilowatt hour", "kilowatt hours"), "W": ("watt", "watts"),
    "V": ("volt", "volts"), "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "m": ("meter", "meters"), "g": ("gram", "grams"), "s": ("second", "seconds"), "h": ("hour", "hours"),
    "l": ("liter", "liters"), "L": ("liter", "liters"), "in": ("inch", "inches"),
}
_TIGHT_ONLY = {"m", "g", "s", "h", "l", "L", "in", "W", "V", "min", "sec", "mi"}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_UNIT = re.compile(rf"(?<![\w.])(-?(?:{_NUM})(?:\.\d+)?)(\s?)({_UNIT_ALT})(?![\w/])")


def _unit(m: re.Match) -> str:
    number, space, unit = m.groups()
    if space and unit in _TIGHT_ONLY:
        return m.group(0)
    one, many = _UNITS[unit]
    value = number.replace(",", "")
    return f"{_num_words(number)} {one if value.lstrip('-') in ('1', '1.0') else many}"


_FRACTION = re.compile(r"(?<![\w/.])(\d)/(\d{1,2})(?![\w/]|\.\d)")
_HALVES = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _fraction(m: re.Match) -> str:
    num, den = int(m.group(1)), int(m.group(2))
    if not 0 < num < den <= 10:
        return m.group(0)
    one, many = _HALVES.get(den, (ordinal(den), ordinal(den) + "s"))
    return f"{cardinal(num)} {one if num == 1 else many}"


_ORDINAL = re.compile(r"(?<![\w.])(\d+)(st|nd|rd|th)\b")
_NUMBER = re.compile(rf"(?<![\w.])(?:(?<=\s)-|^-)?(?:{_NUM})(?:\.\d+)?(?![\w%]|\.\d|,\d)")
_DECADE = re.compile(r"(?<![\w])(1[1-9]|20)(\d)0s\b")


def _decade(m: re.Match) -> str:
    words = year(int(m.group(1) + m.group(2) + "0"))
    return re.sub(r"y$", "ies", words) if words.endswith("y") else words + "s"


# Abbreviations read as words. (pattern, replacement or a function of the match)
_TITLE_NEXT = r"(?=\s+[A-Z])"
_ABBREVIATIONS: list[tuple[re.Pattern, str | Callable[[re.Match], str]]] = [
    (re.compile(rf"\bDr\.{_TITLE_NEXT}"), "Doctor"),
    (re.compile(r"(?<=[a-z] )Dr\.|(?<=[A-Z][a-z] )Dr\."), "Drive"),
    (re.compile(r"\bDr\."), "Doctor"),
    (re.compile(rf"\bSt\.{_TITLE_NEXT}"), "Saint"),
    (re.compile(r"\bSt\."), "Street"),
    (re.compile(r"\bMrs\."), "Missus"), (re.compile(r"\bMr\."), "Mister"), (re.compile(r"\bMs\."), "Miz"),
    (re.compile(r"\bProf\."), "Professor"), (re.compile(r"\bJr\."), "Junior"), (re.compile(r"\bSr\."), "Senior"),
    (re.compile(r"\bGen\."), "General"), (re.compile(r"\bCapt\."), "Captain"), (re.compile(r"\bSgt\."), "Sergeant"),
    (re.compile(r"\bLt\."), "Lieutenant"), (re.compile(r"\bRev\."), "Reverend"), (re.compile(r"\bMt\."), "Mount"),
    (re.compile(r"\bAve\."), "Avenue"), (re.compile(r"\bBlvd\."), "Boulevard"), (re.compile(r"\bRd\."), "Road"),
    (re.compile(r"\bInc\."), "Incorporated"), (re.compile(r"\bLtd\."), "Limited"), (re.compile(r"\bCorp\."), "Corporation"),
    (re.compile(r"\bDept\."), "Department"), (re.compile(r"\bapprox\.", re.I), "approximately"),
    (re.compile(r"\bvs\.?(?=\s)", re.I), "versus"), (re.compile(r"\betc\."), "et cetera"),
    (re.compile(r"\be\.g\.(?=[\s,])", re.I), "for example"), (re.compile(r"\bi\.e\.(?=[\s,])", re.I), "that is"),
    (re.compile(r"\bNo\.(?=\s?\d)"), "number"), (re.compile(r"\bno\.(?=\s?\d)"), "number"),
    (re.compile(r"\bFig\.(?=\s?\d)"), "figure"), (re.compile(r"\bVol\.(?=\s?\d)"), "volume"),
    (re.compile(r"\bU\.S\.A\.(?=\s|$)"), "U S A"), (re.compile(r"\bU\.S\.(?=\s|$)"), "U S"),
    (re.compile(r"\bU\.K\.(?=\s|$)"), "U K"),
]
_MONTH_ABBR_DOT = re.compile(r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.(?=\s)")

_SYMBOLS = {"&": " and ", "@": " at ", "+": " plus ", "=": " equals ", "%": " percent ", "#": " number ",
            "$": " dollars ", "€": " euros ", "£": " pounds ", "°": " degrees ", "~": " about ",
            "^": " ", "*": " ", "_": " ", "|": " ", "\\": " ", "<": " less than ", ">": " greater than ",
            "/": " slash "}
_SYMBOL = re.compile(r"(?<=\d)/(?=\d)|[&@+=%#$€£°~^*_|\\<>/]")


def _symbol(m: re.Match) -> str:
    return " over " if m.group(0) == "/" and m.start() > 0 and m.string[m.start() - 1].isdigit() else _SYMBOLS[m.group(0)]


def _keep_final_stop(replacement: str) -> Callable[[re.Match], str]:
    """An abbreviation whose dot also ends the text keeps that full stop ("... etc." stays a
    statement, not a question of intonation)."""
    def sub(m: re.Match) -> str:
        tail = "." if m.group(0).endswith(".") and m.string[m.end():].strip() == "" else ""
        return replacement + tail
    return sub


def _safe(repl: str | Callable[[re.Match], str]) -> Callable[[re.Match], str]:
    """A rule that fails on a match (a number too large for num2words, say) leaves that match
    as written: espeak reads it, and a request never fails for its text."""
    if isinstance(repl, str):
        return lambda m: m.expand(repl)

    def sub(m: re.Match) -> str:
        try:
            return repl(m)
        except (ArithmeticError, ValueError, KeyError, IndexError):
            return m.group(0)
    return sub


def _sub(pattern: re.Pattern, repl: str | Callable[[re.Match], str], text: str) -> str:
    return pattern.sub(_safe(repl), text)


def normalize(text: str, options: Options | None = None) -> str:
    """The words to say for `text` under `options` (Kokoro-FastAPI's normalization_options;
    None: its defaults). `normalize=False` returns the text unchanged."""
    o = options or DEFAULTS
    if not o.normalize or not text:
        return text
    t = text
    # An email or URL whose rule is off stays exactly as written: set aside behind a private-use
    # placeholder so the later rules (numbers, symbols) cannot rewrite part of it.
    kept: list[str] = []

    def keep(m: re.Match) -> str:
        kept.append(m.group(0))
        return f"\ue000{chr(0xE100 + len(kept) - 1)}"

    # Inline IPA ("[Kokoro](/kˈOkəɹO/)") is spoken as given by G2P: no rule may touch it.
    t = _sub(rd.IPA_TAG, keep, t)
    t = rd.drop_foreign(rd.drop_emoji(rd.strip_markup(t)))
    if o.optional_pluralization_normalization:
        t = _sub(_OPTIONAL_PLURAL, "s", t)
    t = _sub(_EMAIL, _email if o.email_normalization else keep, t)
    t = _sub(_URL, _url if o.url_normalization else keep, t)
    if o.phone_normalization:
        t = _sub(_PHONE_INTL, _phone_intl, t)
        t = _sub(_PHONE_US, _phone_us, t)
        t = _sub(rd.LOCAL_PHONE, rd.local_phone, t)
    t = _sub(rd.SERVICE, rd.service, t)
    for pattern, repl in _ABBREVIATIONS:
        t = _sub(pattern, _keep_final_stop(repl) if isinstance(repl, str) else repl, t)
    t = _sub(_DATE_ISO, _date_iso, t)
    t = _sub(_DATE_SLASH, _date_slash, t)
    t = _sub(rd.VERSION, rd.version_words, t)
    # Slashes, most specific first: "per" before a word, 50/50, a fraction, a month/day, "over".
    t = _sub(rd.PER, " per ", t)
    t = _sub(rd.SAME_BOTH_SIDES, rd.same_both_sides, t)
    t = _sub(_FRACTION, _fraction, t)
    t = _sub(rd.MONTH_DAY, lambda m: _date_words(int(m.group(1)), int(m.group(2)), None) or m.group(0), t)
    t = _sub(rd.OVER, rd.over, t)
    t = _sub(_DATE_NAMED, _date_named, t)
    t = _sub(_MONTH_ABBR_DOT, lambda m: _MONTH_ABBR[m.group(1)[:3].lower()], t)
    t = _sub(_TIME_HM, _time_hm, t)
    t = _sub(_TIME_H, _time_h, t)
    t = _sub(_MONEY, _money, t)
    t = _sub(_PERCENT, lambda m: f"{_num_words(m.group(1))} percent", t)
    t = _sub(rd.RANGE, rd.range_words, t)
    if o.unit_normalization:
        t = _sub(_UNIT, _unit, t)
    t = _sub(_ORDINAL, lambda m: ordinal(int(m.group(1))), t)
    t = _sub(_DECADE, _decade, t)
    t = _sub(rd.ROMAN_CARDINAL, rd.roman_cardinal, t)
    t = _sub(rd.ROMAN_REGNAL, rd.roman_regnal, t)
    t = _sub(rd.YEAR_OR_COUNT, rd.year_or_count, t)
    t = _sub(_NUMBER, lambda m: _num_words(m.group(0)), t)
    if o.replace_remaining_symbols:
        t = _sub(_SYMBOL, _symbol, t)
    if kept:
        t = re.sub("\ue000(.)", lambda m: kept[ord(m.group(1)) - 0xE100], t)
    return re.sub(r"[ \t]+", " ", re.sub(r" +([,.!?;:])", r"\1", t)).strip()
