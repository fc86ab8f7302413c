"""The weight-cache build's own checks (speech/deploy/weight_fetch.py, run as the build runs it): the
torch layout, the pinned digests, the required voices, archives, the manifest; and the voice table."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from speech.deploy.weights import FETCH, REQUIRED_VOICES, UPSTREAM_VOICES

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

CONFIG = {k: 1 for k in ("n_token", "hidden_dim", "style_dim", "n_layer", "max_dur", "dropout",
                         "text_encoder_kernel_size", "n_mels")} | {"vocab": {"a": 1}, "plbert": {}, "istftnet": {}}


def _zip(path: Path, payload: bytes = b"x") -> None:
    """A file in torch.save's container format (a zip archive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)


def upstream(d: Path, voices=("af_heart", "am_michael")) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(CONFIG))
    _zip(d / "kokoro-v1_0.pth")
    for v in voices:
        _zip(d / "voices" / f"{v}.pt")
    (d / "README.md").write_text("not copied")
    return d


def fetch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FETCH), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


def test_stage_check_manifest_on_a_good_layout(tmp_path):
    out = tmp_path / "out"
    assert fetch("stage", str(upstream(tmp_path / "src")), str(out)).returncode == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/am_michael.pt"]  # no README
    ok = fetch("check", str(out), env={"WEIGHTS_VOICES": "af_heart am_michael"})
    assert ok.returncode == 0 and "2 voices" in ok.stdout
    assert fetch("manifest", str(out)).returncode == 0
    lines = (out / "MANIFEST.sha256").read_text().splitlines()
    digest = hashlib.sha256((out / "config.json").read_bytes()).hexdigest()
    assert lines[0] == f"{digest}  config.json" and len(lines) == 4


@pytest.mark.parametrize("breakage, env, words", [
    (lambda d: (d / "voices" / "af_heart.pt").unlink(), {"WEIGHTS_VOICES": "af_heart"}, "voices lacks af_heart"),
    (lambda d: (d / "config.json").write_text("{}"), {}, "lacks vocab, n_token"),
    (lambda d: (d / "config.json").write_text("nope"), {}, "is not JSON"),
    (lambda d: _zip(d / "other.pth"), {}, "holds 2 *.pth files"),
    (lambda d: (d / "kokoro-v1_0.pth").write_bytes(b"pickle"), {}, "not a torch.save file"),
    (lambda d: None, {"WEIGHTS_PINS": "kokoro-v1_0.pth=" + "0" * 64}, "pinned " + "0" * 64),
])
def test_a_broken_layout_fails_the_build_naming_what(tmp_path, breakage, env, words):
    out = upstream(tmp_path / "out")
    (out / "README.md").unlink()
    breakage(out)
    proc = fetch("check", str(out), env=env)
    assert proc.returncode == 1 and proc.stderr.startswith("weight-cache: ") and words in proc.stderr


def test_an_archive_stages_like_a_folder_and_refuses_escapes(tmp_path):
    src = upstream(tmp_path / "src")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="model")  # one folder inside, as `tar czf model.tar.gz model/` makes it
    out = tmp_path / "out"
    assert fetch("stage", str(archive), str(out)).returncode == 0 and (out / "voices" / "am_michael.pt").is_file()
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(src / "config.json", arcname="../../config.json")
    proc = fetch("stage", str(evil), str(tmp_path / "out2"))
    assert proc.returncode == 1 and proc.stderr.startswith("weight-cache: ")


def test_hf_without_network_substitute_needs_huggingface_hub(tmp_path):
    """The rehearsal's substitution is explicit: WEIGHTS_LOCAL_SOURCE stages that folder, no download."""
    out = tmp_path / "out"
    proc = fetch("hf", str(out), env={"HF_REPO": "hexgrad/Kokoro-82M", "HF_REVISION": "a" * 40,
                                       "WEIGHTS_LOCAL_SOURCE": str(upstream(tmp_path / "src"))})
    assert proc.returncode == 0 and "rehearsal, no download" in proc.stdout and (out / "config.json").is_file()


def test_the_openai_names_resolve_to_the_voices_the_build_requires():
    from container.voices import DEFAULT_OPENAI_VOICES, default_voice

    first = [cands[0] for cands in DEFAULT_OPENAI_VOICES.values()]
    assert sorted(first) == sorted(REQUIRED_VOICES) and set(first) <= set(UPSTREAM_VOICES)
    assert all(v[0] in "ab" for v in first)  # American or British English
    assert len(UPSTREAM_VOICES) == 54 and len(set(UPSTREAM_VOICES)) == 54
    # The second candidates are the packaged int8 export's Japanese voices (the onnx backend's only ones).
    assert {cands[1] for cands in DEFAULT_OPENAI_VOICES.values()} <= {"jf_alpha", "jf_gongitsune", "jf_nezumi",
                                                                     "jf_tebukuro", "jm_kumo"}
    assert default_voice(tuple(sorted(UPSTREAM_VOICES)), None) == "af_heart"
    assert default_voice(("jf_alpha", "jm_kumo"), None) == "jf_alpha"
