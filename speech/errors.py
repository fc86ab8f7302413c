"""Errors of the speech core. Every message names the value, the limit and the next step.

The tree (edges catch :class:`SpeechError` and print ``Name: message``; exit 2 for bad input)::

    SpeechError
    ├── ArtifactError                an artifact file missing, unreadable or off its schema
    ├── PlanInputError               a plan input out of range
    │   └── FingerprintMismatch      artifacts of two endpoints (instance type, image digest)
    ├── ConfigError                  stack configuration (names the config key)
    ├── SimulationInputError         a simulator input (fleet, policy, mode); also a ValueError
    ├── TraceError                   a traffic trace file (speech.sim.traces)
    ├── RehearsalError               a rehearsal step (speech.infra.rehearse)
    └── BenchError                   a bench command's input or run (bench.errors, and its subclasses)

Pydantic validators keep raising ``ValueError`` (pydantic turns it into a ValidationError, which
:func:`describe_validation_error` makes one line of).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


class SpeechError(Exception):
    """Base class for every error the speech package raises on purpose.

    Edges (CLI, Pulumi program, policy pack) catch this class only and print ``Name: message``;
    anything else is a bug and keeps its traceback.
    """

    exit_code = 2
    """What the CLI exits with (2: bad input, nothing written)."""


class RehearsalError(SpeechError):
    """The stack cannot be rehearsed (no model, no build, bad --weights-dir): speech.infra.rehearse."""


class OutputError(SpeechError):
    """An output file or directory cannot be written (missing parent that cannot be made, no
    permission, read-only or full disk). The previous file, if any, is left as it was."""


class ArtifactError(SpeechError):
    """An artifact file is missing, unreadable or does not match its schema."""


class PlanInputError(SpeechError):
    """A chosen plan input (SLO, surge ratio, traffic, floor) is out of range."""


class FingerprintMismatch(PlanInputError):
    """Artifacts describe different endpoints (instance type or image digest)."""


class ConfigError(SpeechError):
    """Stack configuration is invalid; the message names the config key."""


class SimulationInputError(SpeechError, ValueError):
    """A simulator input is out of range (a copy fleet that cannot exist, an unknown policy or
    hot-load mode, a plan with nothing to simulate). A ValueError too, for callers that catch one."""


def describe_validation_error(
    err: Any,
    where: str = "",
    *,
    key: Callable[[tuple], str] | None = None,
    label: str = "",
) -> str:
    """One line for a pydantic ValidationError: where, the first failing field (``key`` turns its
    location into the user's name for it: a config key, a CLI flag), pydantic's reason, the value
    given when it is a scalar, and how many more fields failed. The one formatter for artifacts,
    stack config, provenance documents and CLI inputs, so the same mistake reads the same everywhere.
    """
    errors = err.errors()
    first = errors[0]
    loc = tuple(first["loc"])
    name = key(loc) if key else (".".join(str(p) for p in loc) or "(top level)")
    got = first.get("input")
    shown = "" if isinstance(got, (dict, list)) or first["type"] == "missing" else f" (got {got!r})"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    msg = str(first["msg"]).removeprefix("Value error, ") + _literal_hint(first)
    return f"{where + ': ' if where else ''}{label}{name}: {msg}{shown}{more}"


def _literal_hint(error: Any) -> str:
    """``; did you mean 'realtime'?`` for a near miss of a fixed set of values (pydantic lists them
    all in ``ctx.expected`` as quoted strings); empty for anything else."""
    import difflib

    got = error.get("input")
    if error.get("type") != "literal_error" or not isinstance(got, str):
        return ""
    allowed = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    close = difflib.get_close_matches(got, allowed, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def speech_error_in(exc: BaseException) -> SpeechError | None:
    """The user-facing error an exception carries, if any: a :class:`SpeechError` in its chain
    (``__cause__``/``__context__``), or one the Pulumi program re-raised as
    ``pulumi.RunError("ConfigError: ...")`` (the engine prints a RunError as one line; under the
    mocks it arrives wrapped in the runtime's traceback). None: a bug, which keeps its traceback."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, SpeechError):
            return e
        name, sep, message = str(e).partition(": ")
        cls = _BY_NAME.get(name) if sep else None
        if cls is not None:
            return cls(message)
        e = e.__cause__ or e.__context__
    return None


def _subclasses(cls: type) -> list[type]:
    subs: list[type] = cls.__subclasses__()
    return [cls, *(c for sub in subs for c in _subclasses(sub))]


class _ByName(dict):
    """SpeechError subclasses by class name, looked up when first needed (all are defined by then)."""

    def get(self, name, default=None):
        return {c.__name__: c for c in _subclasses(SpeechError)}.get(name, default)


_BY_NAME = _ByName()
