"""Artifact files: atomic writes and loaders whose errors name the file, the field and the fix.

The only module of the core that touches the file system.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from speech.schema.artifacts import SCHEMA_VERSION
from speech.errors import ArtifactError, describe_validation_error

M = TypeVar("M", bound=BaseModel)


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory + rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; artifacts are meant to be shared and committed.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_artifact(path: Path, artifact: BaseModel) -> Path:
    atomic_write_text(Path(path), artifact.model_dump_json(indent=2) + "\n")
    return Path(path)


def parse_artifact(data: object, cls: type[M], where: str) -> M:
    """Validate already-parsed JSON/YAML data as ``cls``; ``where`` names the file or config key."""
    kind = getattr(cls.model_fields.get("kind"), "default", None)
    if isinstance(data, dict):
        got_kind = data.get("kind")
        if kind and got_kind is not None and got_kind != kind:
            raise ArtifactError(f"{where}: is a {got_kind!r} artifact, expected {kind!r}; pass the right file")
        version = data.get("schema_version")
        supported = getattr(cls, "SUPPORTED_SCHEMA_VERSIONS", (SCHEMA_VERSION,))
        if version is not None and version not in supported:
            raise ArtifactError(
                f"{where}: schema_version {version!r} is not supported (this tool reads "
                f"{', '.join(map(str, supported))}); re-run the measurement with this version of bench"
            )
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise ArtifactError(
            describe_validation_error(err, where, label="field ") + "; fix the field or re-run the measurement"
        ) from None


def load_artifact(path: Path | str, cls: type[M]) -> M:
    """Read and validate an artifact file; every failure is an :class:`ArtifactError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file; check the path or run the measurement first") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise ArtifactError(f"{path}: cannot read ({err.__class__.__name__}); pass a JSON artifact file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ArtifactError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno} ({err.msg}); restore the file "
            "from version control or re-run the measurement"
        ) from None
    return parse_artifact(data, cls, str(path))
