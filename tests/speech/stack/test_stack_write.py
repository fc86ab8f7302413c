"""A stack file of the wrong shape that bench writes into is refused by its key path, file
unchanged. Hand edits (and truncated saves) leave ``config``, the models mapping or one model's
entry as a scalar or a list; a writer that assumed mappings raised AttributeError there (a
traceback to the user, found by tests/bench/cli/test_cli_fuzz.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import speech.stack.read as read
from bench.cli.main import main
from speech.errors import ConfigError
from speech.schema.config import ModelConfig, PlanInputs
from speech.stack.write import MODELS_KEY, existing_model_entry, migrate_stack_file, read_stack_file, write_model_entry

ROOT = Path(__file__).resolve().parents[3]
REF = ROOT / "artifacts" / "reference"
QMAX = REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro@sha256:" + "ab" * 32


@pytest.fixture
def model_config() -> ModelConfig:
    # No measurements: nothing is written under artifacts/, so "file unchanged" is the whole check.
    return ModelConfig(instance_type="ml.g5.xlarge", image=IMAGE,
                       plan=PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=50, trough_rps=10, min_instances=1))


MALFORMED = {
    "config is a string": ("config: oops\n", "config"),
    "config is a list": ("config:\n  - a\n", "config"),
    "models is a string": (f"config:\n  {MODELS_KEY}: kokoro\n", f"config.{MODELS_KEY}"),
    "models is a list": (f"config:\n  {MODELS_KEY}:\n    - kokoro-82m\n", f"config.{MODELS_KEY}"),
    "the entry is a number": (f"config:\n  {MODELS_KEY}:\n    kokoro-82m: 3\n", f"config.{MODELS_KEY}.kokoro-82m"),
}


@pytest.mark.parametrize("text,where", MALFORMED.values(), ids=MALFORMED.keys())
def test_writers_refuse_a_malformed_stack_by_key_path(tmp_path, model_config, text, where):
    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text(text)
    calls = [lambda: existing_model_entry(stack, "kokoro-82m"), lambda: migrate_stack_file(stack)]
    if where != f"config.{MODELS_KEY}.kokoro-82m":  # a bad entry itself is replaced whole by the writer
        calls.append(lambda: write_model_entry(stack, "kokoro-82m", model_config))
    for call in calls:
        with pytest.raises(ConfigError, match=f"{stack}: {where}: expected a mapping"):
            call()
        assert stack.read_text() == text


def test_plan_into_a_malformed_stack_is_exit_2_one_line(tmp_path, capsys):
    stack = tmp_path / "Pulumi.s.yaml"
    text = f"config:\n  aws:region: us-east-1\n  {MODELS_KEY}: kokoro\n"
    stack.write_text(text)
    rc = main(["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--peak-rps", "50", "--stack", "s",
               "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("ConfigError: ") and f"config.{MODELS_KEY}: expected a mapping, found str 'kokoro'" in err
    assert stack.read_text() == text


def test_an_empty_models_key_is_filled_and_other_keys_kept(tmp_path, model_config):
    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text(f"config:\n  aws:region: us-east-1  # ours\n  {MODELS_KEY}:\n")
    write_model_entry(stack, "kokoro-82m", model_config)
    data = read_stack_file(stack)
    assert data["config"]["aws:region"] == "us-east-1" and "# ours" in stack.read_text()
    assert data["config"][MODELS_KEY]["kokoro-82m"]["instance_type"] == model_config.instance_type


def test_one_size_cap_and_one_message_for_the_reader_and_the_writers(tmp_path, monkeypatch, model_config):
    # The program's reader (load_stack_file) and bench's writers read a stack file through one
    # function: the same cap, the same words, nothing written.
    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text("config:\n  aws:region: us-east-1\n" + "# padding\n" * 20)
    monkeypatch.setattr(read, "MAX_STACK_FILE_BYTES", 64)
    messages = []
    for attempt in (lambda: read.load_stack_file(stack), lambda: write_model_entry(stack, "kokoro-82m", model_config)):
        with pytest.raises(ConfigError, match="more than a stack file holds") as err:
            attempt()
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "bytes" in messages[0]
    assert stack.read_text().startswith("config:\n  aws:region: us-east-1\n")
