"""Stack files as tests read them: the config of a committed stack with its artifact references
replaced by the referenced files' JSON (the embedded form), so a test can edit a measurement.

Deliberately not speech.stack.read's resolver: tests compare that resolver with this
plain reading (tests/speech/stack/test_stack_config.py), and the rest only want the content."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

MODELS = "speech-endpoints:models"


def embedded_config(stack_file: Path) -> dict[str, Any]:
    """``config:`` of ``stack_file``, each ``{path, sha256}`` artifact replaced by its file's JSON."""
    stack_file = Path(stack_file)
    config = YAML(typ="safe").load(stack_file.read_text())["config"]
    for entry in (config.get(MODELS) or {}).values():
        measurements = (entry or {}).get("measurements") or {}
        for kind, value in list(measurements.items()):
            if isinstance(value, dict) and "path" in value and "kind" not in value:
                measurements[kind] = json.loads((stack_file.parent / value["path"]).read_text())
    return copy.deepcopy(config)


def embedded_stack(stack_file: Path) -> dict[str, Any]:
    """The whole stack file (``{"config": ...}``) in the embedded form."""
    return {"config": embedded_config(stack_file)}


def copy_stack(stack_file: Path, directory: Path, name: str | None = None) -> Path:
    """Copy a stack file into ``directory`` (as ``Pulumi.<name>.yaml``) with the artifact files it
    references, at the same relative paths; returns the new stack file."""
    stack_file = Path(stack_file)
    target = Path(directory) / (f"Pulumi.{name}.yaml" if name else stack_file.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(stack_file.read_text())
    config = YAML(typ="safe").load(stack_file.read_text())["config"]
    for entry in (config.get(MODELS) or {}).values():
        for value in ((entry or {}).get("measurements") or {}).values():
            if isinstance(value, dict) and "path" in value and "kind" not in value:
                dst = target.parent / value["path"]
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes((stack_file.parent / value["path"]).read_bytes())
    return target
