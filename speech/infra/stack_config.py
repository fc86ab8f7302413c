"""The program's stack config reader: ``pulumi.Config`` (what the engine passed in) ->
:class:`speech.schema.config.StackConfig`, through the same parser bench and the pack use on the
file (:func:`speech.stack.read.parse_stack_config`). The only module that reads ``pulumi.Config``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speech.schema.config import StackConfig
from speech.stack.read import PROJECT, parse_stack_config


def configured_keys() -> set[str]:
    """Full keys (``project:key``) of the config this program was given.

    ``pulumi.Config`` reads a key but cannot list them, and the unknown-key warning needs the list.
    Under ``pulumi preview/up`` the language host hands the program its config as the JSON bag in
    ``PULUMI_CONFIG`` (pulumi-language-python's ``pulumiConfigVar``), which the SDK's public
    :func:`pulumi.runtime.get_config_env` returns. Under Pulumi's mocks the config is set with the
    public :func:`pulumi.runtime.set_all_config`, which has no public reader of its keys: only
    those are read from the SDK's own map (``pulumi.runtime.config.CONFIG``), the one internal read
    left (docs/design.md, "Stack config in the program")."""
    import pulumi.runtime
    from pulumi.runtime import config as runtime_config

    return set(pulumi.runtime.get_config_env()) | set(runtime_config.CONFIG.get())


def raw_project_config() -> dict[str, Any]:
    """All ``speech-endpoints:*`` values the engine passed in, read with ``pulumi.Config``,
    JSON-decoded where structured."""
    import pulumi

    config = pulumi.Config(PROJECT)
    prefix = f"{PROJECT}:"
    raw: dict[str, Any] = {}
    for full in sorted(k for k in configured_keys() if k.startswith(prefix)):
        key = full.removeprefix(prefix)
        try:
            raw[key] = config.get_object(key)
        except pulumi.ConfigTypeError:
            # A bare string: structured keys then fail validation with their own key name.
            raw[key] = config.get(key)
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
