"""Measurements by reference in stack config: the committed stacks hold references, the reference
form previews exactly like the embedded form, a changed file is refused naming both hashes,
paths are relative to the stack file's directory, and qualified stack names are understood."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from speech.errors import ConfigError
from speech.infra.preview import run_preview
from speech.stack.read import file_sha256, load_stack_file, stack_file, stack_name
from tests.stack_files import MODELS, copy_stack, embedded_stack

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT / "Pulumi.dev.yaml"
STACKS = [DEV, ROOT / "examples/Pulumi.multi.yaml", ROOT / "examples/Pulumi.components.yaml"]


def _raw(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())["config"]


def _write_json_stack(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def _plain(o):
    # Assets and archives (the Lambda code, the cache job's source) by their content, not their id().
    return {"asset": type(o).__name__, **vars(o)}


def _view(result):
    # Sorted: the mocks record registrations in the order the runtime's threads send them.
    return (sorted((r.type, r.name, r.parent or "", json.dumps(r.inputs, sort_keys=True, default=_plain)) for r in result.resources),
            json.dumps(result.outputs, sort_keys=True, default=_plain), [(g.model, g.enabled, g.reason) for g in result.gates])


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.name)
def test_committed_stacks_hold_references_with_the_files_sha256(path):
    models = _raw(path)[MODELS]
    for name, entry in models.items():
        for kind, ref in entry["measurements"].items():
            if kind.endswith("_receipt"):
                continue
            assert set(ref) == {"path", "sha256"}, (name, kind)
            assert ref["sha256"] == file_sha256((path.parent / ref["path"]).read_bytes()), (name, kind)


def test_dev_stack_is_under_2kb_per_model():
    assert len(DEV.read_bytes()) / len(_raw(DEV)[MODELS]) < 2048


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.name)
@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_reference_and_embedded_forms_preview_the_same(tmp_path, path):
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    embedded = _write_json_stack(tmp_path / path.name, embedded_stack(path))
    by_ref, by_value = run_preview(path, stack), run_preview(embedded, stack)
    assert _view(by_ref) == _view(by_value)
    assert load_stack_file(path) == load_stack_file(embedded)
    # The embedded form still loads, and says how to migrate; the referenced one does not.
    hint = f"python -m bench plan --stack {stack} --migrate-config"
    assert [w for w in by_value.warnings if hint in w] and not [w for w in by_ref.warnings if "--migrate-config" in w]


@pytest.mark.slow
def test_changed_artifact_is_refused_naming_both_hashes(tmp_path):
    stack = copy_stack(DEV, tmp_path)
    ref = _raw(DEV)[MODELS]["kokoro-82m"]["measurements"]["qmax"]
    file = tmp_path / ref["path"]
    data = json.loads(file.read_text())
    data["q_max"] = 60  # a hand edit of the measurement
    file.write_text(json.dumps(data, indent=2) + "\n")
    with pytest.raises(ConfigError) as err:
        run_preview(stack, "dev")
    msg = str(err.value)
    assert msg.startswith("speech-endpoints:models.kokoro-82m.measurements.qmax: ") and "\n" not in msg
    assert ref["sha256"] in msg and file_sha256(file.read_bytes()) in msg
    # bench reads it through the same parser: one line, exit 2, nothing else printed.
    proc = subprocess.run([sys.executable, "-m", "bench", "plan", "--stack", "dev", "--stack-dir", str(tmp_path),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and ref["sha256"] in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit, needle", [
    (lambda r: r.update(path="artifacts/nope.json"), "artifacts/nope.json: no such file (relative to "),
    (lambda r: r.update(path="/etc/passwd.json"), "must be relative to the stack file's directory"),
    (lambda r: r.update(sha256="abc"), "sha256"),
    (lambda r: r.update(extra=1), "unknown key 'extra' in an artifact reference"),
])
def test_bad_reference_is_one_config_error_naming_the_key(tmp_path, edit, needle):
    stack = copy_stack(DEV, tmp_path)
    data = YAML(typ="safe").load(stack.read_text())
    edit(data["config"][MODELS]["kokoro-82m"]["measurements"]["ttotal"])
    _write_json_stack(stack, data)
    with pytest.raises(ConfigError) as err:
        load_stack_file(stack)
    msg = str(err.value)
    assert msg.startswith("speech-endpoints:models.kokoro-82m.measurements.ttotal") and needle in msg and "\n" not in msg


def test_relative_paths_resolve_against_the_stack_files_directory_not_the_working_one(tmp_path, monkeypatch):
    stack = copy_stack(DEV, tmp_path / "project")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _view(run_preview(stack, "dev")) == _view(run_preview(DEV, "dev"))


def test_qualified_stack_names():
    assert stack_name("dev") == stack_name("acme/dev") == stack_name("acme/speech-endpoints/dev") == "dev"
    assert stack_file(ROOT, "acme/speech-endpoints/dev") == DEV
    with pytest.raises(ConfigError, match="project 'other' is not this one"):
        stack_name("acme/other/dev")
    for bad in ("a/b/c/d", "acme//dev", "dev stack"):
        with pytest.raises(ConfigError):
            stack_name(bad)


@pytest.mark.slow
def test_preview_cli_takes_a_fully_qualified_stack_name():
    proc = subprocess.run([sys.executable, "-m", "speech", "preview", "--stack", "acme/speech-endpoints/dev", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stack"] == "dev" and out["outputs"]["endpoints"]["kokoro-82m"]["name"] == "dev-kokoro-82m"
