"""Faults while writing: a full disk, a file-size limit, another bench holding the stack file, two
writers at once, an editor saving mid-write, Ctrl-C. The previous artifact survives each, and
nobody's change is lost silently."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli.main import main
from speech.stack.write import MODELS_KEY, lock_path, read_stack_file, stack_lock, write_model_entry

ROOT = Path(__file__).resolve().parents[3]
REF = ROOT / "artifacts" / "reference"
QMAX = REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL = REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"
PLAN = ["plan", "--qmax", str(QMAX), "--ttotal", str(TTOTAL), "--peak-rps", "50"]


def leftovers(d: Path) -> list[Path]:
    return [p for p in d.rglob("*.tmp")]


def test_full_disk_leaves_the_previous_artifact_intact(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert main([*PLAN, "--out", str(out)]) == 0
    plan = out / "plan-kokoro-82m.json"
    before = plan.read_bytes()

    def full(fd):  # the kernel's answer when the data cannot reach the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    capsys.readouterr()
    rc = main([*PLAN[:-1], "80", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"OutputError: {plan}: write failed (No space left on device, ENOSPC); the previous file is unchanged")
    assert plan.read_bytes() == before and leftovers(tmp_path) == []


@pytest.mark.slow
def test_file_size_limit_in_a_real_process_leaves_the_previous_artifact(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse the write itself (EFBIG): no injection in our process."""
    out = tmp_path / "out"
    assert main([*PLAN, "--out", str(out)]) == 0
    plan = out / "plan-kokoro-82m.json"
    before = plan.read_bytes()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal's kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    r = subprocess.run([sys.executable, "-m", "bench", *PLAN[:-1], "90", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "Traceback" not in r.stderr and line.startswith("OutputError: ") and "EFBIG" in line
    assert plan.read_bytes() == before and leftovers(tmp_path) == []


HOLD = """
import sys, time
from pathlib import Path
from speech.stack.write import stack_lock
with stack_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.mark.slow
def test_a_held_stack_file_is_refused_naming_the_holder(tmp_path, capsys, monkeypatch):
    import speech.stack.write as stack_yaml

    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text("config:\n  aws:region: us-east-1\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(stack), "30"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(stack_yaml, "LOCK_WAIT_S", 0.3)
        rc = main([*PLAN, "--stack", "s", "--stack-dir", str(tmp_path), "--instance-type", "ml.g5.xlarge",
                   "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and err[-1].startswith(f"StackBusyError: {stack}: being written by pid {holder.pid}")
        assert "nothing was written" in err[-1]
        assert stack.read_text() == "config:\n  aws:region: us-east-1\n"
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the killed holder's lock: the next writer goes through.
    assert main([*PLAN, "--stack", "s", "--stack-dir", str(tmp_path), "--instance-type", "ml.g5.xlarge",
                 "--out", str(tmp_path / "out")]) == 0
    assert "kokoro-82m" in read_stack_file(stack)["config"][MODELS_KEY]


def _writer(args):
    path, model, entry_json, rounds = args
    from speech.schema.config import ModelConfig

    entry = ModelConfig.model_validate_json(entry_json)
    for _ in range(rounds):
        write_model_entry(Path(path), model, entry)


@pytest.mark.slow  # seconds each (a tune, previews or the pack on several stacks): make test, not test-fast
def test_concurrent_writers_lose_no_change(tmp_path, model_config):
    """Four processes each write their own model into one stack file, again and again: every model
    is there at the end (without the lock, read-modify-write races drop entries)."""
    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text("config:\n  aws:region: us-east-1  # kept\n")
    entry = model_config.model_dump_json()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_writer, [(str(stack), f"m{i}", entry, 5) for i in range(4)])
    data = read_stack_file(stack)
    assert sorted(data["config"][MODELS_KEY]) == ["m0", "m1", "m2", "m3"]
    assert "# kept" in stack.read_text() and leftovers(tmp_path) == []


def test_an_editor_saving_mid_write_is_not_overwritten(tmp_path, model_config, monkeypatch):
    """The user's editor (no lock) saves while bench serializes the file: bench refuses, the
    user's text stays."""
    from ruamel.yaml import YAML

    from speech.stack.write import StackBusyError

    stack = tmp_path / "Pulumi.s.yaml"
    stack.write_text("config:\n  aws:region: us-east-1\n")
    edited = "config:\n  aws:region: eu-west-1  # the user's edit\n"
    real_dump = YAML.dump

    def dump_while_the_user_saves(self, data, stream):
        stack.write_text(edited)
        return real_dump(self, data, stream)

    monkeypatch.setattr(YAML, "dump", dump_while_the_user_saves)
    with pytest.raises(StackBusyError, match="changed on disk while bench was writing it"):
        write_model_entry(stack, "kokoro-82m", model_config)
    assert stack.read_text() == edited


def test_the_lock_is_released_and_names_its_holder(tmp_path):
    stack = tmp_path / "Pulumi.s.yaml"
    with stack_lock(stack):
        holder = json.loads(lock_path(stack).read_text())
        assert holder["pid"] == os.getpid() and holder["since"].endswith("Z")
    with stack_lock(stack, wait_s=0):  # released: taken again at once
        pass


def test_ctrl_c_is_exit_130_one_line(synthetic_40ms, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "bench", "qmax", "--url", synthetic_40ms.url, "--levels", "1,2",
                             "--settle-s", "0", "--measure-s", "30", "--out", str(out), "-q"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("Interrupted: ")
    assert not list(out.glob("qmax-*.json")) and leftovers(tmp_path) == []
