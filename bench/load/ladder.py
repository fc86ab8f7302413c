"""The Q_max search: climb a schedule until a level breaks the SLO, then bisect on integers.

Pure: ``search`` takes a ``measure(concurrency) -> LadderLevel`` callable, so the policy is tested
without servers and the CLI plugs in a real load generator. A fixed ladder spends the same time on
every level (the reference held 8 levels x 240 s and still only knew 50 <= Q_max < 60); bracketing
then bisecting reaches an integer bracket in O(log) extra levels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the imports run where they are used, so --help stays light
    from speech.schema.artifacts import LadderLevel, RequestMix

from bench.errors import UsageError

# Short, medium and long sentences, so a "request" resembles what a voice agent sends.
MIX_SHORT = [
    "Hello, how can I help?",
    "Your order has shipped.",
    "Please hold for a moment.",
    "Thanks, that is all.",
]
MIX_MEDIUM = [
    "I found three appointments next week; the earliest one is Tuesday at nine in the morning.",
    "Your balance is forty two dollars and the next payment is due on the fifteenth of March.",
    "The weather in Seattle today is cloudy with light rain and a high of fifty four degrees.",
]
MIX_LONG = [
    "Thank you for calling. Before we continue, I need to confirm a few details about your account, "
    "including the billing address on file and the last four digits of the card you used for the "
    "most recent purchase, so that I can make the change you asked for safely.",
    "Here is a summary of today's meeting: the team agreed to ship the new onboarding flow next "
    "sprint, marketing will prepare the announcement, and support will update the help articles "
    "before the release goes live to all customers.",
]
MIXES = {
    "short": MIX_SHORT,
    # Weighted like conversational traffic: mostly short turns, some medium, a few long.
    "mixed": MIX_SHORT * 3 + MIX_MEDIUM * 2 + MIX_LONG,
    "long": MIX_LONG,
}


def request_mix(name: str) -> tuple[list[str], RequestMix]:
    from speech.schema.artifacts import RequestMix

    if name not in MIXES:
        raise UsageError(f"--mix {name!r}: choose one of {', '.join(MIXES)}")
    texts = MIXES[name]
    sizes = [len(t) for t in texts]
    return texts, RequestMix(
        name=name, chars_min=min(sizes), chars_mean=round(sum(sizes) / len(sizes), 2), chars_max=max(sizes), count=len(texts)
    )


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--levels {text!r}: use comma-separated integers, e.g. 1,2,4,8") from None
    if not levels or levels[0] < 1:
        raise UsageError(f"--levels {text!r}: levels must be integers >= 1")
    if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
        raise UsageError(f"--levels {text!r}: levels must strictly increase (e.g. 1,2,4,8)")
    if len(levels) > MAX_LEVELS or levels[-1] > MAX_LEVEL:
        raise UsageError(f"--levels: {len(levels)} level(s) up to {levels[-1]}; at most {MAX_LEVELS} levels, each "
                         f"<= {MAX_LEVEL:,} in flight (each level is a settle + measure window); pass fewer")
    return levels


MAX_LEVELS = 64
"""Most levels a ladder may have (a geometric ladder's --factor >= 1.05 stays under ~200 steps to
10,000 but keeps only distinct integer levels; an explicit list is bounded here)."""
MAX_LEVEL = 10_000


def geometric_levels(start: int, factor: float, max_level: int) -> list[int]:
    if start < 1:
        raise UsageError(f"--start {start}: must be >= 1")
    if factor <= 1:
        raise UsageError(f"--factor {factor}: must be > 1 so levels increase")
    if max_level < start:
        raise UsageError(f"--max-concurrency {max_level}: must be >= --start {start}")
    out: list[int] = []
    c = float(start)
    while round(c) <= max_level:
        lv = int(round(c))
        if not out or lv > out[-1]:
            out.append(lv)
        c *= factor
    return out


def bracket_ok(lo: int, hi: int, tolerance: float) -> bool:
    """Refinement is done when hi - lo is one step, or within ``tolerance`` x lo."""
    return hi - lo <= max(1, math.floor(tolerance * lo))


def refinement_steps(lo: int, hi: int, tolerance: float = 0.0) -> int:
    steps = 0
    while not bracket_ok(lo, hi, tolerance):
        lo = (lo + hi) // 2  # worst case for counting: every midpoint passes or fails alike
        steps += 1
    return steps


@dataclass
class Estimate:
    levels_min: int
    levels_max: int
    seconds_min: float
    seconds_max: float


def estimate(schedule: Sequence[int], per_level_s: float, tolerance: float = 0.0) -> Estimate:
    """Wall clock of a search: at least the first level (if it fails); at most every scheduled
    level plus a bisection of the widest gap the schedule can leave."""
    gaps = [refinement_steps(a, b, tolerance) for a, b in zip(schedule, schedule[1:], strict=False)]
    worst = len(schedule) + (max(gaps) if gaps else 0)
    return Estimate(1, worst, per_level_s, worst * per_level_s)


@dataclass
class SearchResult:
    levels: list[LadderLevel]
    q_max: int
    first_failing: int | None
    order: list[int] = field(default_factory=list)
    """Concurrency levels in the order they were measured."""

    @property
    def bracketed(self) -> bool:
        return self.first_failing is not None


def search(
    schedule: Sequence[int], measure: Callable[[int], LadderLevel], tolerance: float = 0.0, refine: bool = True
) -> SearchResult:
    """Climb ``schedule`` until a level misses the SLO, then bisect between the last passing and
    the first failing level until the bracket is one step (or within ``tolerance``)."""
    measured: dict[int, LadderLevel] = {}
    order: list[int] = []

    def run(c: int) -> bool:
        lv = measure(c)
        measured[c] = lv
        order.append(c)
        return lv.meets_slo

    lo, hi = 0, None
    for c in schedule:
        if run(c):
            lo = c
        else:
            hi = c
            break
    if hi is not None and refine:
        # Bisection below the first scheduled level too: Q_max may be 0 < q < schedule[0].
        while not bracket_ok(lo, hi, tolerance) and hi - lo > 1:
            mid = (lo + hi) // 2
            if mid < 1:
                break
            if run(mid):
                lo = mid
            else:
                hi = mid
    levels = [measured[c] for c in sorted(measured)]
    return SearchResult(levels=levels, q_max=lo, first_failing=hi, order=order)
