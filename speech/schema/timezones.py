"""Canonical IANA time zone names, from the tz database's own link table.

Application Auto Scaling's PutScheduledAction takes "the canonical names of the IANA time zones"
(its ``Timezone`` parameter; UTC when none is given). zoneinfo opens links as well as zones
(``US/Eastern``, ``Asia/Calcutta``, ``Europe/Kiev``), so a stack naming an alias previews cleanly
and is refused at ``pulumi up``. The tz database says which names are links: its compiled source
``tzdata.zi`` (shipped with the system zoneinfo and with the ``tzdata`` package) has one line
``L <zone> <link>`` per link. Read from the first directory of ``zoneinfo.TZPATH`` that has it, else
from the ``tzdata`` package when installed; where neither is present no name is known to be a link.
"""

from __future__ import annotations

import functools
import zoneinfo
from importlib import resources
from pathlib import Path

DEFAULT_ZONE = "UTC"
"""PutScheduledAction's default zone, accepted although the tz database lists it as a link to Etc/UTC."""


def _tzdata_zi() -> str | None:
    for root in zoneinfo.TZPATH:
        path = Path(root) / "tzdata.zi"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    try:
        return resources.files("tzdata").joinpath("zoneinfo", "tzdata.zi").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None


@functools.lru_cache(maxsize=1)
def links() -> dict[str, str]:
    """Every link of the installed tz database, alias -> the zone it names (empty when unreadable)."""
    text = _tzdata_zi()
    if text is None:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "L":
            out[parts[2]] = parts[1]
    # A link to a link (not made by zic, but harmless to follow) ends at its zone.
    for alias, target in out.items():
        seen = {alias}
        while target in out and target not in seen:
            seen.add(target)
            target = out[target]
        out[alias] = target
    return out


def canonical_zone(name: str) -> str | None:
    """The canonical zone ``name`` is an alias of, or None when ``name`` is canonical (or
    :data:`DEFAULT_ZONE`, or the database is unreadable)."""
    if name == DEFAULT_ZONE:
        return None
    return links().get(name)
