"""The project's name and the one rule for stack names, shared by every console script, the stack
file's reader and the program's mocks (light: no pydantic, no YAML, so ``--help`` stays fast)."""

from __future__ import annotations

import re

from speech.errors import ConfigError

PROJECT = "speech-endpoints"
"""Pulumi.yaml's ``name``: the namespace of every config key (``speech-endpoints:models``) and the
project part of a fully qualified stack name."""

STACK_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
"""Pulumi: "Stack names may only contain alphanumeric characters, hyphens, underscores, or periods"
(docs/design.md cites the page); 100 characters at most, and not ``.`` or ``..`` (which would name
no file of their own)."""


def stack_name(text: str) -> str:
    """``NAME``, ``ORG/NAME`` or ``ORG/PROJECT/NAME`` (Pulumi's three forms) -> ``NAME``: the stack
    settings file is ``Pulumi.<NAME>.yaml`` and the program sees ``pulumi.get_stack() == NAME``.

    A qualified name's project must be this one; anything else (a path, a slash too many, a
    character Pulumi refuses) raises :class:`ConfigError`, so a stack name never names a file
    outside its directory."""
    parts = text.split("/")
    if len(parts) > 3:
        raise ConfigError(f"{text!r} is not a stack name: use NAME, ORG/NAME or ORG/PROJECT/NAME (Pulumi's forms), e.g. dev")
    if len(parts) == 3 and parts[1] != PROJECT:
        raise ConfigError(f"{text!r}: project {parts[1]!r} is not this one ({PROJECT}); pass "
                          f"{parts[0]}/{PROJECT}/{parts[2]} or the bare name {parts[2]}")
    if any(not STACK_NAME_RE.match(part) or part in (".", "..") for part in parts):
        raise ConfigError(f"{text!r} is not a Pulumi stack name: letters, digits, '-', '_' and '.' only, 1 to 100 "
                          "characters, e.g. dev or acme/speech-endpoints/prod")
    return parts[-1]
