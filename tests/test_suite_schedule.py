"""tests/conftest.py's work units for `make test` (pytest-xdist --dist loadfile)."""
from __future__ import annotations

from tests.conftest import ROOT, TORCH_FILES, xdist_scope


def test_the_torch_files_are_one_unit_and_every_other_file_its_own():
    assert {xdist_scope(f"{f}::test_x") for f in TORCH_FILES} == {"torch"}
    assert xdist_scope("tests/container/test_audio.py::test_wav[pcm]") == "tests/container/test_audio.py"


def test_every_torch_file_named_exists():
    # A renamed file would silently leave the unit and load the model in a second process again.
    assert [f for f in TORCH_FILES if not (ROOT / f).is_file()] == []
