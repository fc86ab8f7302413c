"""`speech rehearse --cache-dir`: what decides an entry's key, and that an entry is reused whole or made
whole (the rehearsals that use the cache: tests/speech/infra/test_rehearse.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from speech.commands.rehearse import main
from speech.errors import RehearsalError
from speech.infra.rehearse_cache import VENV_READY, build_venv, cache_root, checkpoint_key, stand_in, stand_in_archive, venv_key

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = "numpy==2.2.6 onnxruntime==1.22.1"


def test_a_virtualenv_is_keyed_by_interpreter_and_wheel_set():
    key = venv_key(sys.executable, PACKAGES)
    assert venv_key(sys.executable, "onnxruntime==1.22.1  numpy==2.2.6") == key  # a set: pip installs it whole
    assert venv_key(sys.executable, "numpy==2.2.5 onnxruntime==1.22.1") != key
    assert venv_key(sys.executable, "") != key
    assert venv_key("/usr/bin/false", PACKAGES) != key


def test_a_checkpoint_is_keyed_by_its_voices():
    assert checkpoint_key(("af_heart", "am_adam")) == checkpoint_key(("af_heart", "am_adam"))
    assert checkpoint_key(("af_heart",)) != checkpoint_key(("af_heart", "am_adam"))


def test_a_virtualenv_without_its_ready_mark_is_made_again(tmp_path):
    with build_venv(tmp_path, sys.executable, PACKAGES) as (venv, reused):
        assert not reused and not venv.exists()  # the script makes it
        (venv / "bin").mkdir(parents=True)  # a build stopped half-way through the install
    with build_venv(tmp_path, sys.executable, PACKAGES) as (again, reused):
        assert again == venv and not reused and not venv.exists()  # removed: the script starts it afresh
        venv.mkdir()
        (venv / VENV_READY).touch()  # what the script leaves once every wheel is in
    with build_venv(tmp_path, sys.executable, PACKAGES) as (again, reused):
        assert again == venv and reused
    with build_venv(tmp_path, sys.executable, "numpy==2.2.6") as (other, reused):
        assert other != venv and not reused


def _writer(calls: list[Path]):
    def write(dest: Path, voices: tuple[str, ...]) -> Path:
        calls.append(dest)
        (dest / "voices").mkdir(parents=True)
        for v in voices:
            (dest / "voices" / f"{v}.pt").write_bytes(v.encode())
        return dest
    return write


def test_a_checkpoint_is_written_once_then_reused(tmp_path):
    calls: list[Path] = []
    first, reused = stand_in(tmp_path, ("af_heart",), _writer(calls))
    assert not reused and (first / "voices" / "af_heart.pt").read_bytes() == b"af_heart"
    again, reused = stand_in(tmp_path, ("af_heart",), _writer(calls))
    assert again == first and reused and len(calls) == 1
    other, reused = stand_in(tmp_path, ("am_adam",), _writer(calls))
    assert other != first and not reused and len(calls) == 2
    assert calls[0] != first  # written beside its place, then renamed into it


def test_a_checkpoint_whose_writing_fails_leaves_nothing(tmp_path):
    def broken(dest: Path, voices: tuple[str, ...]) -> Path:
        (dest / "voices").mkdir(parents=True)
        (dest / "voices" / "af_heart.pt").write_bytes(b"half")
        raise KeyboardInterrupt  # Ctrl-C while writing

    with pytest.raises(KeyboardInterrupt):
        stand_in(tmp_path, ("af_heart",), broken)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []
    calls: list[Path] = []
    _, reused = stand_in(tmp_path, ("af_heart",), _writer(calls))
    assert not reused and len(calls) == 1  # the next rehearsal writes it whole


def test_an_archive_is_packed_once_beside_its_checkpoint(tmp_path):
    checkpoint, _ = stand_in(tmp_path, ("af_heart",), _writer([]))
    packs: list[Path] = []

    def pack(src: Path, dest: Path) -> None:
        packs.append(src)
        dest.write_bytes(b"tar of " + src.name.encode())

    archive, reused = stand_in_archive(checkpoint, pack)
    assert not reused and archive == tmp_path / f"{checkpoint.name}.tar.gz" and archive.read_bytes().startswith(b"tar of ")
    assert stand_in_archive(checkpoint, pack) == (archive, True) and packs == [checkpoint]

    def interrupted(src: Path, dest: Path) -> None:
        dest.write_bytes(b"half")
        raise KeyboardInterrupt

    archive.unlink()
    with pytest.raises(KeyboardInterrupt):
        stand_in_archive(checkpoint, interrupted)
    assert not archive.exists() and not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_a_cache_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(RehearsalError, match="is a file, not a directory"):
        cache_root(tmp_path / "file")
    assert cache_root(tmp_path / "new" / "cache").is_dir()  # created, parents too


def test_the_cli_refuses_a_bad_cache_dir_before_it_starts(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code = main(["--stack-dir", str(ROOT / "examples"), "--stack", "cpu", "--cache-dir", str(tmp_path / "file")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("RehearsalError: --cache-dir ") and "Traceback" not in err
