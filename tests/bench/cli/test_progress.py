"""Issue 36: live progress on the long runs; plain lines that never wrap when stderr is not a
terminal (a CI log), nothing under -q."""

from __future__ import annotations

import io

from bench.cli.main import main
from bench.cli.progress import RunProgress


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_throttled_and_never_wrapped():
    out, clock = io.StringIO(), _Clock()
    long_row = "  c=1    " + "p95 123.4 ms  " * 12 + "ok"  # 170 characters: rich would wrap it at 80 in a pipe
    with RunProgress("replay", total=100, stream=out, clock=clock, every_s=5) as p:
        p.update(1, "first")  # printed: the first update always is
        clock.t = 1
        p.update(2, "too soon")  # throttled
        p.line(long_row)
        clock.t = 6
        p.update(50, "half")
    lines = out.getvalue().splitlines()
    assert long_row in lines  # one line, as it was
    assert [x for x in lines if x.startswith("replay:")] == [
        "replay: 1/100 (1%), 0 s, first", "replay: 50/100 (50%), 6 s, half", "replay: 50/100 (50%), 6 s, done"]


def test_disabled_prints_nothing():
    out = io.StringIO()
    with RunProgress("x", total=3, enabled=False, stream=out) as p:
        p.update(1, "a")
        p.line("row")
    assert out.getvalue() == ""


def test_replay_shows_progress_piped_and_nothing_with_q(synthetic_40ms, tmp_path, capsys):
    argv = ["replay", "--url", synthetic_40ms.url, "--trace", "steady:rps=4,duration=2", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "replay: " in err and "answered" in err and "sent" in err
    assert main([*argv, "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_qmax_level_rows_are_whole_lines_in_a_pipe(synthetic_40ms, tmp_path, capsys):
    assert main(["qmax", "--url", synthetic_40ms.url, "--slo-ms", "340", "--levels", "1,2", "--no-refine",
                 "--settle-s", "0", "--measure-s", "0.4", "--out", str(tmp_path)]) == 0
    rows = [x for x in capsys.readouterr().err.splitlines() if x.startswith("  c=")]
    assert len(rows) == 2 and all(x.rstrip().endswith(("ok", "FAIL")) and len(x) > 80 for x in rows)


def test_simulate_reports_each_policy(tmp_path, capsys):
    from .test_results import QMAX, TTOTAL

    assert main(["simulate", "--qmax", QMAX, "--ttotal", TTOTAL, "--peak-rps", "50", "--trough-rps", "5", "--trace",
                 "steady:rps=20,duration=300", "--policies", "plan,floor", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "simulate: 1/2 policies (50%)" in err and "plan done" in err and "floor done" in err
