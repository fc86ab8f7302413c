"""The input boundary of every bench command: each number a flag takes is finite and inside a
stated range, each stack name a Pulumi stack name, each output directory one that can be made.

One table (:data:`RANGES`) holds the allowed range of every numeric flag, by flag name; the CLI
(:mod:`bench.cli.main`) wraps each subcommand's ``type=float``/``type=int`` argument with it after the
subcommand has declared its arguments, so a ``*_cmd.py`` keeps declaring plain ``type=float``.
A value outside its range is one line, exit 2, before anything is read or written:
the flag, the value, the range, what to do.

The ranges bound what a value may cost as well as what makes sense: a ladder's levels, a run's
rounds and a trace's length are all derived from flags, so their ranges keep every allocation
and loop small (``--factor`` >= 1.05 keeps a geometric ladder under ~200 levels, ``--starts``
<= 100 rounds, durations <= 7 days of 1 s steps).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from speech.cli import stack_name  # noqa: F401  (re-exported: --stack's type, the one rule in speech.stack.names)
from speech.schema.units import MAX_SURGE_RATIO

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    unit: str = ""
    lo_open: bool = False
    """``lo`` itself is refused (a rate or a duration must be > 0)."""
    hi_open: bool = False
    hint: str = ""
    """What to pass instead, e.g. ``e.g. --max-delay-s 900``."""

    def holds(self, x: float) -> bool:
        above = x > self.lo if self.lo_open else x >= self.lo
        below = x < self.hi if self.hi_open else x <= self.hi
        return above and below

    def text(self) -> str:
        lo = f"{_fmt(self.lo)} < x" if self.lo_open else f"{_fmt(self.lo)} <= x"
        hi = f"< {_fmt(self.hi)}" if self.hi_open else f"<= {_fmt(self.hi)}"
        return f"{lo} {hi}" + (f" {self.unit}" if self.unit else "")


def _fmt(x: float) -> str:
    return f"{int(x):,}".replace(",", "_") if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


POSITIVE_RPS = Range(0, 100_000, "requests/s", lo_open=True)
SLO = Range(1, 600_000, "ms", hint="the p95 TTFAB objective in milliseconds, e.g. --slo-ms 3000")
SURGE = Range(1, MAX_SURGE_RATIO, hi_open=True,
              hint=f"e.g. --surge-ratio 1.25 (at {MAX_SURGE_RATIO:g} the scale-in threshold reaches 0)")
DERATE = Range(0, 1, lo_open=True, hint="e.g. --qmax-derate 0.9")
INSTANCES = Range(1, 10_000, "instances")
CONCURRENCY = Range(1, 10_000, "requests in flight")
SETTLE = Range(0, 3_600, "s")
MEASURE = Range(0, 3_600, "s", lo_open=True)
POLL = Range(0, 600, "s", lo_open=True)
TIMEOUT = Range(0, DAY_S, "s", lo_open=True)
WAIT = Range(0, 3_600, "s")
SEED = Range(0, 2**32 - 1)

RANGES: dict[str, Range] = {
    # plan, copies, simulate, demo
    "--slo-share": Range(0, 1, lo_open=True, hi_open=True, hint="the share of requests within the SLO, e.g. --slo-share 0.995"),
    # tune: each simulated day costs about a quarter of a second on 2 cores
    "--train-days": Range(1, 50, "draws", hint="e.g. --train-days 5 (the old name of --draws)"),
    "--draws": Range(1, 50, "draws", hint="e.g. --draws 5"),
    "--holdout-days": Range(1, 30, "days", hint="e.g. --holdout-days 3"),
    "--jobs": Range(1, 256, "worker processes", hint="e.g. --jobs 4 (default: the cores)"),
    "--peak-rps": Range(0, 100_000, "requests/s", lo_open=True, hint="the busiest-hour rate, e.g. --peak-rps 500"),
    "--trough-rps": POSITIVE_RPS,
    "--slo-ms": SLO,
    "--surge-ratio": SURGE,
    "--qmax-derate": DERATE,
    "--min-instances": INSTANCES,
    "--max-instances": INSTANCES,
    "--min-copies": Range(0, 1_000, "copies"),
    "--margin": Range(0, 1, "(fraction of accelerator memory)", hi_open=True),
    "--max-delay-s": Range(0, WEEK_S, "s", lo_open=True,
                           hint="the acceptable completion delay of a batch request, e.g. --max-delay-s 900"),
    "--price-per-hour": Range(0, 1_000, "USD/h", lo_open=True),
    "--headroom-copies": Range(0, 1_000, "copies"),
    "--copies-fit": Range(1, 1_000, "copies"),
    "--seed": SEED,
    "--duration": Range(0, WEEK_S, "s", lo_open=True),
    # capacity
    "--delta-concurrency": Range(0, 100_000, "requests in flight", lo_open=True),
    "--t-copy-s": Range(0, DAY_S, "s", lo_open=True),
    "--t-total-s": Range(0, DAY_S, "s", lo_open=True),
    "--concurrency-per-copy": Range(0, 10_000, "requests in flight", lo_open=True),
    # qmax, validate, demo: the ladder
    "--start": CONCURRENCY,
    "--factor": Range(1.05, 16),
    "--max-concurrency": CONCURRENCY,
    "--tolerance": Range(0, 1, hi_open=True),
    "--settle-s": SETTLE,
    "--measure-s": MEASURE,
    "--cloudwatch-wait-s": WAIT,
    "--poll-s": POLL,
    "--pin-timeout-s": TIMEOUT,
    # ttotal, tcopy
    "--probe-concurrency": Range(0, 10_000, "requests in flight", hint="0 = no probe load"),
    "--recover-window-s": MEASURE,
    "--timeout-s": TIMEOUT,
    "--starts": Range(1, 100, "rounds"),
    "--load-concurrency": Range(0, 10_000, "requests in flight"),
    # replay, validate --live: the Locust engine (a worker is a process; a thousand is a big fleet)
    "--workers": Range(1, 1_000, "worker processes", hint="e.g. --workers 4 (default: the cores)"),
    "--expect-workers": Range(1, 1_000, "workers", hint="how many remote workers will connect, e.g. --expect-workers 4"),
    # thaw
    "--min": INSTANCES,
    "--max": INSTANCES,
}
DEFAULT_RANGE = Range(-1e9, 1e9)
"""Any numeric flag the table does not name: finite and within +-1e9 (a new flag still cannot
carry inf or nan into the plan math)."""


def _flag(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else (action.option_strings or [action.dest])[0]


def bounded(kind: type, flag: str, rng: Range):
    """An argparse ``type=``: parse as ``kind``, refuse nan, inf and values outside ``rng``."""

    def parse(text: str):
        # The message starts with "FLAG VALUE:"; the parser drops argparse's "argument FLAG:" before it.
        allowed = f"allowed {rng.text()}" + (f"; {rng.hint}" if rng.hint else "")
        try:
            value = kind(text)
        except (TypeError, ValueError):
            noun = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{flag} {text}: not {noun}; {allowed}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{flag} {text}: not a finite number; {allowed}")
        if not rng.holds(value):
            raise argparse.ArgumentTypeError(f"{flag} {text}: outside the allowed range {rng.text()}; "
                                             + (rng.hint or "pass a value inside it"))
        return value

    parse.__name__ = "number" if kind is float else "whole number"  # argparse names the type in its message
    return parse


# --- output directories ------------------------------------------------------------------------


def out_dir_problem(path: Path) -> str | None:
    """None when bench can write its artifacts into ``path`` (an existing directory, or one the
    first write can create), else why not (the OS's reason). Creates nothing that stays: a temp
    file is made and removed in ``path`` or, when it does not exist yet, in its nearest existing
    ancestor. Run before a command writes anything, so a refused directory leaves nothing half done."""
    import tempfile

    path = Path(path)
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} exists and is not a directory" if probe == path else f"cannot create {path}: {probe} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        reason = err.strerror or err.__class__.__name__
        return f"{path}: cannot write there ({reason})" if probe == path else f"cannot create {path}: {probe}: {reason}"
    return None
