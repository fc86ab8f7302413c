"""Write measured artifacts and chosen inputs into ``Pulumi.<stack>.yaml`` as structured config.

Round-trip YAML (ruamel) so the file's other keys, comments and order survive; written atomically.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from speech.schema.config import ModelConfig
from speech.errors import ConfigError
from speech.files import atomic_write_text

PROJECT = "speech-endpoints"
MODELS_KEY = f"{PROJECT}:models"


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def read_stack_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = _yaml().load(path.read_text(encoding="utf-8"))
    except YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({err.__class__.__name__}); fix the file first") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping with a 'config' key")
    return data


def existing_model_entry(path: Path, model: str) -> dict[str, Any] | None:
    data = read_stack_file(path)
    models = (data.get("config") or {}).get(MODELS_KEY) or {}
    entry = models.get(model)
    return dict(entry) if entry is not None else None


def write_model_entry(path: Path, model: str, entry: ModelConfig, *, allow_config_mismatch: bool | None = None) -> None:
    """Set ``config.speech-endpoints:models.<model>`` to ``entry``; keep everything else.

    ``allow_config_mismatch`` (when not None) sets the stack-level switch the program reads, so a
    plan made with ``--allow-config-mismatch`` deploys the same way it was planned."""
    data = read_stack_file(path)
    if not data:
        data = {"config": {}}
    config = data.setdefault("config", {})
    if config is None:
        config = data["config"] = {}
    models = config.get(MODELS_KEY)
    if models is None:
        models = config[MODELS_KEY] = {}
    models[model] = entry.model_dump(mode="json", exclude_defaults=False)
    if allow_config_mismatch is not None:
        config[f"{PROJECT}:allow_config_mismatch"] = allow_config_mismatch
    buf = io.StringIO()
    _yaml().dump(data, buf)
    atomic_write_text(path, buf.getvalue())
