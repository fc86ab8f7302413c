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

A flag that sets a model's field takes the field's bound from :mod:`speech.schema.bounds`, the
one statement the pydantic model's ``Field`` is built from (:func:`from_bound`); the table adds
only a cost cap where the model leaves a side open (``--peak-rps`` <= 100_000).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from speech.cli import stack_name  # noqa: F401  (re-exported: --stack's type, the one rule in speech.stack.names)
from speech.schema import bounds as fields
from speech.schema.bounds import FieldBound
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


def from_bound(b: FieldBound, unit: str = "", *, cap: float | None = None, hint: str = "") -> Range:
    """The range of a flag that sets a model's field: the field's bound (the one its pydantic
    ``Field`` is built from), with ``cap`` as the upper end where the bound has none (what a value
    may cost)."""
    if b.lo is None or (b.hi is None and cap is None):
        raise ValueError(f"{b}: a flag's range needs both ends; pass cap")
    hi = b.hi if b.hi is not None else cap
    assert hi is not None
    return Range(b.lo, hi, unit, lo_open=b.lo_open, hi_open=b.hi is not None and b.hi_open, hint=hint)


RPS_CAP = 100_000.0
"""Cost cap of a rate flag (the model bounds it below only)."""
INSTANCES_CAP = 10_000
"""Cost cap of an instance count (the model bounds it below only)."""
SLO_MS_CAP = 600_000.0
"""Cost cap of an SLO (ten minutes; the model bounds it below only)."""

POSITIVE_RPS = from_bound(fields.RATE_RPS, "requests/s", cap=RPS_CAP)
SLO = from_bound(fields.SLO_MS, "ms", cap=SLO_MS_CAP, hint="the p95 TTFAB objective in milliseconds, e.g. --slo-ms 3000")
SURGE = from_bound(fields.SURGE_RATIO,
                   hint=f"e.g. --surge-ratio 1.25 (at {MAX_SURGE_RATIO:g} the scale-in threshold reaches 0)")
DERATE = from_bound(fields.QMAX_DERATE, hint="e.g. --qmax-derate 0.9")
INSTANCES = Range(1, INSTANCES_CAP, "instances")
CONCURRENCY = Range(1, 10_000, "requests in flight")
SETTLE = Range(0, 3_600, "s")
MEASURE = Range(0, 3_600, "s", lo_open=True)
POLL = Range(0, 600, "s", lo_open=True)
TIMEOUT = Range(0, DAY_S, "s", lo_open=True)
WAIT = Range(0, 3_600, "s")
SEED = Range(0, 2**32 - 1)

RANGES: dict[str, Range] = {
    # plan, copies, simulate, demo
    "--slo-share": from_bound(fields.SLO_SHARE, hint="the share of requests within the SLO, e.g. --slo-share 0.995"),
    # tune: each simulated day costs about a quarter of a second on 2 cores
    "--train-days": Range(1, 50, "draws", hint="e.g. --train-days 5 (the old name of --draws)"),
    "--draws": Range(1, 50, "draws", hint="e.g. --draws 5"),
    "--holdout-days": Range(1, 30, "days", hint="e.g. --holdout-days 3"),
    "--jobs": Range(1, 256, "worker processes", hint="e.g. --jobs 4 (default: the cores)"),
    "--peak-rps": from_bound(fields.RATE_RPS, "requests/s", cap=RPS_CAP, hint="the busiest-hour rate, e.g. --peak-rps 500"),
    "--trough-rps": POSITIVE_RPS,
    "--slo-ms": SLO,
    "--surge-ratio": SURGE,
    "--qmax-derate": DERATE,
    "--min-instances": from_bound(fields.MIN_INSTANCES, "instances", cap=INSTANCES_CAP),
    "--max-instances": from_bound(fields.MAX_INSTANCES, "instances", cap=INSTANCES_CAP),
    "--min-copies": from_bound(fields.MIN_COPIES, "copies", cap=1_000),
    "--margin": from_bound(fields.FOOTPRINT_MARGIN, "(fraction of accelerator memory)"),
    # plan: the tuned inputs (the plan then holds each to its own rule, e.g. target share <= 1 - h)
    "--target-share": from_bound(fields.TARGET_SHARE),
    "--scale-in-step-share": from_bound(fields.SCALE_IN_STEP_SHARE),
    "--scale-in-window-s": from_bound(fields.SCALE_IN_WINDOW_S, "s"),
    "--scale-in-cooldown-s": from_bound(fields.SCALE_IN_COOLDOWN_S, "s"),
    "--scale-out-cooldown-s": from_bound(fields.SCALE_OUT_COOLDOWN_S, "s"),
    "--max-delay-s": from_bound(fields.MAX_DELAY_S, "s", cap=WEEK_S,
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
