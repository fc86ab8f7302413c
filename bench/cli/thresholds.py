"""``--threshold 'METRIC OP VALUE'``: pass/fail criteria a CI job gates on, judged on a command's
summary after the run (k6's thresholds, Locust's --exit-code-on-error, genai-perf's goodput
constraints).

Every measuring or simulating command declares its metrics (:class:`Metric`: name with its unit,
what it is); ``--threshold`` is repeatable and parsed at the command line, so a typo in a metric
name or an operator is exit 2 before anything runs. After the run, :func:`judge` compares each
threshold with the command's summary; any broken threshold makes the run exit
:data:`EXIT_THRESHOLD` (3, distinct from 1: a stop finding or failed check, and 2: bad input),
naming the threshold, the measured value and by how much it missed, in text on stderr and under
``--json`` as a ``thresholds`` list beside the command's own output.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

EXIT_THRESHOLD = 3
"""A run that worked but broke at least one --threshold."""

OPS = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>|=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(%?)\s*$")


@dataclass(frozen=True)
class Metric:
    name: str
    """With its unit in the name (``ttfab_p95_ms``, ``within_slo_share``, ``q_max``)."""
    help: str


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    value: float
    text: str
    """As the user wrote it."""

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Verdict:
    threshold: Threshold
    actual: float | None
    """The summary's value; None: the run produced none (e.g. no request answered: no p95)."""
    passed: bool
    miss: float | None
    """How far the actual value is on the wrong side of the limit (absolute, in the metric's unit); 0
    when passed; None when there was no value."""

    def line(self) -> str:
        t = self.threshold
        if self.actual is None:
            return f"[FAIL] {t}: no value ({t.metric} was not measured in this run)"
        mark = "ok  " if self.passed else "FAIL"
        head = f"[{mark}] {t}: {t.metric} = {_num(self.actual)}"
        if self.passed:
            return head
        return head + (f", misses by {_num(self.miss)}" if self.miss else ", on the wrong side of the limit")

    def as_json(self) -> dict:
        t = self.threshold
        return {"threshold": t.text, "metric": t.metric, "op": t.op, "value": t.value, "actual": self.actual,
                "passed": self.passed, "miss": self.miss}


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.6g}"


def parser_for(metrics: Sequence[Metric]):
    """An argparse ``type=`` for one --threshold of a command with these metrics."""
    names = {m.name for m in metrics}

    def parse(text: str) -> Threshold:
        m = _RE.match(text)
        if not m:
            raise argparse.ArgumentTypeError(
                f"--threshold {text!r}: not METRIC OP VALUE; e.g. --threshold 'within_slo_share>=0.995' "
                f"(OP one of {', '.join(OPS)}; metrics: {', '.join(sorted(names))})")
        metric, op, value, pct = m.groups()
        if metric not in names:
            near = [n for n in sorted(names) if metric.lower() in n or n in metric.lower()]
            raise argparse.ArgumentTypeError(
                f"--threshold {text!r}: no metric {metric!r} in this command"
                + (f" (did you mean {', '.join(near)}?)" if near else "") + f"; metrics: {', '.join(sorted(names))}")
        number = float(value) / (100.0 if pct else 1.0)
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"--threshold {text!r}: {value} is not a finite number")
        return Threshold(metric=metric, op="==" if op == "=" else op, value=number, text=text.strip())

    parse.__name__ = "threshold"
    return parse


def add_threshold_argument(p: argparse.ArgumentParser, metrics: Sequence[Metric]) -> None:
    """``--threshold`` (repeatable) with the command's metrics listed in its help."""
    listed = "; ".join(f"{m.name} ({m.help})" for m in metrics).replace("%", "%%")  # argparse %-formats help
    p.add_argument("--threshold", action="append", default=[], type=parser_for(metrics), metavar="'METRIC OP VALUE'",
                   help=f"fail the run (exit {EXIT_THRESHOLD}) unless METRIC OP VALUE holds on its summary; repeatable; "
                        "OP one of <, <=, >, >=, ==, !=; a share may be written as a percentage (99.5%%). "
                        f"Metrics: {listed}")


def judge(thresholds: Sequence[Threshold], summary: Mapping[str, float | int | bool | None]) -> list[Verdict]:
    """Each threshold against the summary; a metric with no value (None, nan) breaks its threshold."""
    out = []
    for t in thresholds:
        raw = summary.get(t.metric)
        actual = None if raw is None else float(raw)
        if actual is None or not math.isfinite(actual):
            out.append(Verdict(t, None, False, None))
            continue
        ok = OPS[t.op](actual, t.value)
        miss = 0.0 if ok else abs(actual - t.value)
        out.append(Verdict(t, actual, ok, miss))
    return out


def broken(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.passed]


def summary_message(verdicts: Sequence[Verdict]) -> str:
    """One line naming every broken threshold, for the error line and the JSON error."""
    bad = broken(verdicts)
    return (f"{len(bad)} of {len(verdicts)} thresholds broken: "
            + "; ".join(v.line().removeprefix("[FAIL] ") for v in bad))
