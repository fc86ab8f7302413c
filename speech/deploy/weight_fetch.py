"""The weight-cache build's Python steps (shipped beside weight_cache.sh; stdlib only, plus
huggingface_hub for ``hf``). Run by the build, never imported by the project:

    python weight_fetch.py hf OUT          # HF_REPO at HF_REVISION -> OUT (upstream files only)
    python weight_fetch.py stage SRC OUT   # a folder or a .tar.gz in the upstream layout -> OUT
    python weight_fetch.py check OUT       # OUT is the torch backend's layout (WEIGHTS_PINS, WEIGHTS_VOICES)
    python weight_fetch.py manifest OUT    # write OUT/MANIFEST.sha256

``WEIGHTS_LOCAL_SOURCE`` (set by ``speech rehearse`` only) makes ``hf`` stage that folder instead of
downloading: the one substitution a machine without internet access needs. Exit 1 with one line
``weight-cache: ...`` on stderr when the layout is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

UPSTREAM_PATTERNS = ["config.json", "*.pth", "voices/*.pt"]
CONFIG_KEYS = ("vocab", "n_token", "plbert", "hidden_dim", "style_dim", "n_layer", "max_dur", "dropout",
               "text_encoder_kernel_size", "n_mels", "istftnet")
"""What kokoro.KModel reads from config.json (kokoro/model.py)."""
MANIFEST = "MANIFEST.sha256"


class LayoutError(Exception):
    pass


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _empty(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise LayoutError(f"{out} is not empty")


def _copy_upstream(src: Path, out: Path) -> list[str]:
    """Copy config.json, the top-level *.pth and voices/*.pt from src to out; nothing else."""
    files = [src / "config.json", *sorted(src.glob("*.pth")), *sorted((src / "voices").glob("*.pt"))]
    copied = []
    for f in files:
        if not f.is_file():
            continue
        rel = f.relative_to(src)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out / rel)
        copied.append(rel.as_posix())
    return copied


def stage(src: Path, out: Path) -> list[str]:
    """A folder, or a .tar.gz (model.tar.gz as SageMaker packs one), in the upstream layout -> out."""
    _empty(out)
    if src.is_dir():
        return _copy_upstream(src, out)
    if not tarfile.is_tarfile(src):
        raise LayoutError(f"{src} is neither a folder nor a tar archive")
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(src) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp, filter="data")  # no absolute paths, no '..', no devices or links out
        else:  # Python before 3.11.4: the same refusals by hand
            for m in tar.getmembers():
                if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                    raise LayoutError(f"{src}: member {m.name!r} is not a plain file under the archive root")
            tar.extractall(tmp)
        root = Path(tmp)
        # An archive of one folder (model/config.json ...) as well as of the files themselves.
        if not (root / "config.json").exists():
            subdirs = [p for p in root.iterdir() if p.is_dir()]
            if len(subdirs) == 1 and (subdirs[0] / "config.json").exists():
                root = subdirs[0]
        return _copy_upstream(root, out)


def fetch_hf(out: Path) -> list[str]:
    repo, revision = os.environ["HF_REPO"], os.environ["HF_REVISION"]
    local = os.environ.get("WEIGHTS_LOCAL_SOURCE")
    if local:
        print(f"weight-cache: {repo}@{revision} from {local} (WEIGHTS_LOCAL_SOURCE: rehearsal, no download)")
        return stage(Path(local), out)
    from huggingface_hub import snapshot_download

    with tempfile.TemporaryDirectory() as tmp:
        # local_dir keeps a .cache/ of its own; download apart and copy only the upstream files.
        got = snapshot_download(repo_id=repo, revision=revision, allow_patterns=UPSTREAM_PATTERNS, local_dir=tmp)
        return stage(Path(got), out)


def check(out: Path) -> str:
    """The torch backend's layout, or LayoutError naming what is wrong and where."""
    config = out / "config.json"
    if not config.is_file():
        raise LayoutError(f"{out} has no config.json (the upstream layout: config.json, kokoro-v1_0.pth, voices/*.pt)")
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except ValueError as e:
        raise LayoutError(f"{config} is not JSON: {e}") from e
    missing = [k for k in CONFIG_KEYS if not isinstance(cfg, dict) or k not in cfg]
    if missing:
        raise LayoutError(f"{config} lacks {', '.join(missing)}, which kokoro.KModel reads")
    pths = sorted(out.glob("*.pth"))
    if len(pths) != 1:
        raise LayoutError(f"{out} holds {len(pths)} *.pth files ({', '.join(p.name for p in pths) or 'none'}); "
                          "the torch backend loads exactly one")
    voices = sorted((out / "voices").glob("*.pt"))
    if not voices:
        raise LayoutError(f"{out} has no voices/*.pt")
    for f in [pths[0], *voices]:
        if not zipfile.is_zipfile(f):  # torch.save writes a zip archive since torch 1.6
            raise LayoutError(f"{f} is not a torch.save file (not a zip archive)")
    names = {v.stem for v in voices}
    need = [v for v in os.environ.get("WEIGHTS_VOICES", "").split() if v not in names]
    if need:
        raise LayoutError(f"{out}/voices lacks {', '.join(need)}, which the container's OpenAI voice names use")
    for pin in os.environ.get("WEIGHTS_PINS", "").split():
        rel, _, want = pin.partition("=")
        got = sha256(out / rel) if (out / rel).is_file() else "missing"
        if got != want:
            raise LayoutError(f"{out}/{rel}: sha256 {got}, pinned {want} (weights other than the pinned revision's)")
    return f"torch layout: config.json, {pths[0].name}, {len(voices)} voices"


def manifest(out: Path) -> str:
    lines = [f"{sha256(p)}  {p.relative_to(out).as_posix()}" for p in sorted(out.rglob("*"))
             if p.is_file() and p.name != MANIFEST]
    (out / MANIFEST).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"{MANIFEST}: {len(lines)} files"


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["hf"] and len(argv) == 2:
            print(f"weight-cache: {len(fetch_hf(Path(argv[1])))} files staged")
        elif argv[:1] == ["stage"] and len(argv) == 3:
            print(f"weight-cache: {len(stage(Path(argv[1]), Path(argv[2])))} files staged")
        elif argv[:1] == ["check"] and len(argv) == 2:
            print(f"weight-cache: {check(Path(argv[1]))}")
        elif argv[:1] == ["manifest"] and len(argv) == 2:
            print(f"weight-cache: {manifest(Path(argv[1]))}")
        else:
            print("usage: weight_fetch.py hf OUT | stage SRC OUT | check OUT | manifest OUT", file=sys.stderr)
            return 2
    except (LayoutError, OSError, tarfile.TarError) as e:
        print(f"weight-cache: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
