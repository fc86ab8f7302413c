"""Artifact files: atomic writes and loaders whose errors name the file, the field and the fix.

The only module of the core that touches the file system.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from speech.errors import ArtifactError, OutputError, describe_validation_error
from speech.schema.artifacts import SCHEMA_VERSION

M = TypeVar("M", bound=BaseModel)

MAX_ARTIFACT_BYTES = 64 * 2**20
"""The largest artifact file read (a qmax artifact with every level's samples is well under 1 MiB)."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory + fsync + rename: readers never see half a file,
    and a write that fails (disk full, quota, read-only file system, no permission) leaves the
    previous file exactly as it was and raises :class:`OutputError` naming the path and the reason."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise OutputError(f"{path}: cannot create it ({_reason(err)}); pass an output directory you can write") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; artifacts are meant to be shared and committed.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError):
            kept = "the previous file is unchanged" if path.exists() else "nothing was written"
            raise OutputError(f"{path}: write failed ({_reason(err)}); {kept}; free space or pass another "
                              "output directory, then re-run") from None
        raise


def _reason(err: OSError) -> str:
    name = errno.errorcode.get(err.errno or 0, err.__class__.__name__)
    return f"{err.strerror}, {name}" if err.strerror else name


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


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    # Python's json reads NaN, Infinity and -Infinity (not JSON); no measured figure is one.
    raise _NonFinite(f"holds {name}, which is not a number a measurement can have")


def load_artifact(path: Path | str, cls: type[M]) -> M:
    """Read and validate an artifact file; every failure is an :class:`ArtifactError`."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise ArtifactError(f"{path}: {size:,} bytes, more than an artifact holds (at most "
                                f"{MAX_ARTIFACT_BYTES // 2**20} MiB); pass a JSON artifact file")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file; check the path or run the measurement first") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ArtifactError(f"{path}: cannot read ({err.__class__.__name__}); pass a JSON artifact file") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as err:
        raise ArtifactError(f"{path}: {err}; JSON numbers must be finite: restore the file from version control "
                            "or re-run the measurement") from None
    except RecursionError:
        raise ArtifactError(f"{path}: nested too deeply to be an artifact; pass a JSON artifact file") from None
    except json.JSONDecodeError as err:
        raise ArtifactError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno} ({err.msg}); restore the file "
            "from version control or re-run the measurement"
        ) from None
    return parse_artifact(data, cls, str(path))


def yaml_error_message(path: Path | str, err: Exception, text: str | None = None) -> str:
    """One line for a YAML parse error (ruamel's MarkedYAMLError: scanner, parser, duplicate key):
    ``FILE:LINE:COLUMN: problem (context, from line N); the line as written; fix``. Duplicate
    keys name the key (ruamel's problem text does); the quoted line shows where a tab or a stray
    character sits."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).strip().splitlines()[0]
    context = getattr(err, "context", None)
    cmark = getattr(err, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    ctx = ""
    if context:
        ctx = f" ({context}" + (f" from line {cmark.line + 1}" if cmark is not None and mark is not None
                                and cmark.line != mark.line else "") + ")"
    shown = ""
    if text is not None and mark is not None:
        lines = text.splitlines()
        if 0 <= mark.line < len(lines):
            shown = f"; line {mark.line + 1} is {lines[mark.line][:80]!r}"
    hint = "; indent with spaces, not tabs" if "\\t" in problem or "'\t'" in problem else ""
    return f"{where}: not valid YAML: {problem}{ctx}{shown}{hint}; fix the file"


def non_finite_path(data: object, path: str = "") -> str | None:
    """The key path (``config.a.b[2]``) of the first float in ``data`` that is nan or +-inf, else None:
    YAML spells them ``.nan`` and ``.inf``, and no stack setting or measurement may be one."""
    if isinstance(data, float):
        return path or "(top level)" if data != data or data in (float("inf"), float("-inf")) else None
    if isinstance(data, dict):
        for k, v in data.items():
            found = non_finite_path(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            found = non_finite_path(v, f"{path}[{i}]")
            if found:
                return found
    return None
