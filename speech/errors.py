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

from typing import Any
from collections.abc import Callable


class SpeechError(Exception):
    """Base class for every error the speech package raises on purpose.

    Edges (CLI, Pulumi program, policy pack) catch this class only and print ``Name: message``;
    anything else is a bug and keeps its traceback.
    """


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
    msg = str(first["msg"]).removeprefix("Value error, ")
    return f"{where + ': ' if where else ''}{label}{name}: {msg}{shown}{more}"
