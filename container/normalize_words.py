"""Number words for normalize.py and readings.py: num2words' words in the American reading (no
"and" inside numbers, no commas), and digits said one by one."""
from __future__ import annotations

import re
from decimal import Decimal

from num2words import num2words


def cardinal(n: int | str) -> str:
    """US reading: no "and", no commas ("one thousand two hundred five"); decimals digit by digit
    after "point" ("three point one four")."""
    if isinstance(n, int):
        return _us(num2words(n))
    s = n.replace(",", "")
    return _us(num2words(Decimal(s) if "." in s else int(s)))


def _us(words: str) -> str:
    return re.sub(r"\s+", " ", words.replace(",", "").replace(" and ", " ")).strip()


def ordinal(n: int) -> str:
    return _us(num2words(n, to="ordinal"))


def year(n: int) -> str:
    """1999 -> nineteen ninety-nine, 2025 -> twenty twenty-five, 2005 -> two thousand five,
    1905 -> nineteen oh five."""
    return _us(num2words(n, to="year"))


_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def digits(s: str) -> str:
    """Each digit on its own ("five five five"), as phone numbers are read."""
    return " ".join(_DIGITS[int(c)] for c in s if c.isdigit())
