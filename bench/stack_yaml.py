"""Write a model's chosen inputs and its measured artifacts, by reference, into ``Pulumi.<stack>.yaml``.

Round-trip YAML (ruamel) so the file's other keys, comments and order survive; written atomically.

The content format: each artifact is ``{path, sha256}`` (:class:`speech.schema.config.ArtifactRef`),
the file committed under ``artifacts/`` next to the stack file (:func:`store_artifact`); unset
(None) values are left out, so an entry is what a team chose plus where its measurements are.
:func:`migrate_stack_file` rewrites a stack whose artifacts are embedded (the earlier form).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from pydantic import BaseModel

from speech.schema.artifacts import canonical_sha256
from speech.schema.config import ArtifactRef, ModelConfig
from speech.errors import ArtifactError, ConfigError
from speech.files import atomic_write_text, parse_artifact, write_artifact
from speech.infra.stack_config import ARTIFACT_KINDS, file_sha256, is_reference

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


ARTIFACTS_DIR = "artifacts"
"""Where artifacts that are not yet in the repository are written, relative to the stack file."""


def _artifact_filename(kind: str, artifact: BaseModel) -> str:
    from speech.schema.artifacts import copy_filename, qmax_filename, ttotal_filename

    return {"qmax": qmax_filename, "ttotal": ttotal_filename, "tcopy": copy_filename}[kind](artifact)


def _same_artifact(file: Path, artifact: BaseModel) -> bool:
    try:
        found = parse_artifact(json.loads(file.read_text(encoding="utf-8")), type(artifact), str(file))
    except (OSError, ValueError, ArtifactError):
        return False
    return canonical_sha256(found) == canonical_sha256(artifact)


def _reference(stack_dir: Path, file: Path) -> ArtifactRef:
    rel = os.path.relpath(file.resolve(), Path(stack_dir).resolve())
    return ArtifactRef(path=Path(rel).as_posix(), sha256=file_sha256(file.read_bytes()))


def store_artifact(stack_dir: Path, kind: str, artifact: BaseModel, source: Path | None = None) -> tuple[ArtifactRef, Path | None]:
    """The reference stack config records for ``artifact``, and the file written for it (None when
    it was already in the repository).

    ``source`` (the file bench read it from) is referenced where it lies when it is under the stack
    file's directory (the repository). Otherwise a file under ``artifacts/`` with the same content is
    referenced if there is one; else the artifact is written to ``artifacts/<bench's file name>``,
    or, when a different artifact already has that name, to ``artifacts/<name>-<sha8>.json`` (a file
    another stack may reference is never overwritten)."""
    stack_dir = Path(stack_dir)
    root = stack_dir.resolve()
    if source is not None and Path(source).resolve().is_relative_to(root) and _same_artifact(Path(source), artifact):
        return _reference(stack_dir, Path(source)), None
    name = _artifact_filename(kind, artifact)
    store = stack_dir / ARTIFACTS_DIR
    for candidate in sorted(store.rglob(name)) if store.is_dir() else []:
        if _same_artifact(candidate, artifact):
            return _reference(stack_dir, candidate), None
    target = store / name
    if target.exists():
        target = store / f"{target.stem}-{canonical_sha256(artifact).removeprefix('sha256:')[:8]}.json"
        if target.exists() and _same_artifact(target, artifact):
            return _reference(stack_dir, target), None
    write_artifact(target, artifact)
    return _reference(stack_dir, target), target


def entry_config(entry: ModelConfig, refs: dict[str, ArtifactRef]) -> dict[str, Any]:
    """The stack config of one model: ``entry`` without unset values, its artifacts as ``refs``."""
    data = entry.model_dump(mode="json", exclude_none=True)
    if entry.measurements is not None:
        missing = [k for k in ARTIFACT_KINDS if getattr(entry.measurements, k) is not None and k not in refs]
        if missing:
            raise ValueError(f"no reference for measurements.{missing[0]}")  # a bug of the caller, not input
        for kind, ref in refs.items():
            data["measurements"][kind] = ref.model_dump(mode="json")
    return data


def artifact_refs(stack_dir: Path, entry: ModelConfig, *, refs: dict[str, ArtifactRef] | None = None,
                  sources: dict[str, Path | None] | None = None) -> tuple[dict[str, ArtifactRef], list[Path]]:
    """A reference for each artifact of ``entry`` (given in ``refs``, else :func:`store_artifact`
    from ``sources``), and the artifact files written for them."""
    out = dict(refs or {})
    written: list[Path] = []
    m = entry.measurements
    for kind in ARTIFACT_KINDS if m is not None else ():
        artifact = getattr(m, kind)
        if artifact is None or kind in out:
            continue
        out[kind], file = store_artifact(stack_dir, kind, artifact, (sources or {}).get(kind))
        if file is not None:
            written.append(file)
    return out, written


def _write(path: Path, data: dict[str, Any]) -> None:
    buf = io.StringIO()
    _yaml().dump(data, buf)
    atomic_write_text(path, buf.getvalue())


def write_model_entry(path: Path, model: str, entry: ModelConfig, *, refs: dict[str, ArtifactRef] | None = None,
                      sources: dict[str, Path | None] | None = None,
                      allow_config_mismatch: bool | None = None) -> list[Path]:
    """Set ``config.speech-endpoints:models.<model>`` to ``entry``; keep everything else. Returns
    the artifact files written under ``artifacts/`` (:func:`artifact_refs`; ``sources``: the files
    bench read the artifacts from, referenced where they lie when they are in the repository).

    ``allow_config_mismatch`` (when not None) sets the stack-level switch the program reads, so a
    plan made with ``--allow-config-mismatch`` deploys the same way it was planned."""
    path = Path(path)
    refs, written = artifact_refs(path.parent, entry, refs=refs, sources=sources)
    data = read_stack_file(path)
    if not data:
        data = {"config": {}}
    config = data.setdefault("config", {})
    if config is None:
        config = data["config"] = {}
    models = config.get(MODELS_KEY)
    if models is None:
        models = config[MODELS_KEY] = {}
    models[model] = entry_config(entry, refs)
    if allow_config_mismatch is not None:
        config[f"{PROJECT}:allow_config_mismatch"] = allow_config_mismatch
    _write(path, data)
    return written


def migrate_stack_file(path: Path) -> list[tuple[str, ArtifactRef, Path | None]]:
    """Replace every embedded artifact of the stack file by a reference (:func:`store_artifact`);
    (config key, reference, file written or None) per artifact. Nothing is written when no
    artifact is embedded, and the stack file only after every artifact file is."""
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact

    classes = {"qmax": QmaxArtifact, "ttotal": TtotalArtifact, "tcopy": CopyArtifact}
    data = read_stack_file(path)
    models = (data.get("config") or {}).get(MODELS_KEY) or {}
    changes: list[tuple[str, ArtifactRef, Path | None]] = []
    for name, entry in models.items():
        measurements = (entry or {}).get("measurements")
        if not measurements:
            continue
        for kind in ARTIFACT_KINDS:
            value = measurements.get(kind)
            if value is None or is_reference(value):
                continue
            key = f"{MODELS_KEY}.{name}.measurements.{kind}"
            try:
                artifact = parse_artifact(json.loads(json.dumps(value, default=str)), classes[kind], key)
            except ArtifactError as err:
                raise ConfigError(str(err)) from None
            ref, written = store_artifact(path.parent, kind, artifact)
            measurements[kind] = ref.model_dump(mode="json")
            changes.append((key, ref, written))
        if any(c[0].startswith(f"{MODELS_KEY}.{name}.") for c in changes):
            # The earlier writer dumped unset values as null keys; unset is their default.
            for mapping in (entry, measurements):
                for k in [k for k, v in mapping.items() if v is None]:
                    del mapping[k]
    if changes:
        _write(path, data)
    return changes
