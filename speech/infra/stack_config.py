"""The program's stack config reader: ``pulumi.Config`` (what the engine passed in) ->
:class:`speech.schema.config.StackConfig`, through the same parser bench and the pack use on the
file (:func:`speech.stack.read.parse_stack_config`). The only module that reads ``pulumi.Config``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from speech.schema.config import StackConfig
from speech.stack.read import PROJECT, parse_stack_config


def raw_project_config() -> dict[str, Any]:
    """All ``speech-endpoints:*`` values the engine passed in, JSON-decoded where structured."""
    from pulumi.runtime import config as rc

    keys = set(rc.CONFIG.get()) | set(rc.get_config_env())
    raw: dict[str, Any] = {}
    for full in sorted(keys):
        if not full.startswith(f"{PROJECT}:"):
            continue
        key = full.split(":", 1)[1]
        value = rc.get_config(full)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                # A bare string: structured keys then fail validation with their own key name.
                pass
        raw[key] = value
    return raw


def program_stack_dir() -> Path:
    """Where the stack file of a running program lies: the project directory (Pulumi.yaml's, where
    the engine starts the program), or its ``stackConfigDir`` when Pulumi.yaml sets one."""
    import pulumi

    root = Path(pulumi.get_root_directory() or ".")
    if not root.is_dir():  # Pulumi's mocks report a placeholder; the program then runs where it started
        root = Path(".")
    try:
        from ruamel.yaml import YAML

        project = YAML(typ="safe").load((root / "Pulumi.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, ValueError):
        project = {}
    sub = project.get("stackConfigDir") if isinstance(project, dict) else None
    return root / sub if isinstance(sub, str) and sub else root


def load_stack_config(base_dir: Path | None = None) -> StackConfig:
    """Read the current stack's config (under ``pulumi preview/up`` or Pulumi's mocks); warnings go
    to the engine (``pulumi.log.warn``), shown once per preview."""
    import pulumi

    return parse_stack_config(raw_project_config(), base_dir=base_dir if base_dir is not None else program_stack_dir(),
                              stack=pulumi.get_stack(), warn=pulumi.log.warn)
