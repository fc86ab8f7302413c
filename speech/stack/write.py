"""Write a model's chosen inputs and its measured artifacts, by reference, into ``Pulumi.<stack>.yaml``.

Round-trip YAML (ruamel) so the file's other keys, comments and order survive; written atomically,
under an fcntl lock (two bench writers never lose each other's change), and refused when the
file changed on disk since it was read (an editor's save is not overwritten).

The content format: each artifact is ``{path, sha256}`` (:class:`speech.schema.config.ArtifactRef`),
the file committed under ``artifacts/`` next to the stack file (:func:`store_artifact`); unset
(None) values are left out, so an entry is what a team chose plus where its measurements are.
:func:`migrate_stack_file` rewrites a stack whose artifacts are embedded (the earlier form).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from pydantic import BaseModel

from speech.errors import ArtifactError, ConfigError
from speech.files import atomic_write_text, parse_artifact, write_artifact
from speech.schema.artifacts import canonical_sha256
from speech.schema.config import ArtifactRef, ModelConfig
from speech.stack.read import (  # noqa: F401  (MAX_STACK_FILE_BYTES: re-exported)
    ARTIFACT_KINDS,
    MAX_STACK_FILE_BYTES,
    PROJECT,
    file_sha256,
    is_reference,
    parse_stack_text,
    round_trip_yaml,
    stack_text,
)

MODELS_KEY = f"{PROJECT}:models"


LOCK_WAIT_S = 10.0
"""How long a writer waits for another bench process to finish with the same stack file."""


class StackBusyError(ConfigError):
    """Another process holds the stack file's lock, or the file changed while bench wrote it."""


def read_stack_file(path: Path) -> dict[str, Any]:
    """The whole stack file as round-trip data ({} when there is none yet)."""
    text = stack_text(Path(path))
    return {} if text is None else parse_stack_text(Path(path), text, round_trip=True)


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextmanager
def stack_lock(path: Path, *, wait_s: float | None = None, poll_s: float = 0.1):
    """Hold an exclusive lock on ``.<file>.lock`` beside the stack file while it is read, changed
    and replaced, so two bench writers never lose each other's change. Waits up to ``wait_s`` for
    another holder, then refuses naming it (pid, command, since when: what the holder wrote into
    the lock file). filelock's flock-based lock: it goes with the process, so a killed bench leaves
    nothing to clean up."""
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    lock = lock_path(path)
    guard = FileLock(lock, timeout=wait_s, poll_interval=poll_s)
    try:
        guard.acquire()
    except Timeout:
        try:
            holder = json.loads(lock.read_bytes() or b"{}")
        except (OSError, ValueError):
            holder = {}
        who = (f"pid {holder.get('pid')} ({holder.get('command', '?')}, since {holder.get('since', '?')})"
               if isinstance(holder, dict) and holder else "another process")
        raise StackBusyError(f"{path}: being written by {who}; waited {wait_s:g} s. Wait for it to finish and re-run "
                             "(nothing was written)") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot create its lock file {lock} ({err.strerror}); pass a --stack-dir you "
                          "can write") from None
    try:
        # Another descriptor on the same file: flock's lock belongs to filelock's, so writing here
        # (and closing) leaves it held.
        lock.write_text(json.dumps({"pid": os.getpid(), "command": " ".join(["speech-bench", *sys.argv[1:3]]),
                                    "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}))
        yield
    finally:
        guard.release()


def _mapping_at(path: Path, parent: dict[str, Any], key: str, where: str, *, create: bool) -> dict[str, Any] | None:
    """``parent[key]`` when it is a mapping; an empty or missing value is None (or a new empty
    mapping, set in ``parent``, when ``create``); any other value is refused by its key path, so a
    hand-edited stack file is an error to fix, never a traceback or a silent overwrite."""
    value = parent.get(key)
    if value is None or value == "":
        if not create:
            return None
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {where}: expected a mapping, found {type(value).__name__} {str(value)[:40]!r}; "
                          "fix the file (or remove the key) and re-run (nothing was written)")
    return value


def stack_models(path: Path, data: dict[str, Any], *, create: bool = False) -> dict[str, Any] | None:
    """``config.speech-endpoints:models`` of parsed stack ``data`` (see :func:`_mapping_at`)."""
    config = _mapping_at(path, data, "config", "config", create=create)
    if config is None:
        return None
    return _mapping_at(path, config, MODELS_KEY, f"config.{MODELS_KEY}", create=create)


def existing_model_entry(path: Path, model: str) -> dict[str, Any] | None:
    models = stack_models(path, read_stack_file(path)) or {}
    entry = _mapping_at(path, models, model, f"config.{MODELS_KEY}.{model}", create=False)
    return dict(entry) if entry is not None else None


ARTIFACTS_DIR = "artifacts"
"""Where artifacts that are not yet in the repository are written, relative to the stack file."""


def _artifact_filename(kind: str, artifact: BaseModel) -> str:
    from speech.schema.artifacts import copy_filename, qmax_filename, ttotal_filename

    namer: dict[str, Callable[[Any], str]] = {"qmax": qmax_filename, "ttotal": ttotal_filename, "tcopy": copy_filename}
    return namer[kind](artifact)


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


def _write(path: Path, data: dict[str, Any], before: str | None) -> None:
    """Write ``data`` (under the caller's :func:`stack_lock`), unless the file changed since it was
    read as ``before``: an editor takes no lock, and its save is refused rather than replaced."""
    buf = io.StringIO()
    round_trip_yaml().dump(data, buf)
    if stack_text(path) != before:
        raise StackBusyError(f"{path}: changed on disk while bench was writing it (an editor?); nothing was "
                             "written: save your edit and re-run")
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
    with stack_lock(path):
        before = stack_text(path)
        data = parse_stack_text(path, before, round_trip=True) if before is not None else {}
        models = stack_models(path, data, create=True)
        assert models is not None  # create=True
        models[model] = entry_config(entry, refs)
        if allow_config_mismatch is not None:
            data["config"][f"{PROJECT}:allow_config_mismatch"] = allow_config_mismatch
        _write(path, data, before)
    return written


def migrate_stack_file(path: Path) -> list[tuple[str, ArtifactRef, Path | None]]:
    """Replace every embedded artifact of the stack file by a reference (:func:`store_artifact`);
    (config key, reference, file written or None) per artifact. Nothing is written when no
    artifact is embedded, and the stack file only after every artifact file is."""
    from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact

    classes: dict[str, type[QmaxArtifact] | type[TtotalArtifact] | type[CopyArtifact]] = {
        "qmax": QmaxArtifact, "ttotal": TtotalArtifact, "tcopy": CopyArtifact}
    path = Path(path)
    with stack_lock(path):
        before = stack_text(path)
        data = parse_stack_text(path, before, round_trip=True) if before is not None else {}
        models = stack_models(path, data) or {}
        changes: list[tuple[str, ArtifactRef, Path | None]] = []
        for name in list(models):
            entry = _mapping_at(path, models, name, f"config.{MODELS_KEY}.{name}", create=False)
            measurements = _mapping_at(path, entry, "measurements", f"config.{MODELS_KEY}.{name}.measurements",
                                       create=False) if entry is not None else None
            if not measurements or entry is None:
                continue
            for kind in ARTIFACT_KINDS:
                value = measurements.get(kind)
                if value is None or is_reference(value):
                    continue
                key = f"{MODELS_KEY}.{name}.measurements.{kind}"
                artifact: QmaxArtifact | TtotalArtifact | CopyArtifact
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
            _write(path, data, before)
    return changes
