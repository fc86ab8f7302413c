"""What every measuring or simulating command can leave besides its artifact: CSV files of its rows
(``--csv DIR``), one self-contained HTML report (``--html FILE``, Jinja2 templates shipped in
``bench/report/templates``, plots embedded as base64 PNG so it opens offline and can be attached
to a CI run), and the verdicts of its ``--threshold`` s.

A command describes its run once, as a :class:`RunReport` (summary figures by name, tables of rows,
figures); :func:`bench.cli.main.main` writes the files and judges the thresholds from it.
"""

from __future__ import annotations

import base64
import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from speech.files import atomic_write_text

HTML_ROWS = 500
"""Rows of one table shown in the HTML report; the CSV has all of them."""


@dataclass(frozen=True)
class Table:
    """Rows a command produced, one CSV file ``<name>.csv`` and one table in the HTML report."""

    name: str
    """File stem, e.g. ``levels`` (qmax), ``requests`` (replay)."""
    title: str
    header: Sequence[str]
    rows: Sequence[Sequence[Any]]
    """Raw values: numbers unformatted (the CSV keeps full precision), None for no value."""


@dataclass
class RunReport:
    """One run of one command, as the CSV, HTML and threshold machinery see it."""

    command: str
    title: str
    summary: dict[str, float | int | bool | None]
    """Metric name (unit in the name) -> value: what --threshold judges and the HTML lists."""
    headline: list[tuple[str, str]] = field(default_factory=list)
    """(label, text) rows of the answer block at the top of the HTML report."""
    status: str = "ok"
    """ok | warn | stop: the run's own verdict (stop: a failed run), shown as the badge."""
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Callable[[], Any] | Path]] = field(default_factory=list)
    """(caption, a matplotlib figure factory or a PNG file) in page order."""
    notes: list[str] = field(default_factory=list)
    html: str | None = None
    """A complete page the command renders itself (bench demo's report), used as it is."""


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return str(v)


def csv_text(t: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.header)
    for row in t.rows:
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()


def write_csv(directory: Path, report: RunReport) -> list[Path]:
    """``<dir>/<command>-<table>.csv`` for each table, and ``<command>-summary.csv`` (metric,value)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    summary = Table("summary", "summary", ("metric", "value"), [(k, v) for k, v in report.summary.items()])
    for t in [summary, *report.tables]:
        path = directory / f"{report.command}-{t.name}.csv"
        atomic_write_text(path, csv_text(t))
        written.append(path)
    return written


def png_data(source: Callable[[], Any] | Path) -> str | None:
    """A figure (factory) or PNG file as base64, None when there is nothing to show."""
    if isinstance(source, Path):
        return base64.b64encode(source.read_bytes()).decode() if source.exists() else None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = source()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def environment():
    """The Jinja2 environment over the templates shipped in the package (autoescaped)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("bench.report", "templates"),
                             autoescape=jinja2.select_autoescape(("html", "j2")), trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["cell"] = _html_cell
    return env


def _html_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else "-"
    return str(v)


def render_html(report: RunReport, verdicts: Sequence[Any] = (), argv: Sequence[str] = ()) -> str:
    if report.html is not None:
        return report.html
    figures = [(caption, png_data(src)) for caption, src in report.figures]
    tables = [dict(t=t, rows=list(t.rows[:HTML_ROWS]), more=max(0, len(t.rows) - HTML_ROWS),
                   numeric=[all(isinstance(r[i], (int, float)) or r[i] is None for r in t.rows[:50]) for i in range(len(t.header))])
              for t in report.tables]
    from markupsafe import Markup

    verdict_rows = [(v.threshold.text, _html_cell(v.actual),
                     Markup("<span class='ok'>passed</span>" if v.passed else "<span class='fail'>BROKEN</span>"),
                     "" if v.passed else _html_cell(v.miss)) for v in verdicts]
    summary_rows = [(k, _html_cell(v)) for k, v in report.summary.items()]
    return environment().get_template("run.html.j2").render(
        verdict_rows=verdict_rows, summary_rows=summary_rows, r=report, verdicts=list(verdicts),
        broken=[v for v in verdicts if not v.passed], figures=figures, tables=tables,
        command_line=" ".join(["speech-bench", *argv]), generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        html_rows=HTML_ROWS,
    )


def write_html(path: Path, report: RunReport, verdicts: Sequence[Any] = (), argv: Sequence[str] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render_html(report, verdicts, argv))
    return path
