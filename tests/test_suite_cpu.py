"""benchmarks/suite_cpu.py: the per-test CPU it reports is the test process's and its children's,
and its tables add up by file."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import suite_cpu


def test_the_tables_add_each_files_tests_and_rank_them():
    rows = [(2.0, 4.0, "tests/a.py::t1"), (3.5, 3.5, "tests/b.py::t1"), (1.0, 1.5, "tests/a.py::t2[x]"),
            (0.5, 9.0, "tests/c.py::t")]
    out = suite_cpu.table(rows, top=2)
    by_file = out.split("CPU seconds by test")[0]
    assert "| 3.5 | 50.0% | 3.5 | tests/b.py |" in by_file and "| 3.0 | 42.9% | 5.5 | tests/a.py |" in by_file
    assert "tests/c.py" not in by_file and "(top 2 of 3; 7 s in 4 tests)" in by_file
    assert out.index("| 3.5 | 3.5 | tests/b.py::t1 |") < out.index("| 2.0 | 4.0 | tests/a.py::t1 |")


def test_the_plugin_writes_what_each_test_spent_since_the_last(tmp_path, monkeypatch):
    monkeypatch.setenv(suite_cpu.OUT_ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setattr(suite_cpu, "_last", [suite_cpu.tree_cpu_s(suite_cpu.os.getpid())])
    monkeypatch.setattr(suite_cpu, "_last_wall", [time.monotonic()])
    suite_cpu.record("tests/x.py::idle")
    t = time.process_time()
    while time.process_time() - t < 0.3:  # this process's own CPU between the two tests
        pass
    suite_cpu.record("tests/x.py::busy")
    [(idle, _, first), (busy, busy_wall, second)] = suite_cpu.read_rows(tmp_path)
    assert (first, second) == ("tests/x.py::idle", "tests/x.py::busy")
    assert busy >= 0.25 and idle < busy and busy_wall >= 0.25


@pytest.mark.slow  # starts a process
def test_a_child_processes_cpu_counts_while_it_runs_and_after_it_is_reaped():
    before = suite_cpu.tree_cpu_s(suite_cpu.os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
                              "print('done', flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        alive = suite_cpu.tree_cpu_s(suite_cpu.os.getpid())
        assert alive - before >= 0.45  # the live child's own CPU
    finally:
        child.kill()
        child.wait()
    assert suite_cpu.tree_cpu_s(suite_cpu.os.getpid()) - before >= 0.45  # now in this process's cutime


@pytest.mark.slow  # runs pytest with two worker processes
def test_under_xdist_each_test_is_counted_once_by_the_process_that_ran_it(tmp_path):
    """The controller gets every worker's test reports too, and its process tree holds the workers:
    recording there counted each test twice, the second time with both workers' CPU."""
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    out = tmp_path / "out"
    out.mkdir()
    here = Path(suite_cpu.__file__).parent
    env = {**suite_cpu.os.environ, suite_cpu.OUT_ENV: str(out), "PYTHONPATH": str(here)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_cpu", "-n", "2",
                           "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_two.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(n.split("::")[1] for _, _, n in suite_cpu.read_rows(out)) == ["test_a", "test_b"]
    assert not (out / "cpu-main.tsv").exists() and {p.name for p in out.iterdir()} <= {"cpu-gw0.tsv", "cpu-gw1.tsv"}
