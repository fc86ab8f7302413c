"""Followed call by call, a command (bench plan --stack, tune, simulate) parses, calls into the rooms
below it and renders: no function of ``bench.commands`` runs beneath a frame of a lower room (a
callback, a helper or a render the lower room would have to reach back up for). import-linter holds the imports (nothing below the commands
imports them); this holds the calls, which a callback passed down would get around."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli.main import main
from tests.conftest import QMAX_REF, TTOTAL_REF
from tests.stack_files import copy_stack

ROOT = Path(__file__).resolve().parents[3]
ABOVE = ("bench.commands", "bench.cli.main", "bench.cli.results")
"""The command layer and what runs it: calls among these are the command's own business."""


def climbs(run: Callable[[], int]) -> tuple[int, list[str], set[str]]:
    """Run ``run`` with a profiler that records every Python call into ``bench.commands`` made while a
    frame of any other package of ours is on the stack beneath it; and which lower rooms were entered
    (so a test can tell that the command did reach down), each as its room (``bench.operations``) and
    its module (``bench.operations.demo``)."""
    found: list[str] = []
    rooms: set[str] = set()

    def profile(frame, event, _arg):
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("bench.", "speech.", "policy.")):
            return
        if not name.startswith(ABOVE):
            rooms.update((".".join(name.split(".")[:2]), name))
            return
        if not name.startswith("bench.commands"):
            return
        below = frame.f_back
        while below is not None:
            caller = below.f_globals.get("__name__", "")
            if caller.startswith(("bench.", "speech.", "policy.")) and not caller.startswith(ABOVE):
                found.append(f"{name}.{frame.f_code.co_name} called under {caller}.{below.f_code.co_name}")
                break
            below = below.f_back

    sys.setprofile(profile)
    try:
        rc = run()
    finally:
        sys.setprofile(None)
    return rc, found, rooms


def test_plan_stack_stays_below_the_command(tmp_path, capsys):
    copy_stack(ROOT / "examples/Pulumi.multi.yaml", tmp_path, "multi")
    rc, found, rooms = climbs(lambda: main(["plan", "--stack", "multi", "--stack-dir", str(tmp_path),
                                            "--out", str(tmp_path / "out")]))
    assert rc == 0, capsys.readouterr()
    assert "bench.operations" in rooms and "speech.stack" in rooms  # it did go down: the re-plan ran there
    assert found == []


# The SageMaker search under the profiler is the heavy one (about 25 s on this machine): slow tier.
@pytest.mark.parametrize("platform", [pytest.param("sagemaker", marks=pytest.mark.slow), "kubernetes"])
def test_tune_stays_below_the_command(tmp_path, capsys, platform):
    # One short draw and one held-out day: the call graph is the whole protocol's, at the smallest size.
    rc, found, rooms = climbs(lambda: main([
        "tune", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--slo-ms", "3000",
        "--trace", "diurnal:peak=300,hours=1,spikes=1,spike_s=120", "--draws", "1", "--holdout-days", "1",
        "--platform", platform, "--out", str(tmp_path), "--jobs", "1"]))
    assert rc in (0, 1), capsys.readouterr()
    assert {"bench.operations", "speech.sim"} <= rooms
    assert found == []


def test_simulate_stays_below_the_command(tmp_path, capsys):
    # The progress display on (the default): its per-policy callback is what a command would pass down.
    rc, found, rooms = climbs(lambda: main([
        "simulate", "--qmax", str(QMAX_REF), "--ttotal", str(TTOTAL_REF), "--peak-rps", "50", "--trough-rps", "5",
        "--trace", "steady:rps=20,duration=300", "--policies", "plan,floor", "--out", str(tmp_path)]))
    assert rc == 0, capsys.readouterr()
    assert "plan done" in capsys.readouterr().err  # the callback did run
    assert {"bench.operations", "speech.sim"} <= rooms
    assert found == []


# The pack process previews the stack: slow tier.
@pytest.mark.slow
def test_demo_stays_below_the_command(tmp_path, capsys):
    """``bench demo --report-only`` on a directory a demo's measuring steps left (the reference
    artifacts, bench plan's plan and stack): the chain runs in bench.operations.demo, and the
    steps it hands up (bench simulate) run from the command, not beneath the chain."""
    import shutil

    out = tmp_path / "out"
    out.mkdir()
    qp, tp = Path(shutil.copy(QMAX_REF, out)), Path(shutil.copy(TTOTAL_REF, out))
    assert main(["plan", "--qmax", str(qp), "--ttotal", str(tp), "--slo-ms", "3000", "--peak-rps", "20", "--trough-rps", "1",
                 "--out", str(out), "--stack", "local", "--stack-dir", str(tmp_path), "--instance-type", "ml.g5.xlarge",
                 "--allow-config-mismatch"]) in (0, 1)
    rc, found, rooms = climbs(lambda: main(["demo", "--report-only", "--out", str(out), "--stack-dir", str(tmp_path),
                                            "--slo-ms", "3000"]))
    assert rc == 0, capsys.readouterr()
    assert {"bench.operations.demo", "bench.operations.simulate", "speech.sim"} <= rooms
    assert (out / "report.html").exists()
    assert found == []


def test_the_probe_sees_a_climb():
    """The check itself: a function of a lower room that calls back into a command is reported, and
    the same call made from the command layer is not."""
    lower: dict = {"__name__": "speech.sim.fake"}
    command: dict = {"__name__": "bench.commands.fake"}
    exec("def lower_room(callback):\n    return callback()", lower)
    exec("def callback():\n    return 0\ndef direct():\n    return callback()", command)
    _, found, _ = climbs(lambda: lower["lower_room"](command["callback"]))
    assert found == ["bench.commands.fake.callback called under speech.sim.fake.lower_room"]
    _, found, _ = climbs(command["direct"])
    assert found == []
