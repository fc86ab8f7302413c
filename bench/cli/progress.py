"""Live progress on stderr for the long runs (qmax, tcopy, replay, validate --live, simulate, tune).

On a terminal: a rich progress bar, with permanent lines (a ladder level's row) printed above it.
Not on a terminal (piped to a file, a CI log): plain lines, never wrapped, at most one every
``every_s`` seconds plus every permanent line, so a log shows the run advancing without a bar's
control characters. Nothing at all with -q or --json (stdout is then the result only, and stderr
errors only).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class RunProgress:
    """``with RunProgress("replay", total=4000, enabled=...) as p: p.update(done, "text")``."""

    def __init__(self, what: str, total: float | None, *, enabled: bool = True, unit: str = "",
                 every_s: float = 5.0, stream: TextIO | None = None, clock=time.monotonic) -> None:
        self.what, self.total, self.unit, self.every_s, self.clock = what, total, unit, every_s, clock
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.stream is not None
        self.tty = self.enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.completed = 0.0
        self._bar = None
        self._task = None
        self._last = -float("inf")
        self._t0 = clock()
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=Console(file=self.stream), transient=True)
            self._task = self._bar.add_task(what, total=total)
            self._bar.start()

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, completed: float | None = None, text: str = "", *, force: bool = False) -> None:
        if not self.enabled:
            return
        if completed is not None:
            self.completed = completed
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.completed, description=f"{self.what} {text}".strip())
            return
        now = self.clock()
        if force or now - self._last >= self.every_s:
            self._last = now
            self._plain(text)

    def set_total(self, total: float | None) -> None:
        """The total once it is known (tune counts its simulated days after building the tuner)."""
        self.total = total
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=total)

    def advance(self, n: float = 1, text: str = "") -> None:
        self.update(self.completed + n, text)

    def line(self, text: str) -> None:
        """A line that stays (a finished level): above the bar, or as it is in a log; never wrapped."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, soft_wrap=True, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def _plain(self, text: str) -> None:
        elapsed = self.clock() - self._t0
        if self.total:
            head = f"{self.what}: {self.completed:,.0f}/{self.total:,.0f}{(' ' + self.unit) if self.unit else ''} " \
                   f"({100 * self.completed / self.total:.0f}%)"
        else:
            head = f"{self.what}: {self.completed:,.0f}{(' ' + self.unit) if self.unit else ''}"
        print(f"{head}, {elapsed:.0f} s" + (f", {text}" if text else ""), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.enabled and self._last > -float("inf"):
            self._plain("done")
        self.enabled = False


def wanted(args) -> bool:
    """Progress unless -q, --json or the command's own --no-progress."""
    return not (getattr(args, "quiet", False) or getattr(args, "json", False) or getattr(args, "no_progress", False))
