"""The HTML pieces the report's sections share (:mod:`bench.report.html`, :mod:`bench.report.tuned`):
a table whose cells are escaped unless they are :class:`markupsafe.Markup` (Jinja2's own mark of text
that is HTML already, re-exported here). Cells are escaped with :func:`html.escape`, as the rest of
the report's text is, so a value reads the same in every part of the page."""

from __future__ import annotations

import html
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from markupsafe import Markup

__all__ = ["Markup", "table"]


def table(headers: Iterable[str], rows: Iterable[Iterable[object]], num_cols: AbstractSet[int] = frozenset()) -> str:
    """An HTML table: ``headers`` escaped, each cell escaped unless it is :class:`Markup`, the
    columns in ``num_cols`` right-aligned (class ``num``)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="num"' if i in num_cols else ""
            cells.append(f"<td{cls}>{v if isinstance(v, Markup) else html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"
