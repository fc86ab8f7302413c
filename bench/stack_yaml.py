"""Write measured artifacts and chosen inputs into ``Pulumi.<stack>.yaml`` as structured config.

Round-trip YAML (ruamel) so the file's other keys, comments and order survive; written atomically,
under an fcntl lock (two bench writers never lose each other's change), and refused when the
file changed on disk since it was read (an editor's save is not overwritten).
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from speech.schema.config import ModelConfig
from speech.errors import ConfigError
from speech.files import atomic_write_text, non_finite_path, yaml_error_message

PROJECT = "speech-endpoints"
MODELS_KEY = f"{PROJECT}:models"


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


MAX_STACK_FILE_BYTES = 16 * 2**20
"""The largest stack file read (the dev stack, measurements embedded, is ~8 KiB)."""
LOCK_WAIT_S = 10.0
"""How long a writer waits for another bench process to finish with the same stack file."""


class StackBusyError(ConfigError):
    """Another process holds the stack file's lock, or the file changed while bench wrote it."""


def _read_text(path: Path) -> str | None:
    try:
        size = path.stat().st_size
        if size > MAX_STACK_FILE_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes, more than a stack file holds (at most "
                              f"{MAX_STACK_FILE_BYTES // 2**20} MiB); pass a Pulumi.<stack>.yaml")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err.__class__.__name__}); "
                          "pass a Pulumi.<stack>.yaml text file") from None


def parse_stack_text(path: Path, text: str) -> dict[str, Any]:
    """A stack file's text as round-trip data. Errors name file, line, column and the key
    (:func:`speech.files.yaml_error_message`); a .nan or .inf value is refused by its key path."""
    try:
        data = _yaml().load(text)
    except YAMLError as err:
        raise ConfigError(yaml_error_message(path, err, text)) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a stack file; fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping with a 'config' key")
    bad = non_finite_path(data)
    if bad:
        raise ConfigError(f"{path}: {bad}: not a finite number (.nan/.inf); give a number or remove the key")
    return data


def read_stack_file(path: Path) -> dict[str, Any]:
    text = _read_text(Path(path))
    return {} if text is None else parse_stack_text(Path(path), text)


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextmanager
def stack_lock(path: Path, *, wait_s: float | None = None, poll_s: float = 0.1):
    """Hold an exclusive fcntl lock on ``.<file>.lock`` beside the stack file while it is read,
    changed and replaced, so two bench writers never lose each other's change. Waits up to
    ``wait_s`` for another holder, then refuses naming it (pid, command, since when). The lock is
    the kernel's: it goes with the process, so a killed bench leaves nothing to clean up."""
    import fcntl
    import json
    import os
    import sys
    import time
    from datetime import UTC, datetime

    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError(f"{path}: cannot create its lock file {lock} ({err.strerror}); pass a --stack-dir you "
                          "can write") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    try:
                        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
                    except ValueError:
                        holder = {}
                    who = (f"pid {holder.get('pid')} ({holder.get('command', '?')}, since {holder.get('since', '?')})"
                           if holder else "another process")
                    raise StackBusyError(
                        f"{path}: being written by {who}; waited {wait_s:g} s. Wait for it to finish and re-run "
                        "(nothing was written)") from None
                time.sleep(poll_s)
        me = json.dumps({"pid": os.getpid(), "command": " ".join(["speech-bench", *sys.argv[1:3]]),
                         "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, me, 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def existing_model_entry(path: Path, model: str) -> dict[str, Any] | None:
    data = read_stack_file(path)
    models = (data.get("config") or {}).get(MODELS_KEY) or {}
    entry = models.get(model)
    return dict(entry) if entry is not None else None


def write_model_entry(path: Path, model: str, entry: ModelConfig, *, allow_config_mismatch: bool | None = None) -> None:
    """Set ``config.speech-endpoints:models.<model>`` to ``entry``; keep everything else.

    ``allow_config_mismatch`` (when not None) sets the stack-level switch the program reads, so a
    plan made with ``--allow-config-mismatch`` deploys the same way it was planned."""
    path = Path(path)
    with stack_lock(path):
        before = _read_text(path)
        data = parse_stack_text(path, before) if before is not None else {}
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
        # An editor (which takes no lock) may have saved the file since it was read: refuse rather
        # than replace the user's change.
        if _read_text(path) != before:
            raise StackBusyError(f"{path}: changed on disk while bench was writing it (an editor?); nothing was "
                                 "written: save your edit and re-run")
        atomic_write_text(path, buf.getvalue())
