"""benchmarks/replay_container.py's run-after-run summary: which side of the comparison moves.
(The container runs themselves take minutes and all cores: a benchmark, not a test.)"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import replay_container

ROOT = Path(__file__).resolve().parents[1]


def _value(line: str, after: str) -> float:
    return float(line.split(after, 1)[1].split()[0].rstrip(","))


def test_the_replays_spread_is_pooled_within_each_ladder_and_the_simulation_varies_only_by_ladder():
    # Ladder 1: replays 0.50 and 0.54 (sim 0.55); ladder 2: replays 0.52 and 0.52 (sim 0.60).
    pairs = [{"ladder": 1, "requests": 200, "replay_rej": 0.50, "sim_rej": 0.55},
             {"ladder": 1, "requests": 200, "replay_rej": 0.54, "sim_rej": 0.55},
             {"ladder": 2, "requests": 200, "replay_rej": 0.52, "sim_rej": 0.60},
             {"ladder": 2, "requests": 200, "replay_rej": 0.52, "sim_rej": 0.60}]
    own, se, sim, diff = replay_container.spread_summary(pairs)
    # Deviations from each ladder's mean: +-0.02 and 0, 0; 4 pairs - 2 ladders = 2 degrees of freedom.
    assert "2 degrees of freedom" in own and math.isclose(_value(own, "pooled, 2 degrees of freedom): "),
                                                          math.sqrt((0.02**2 * 2) / 2), abs_tol=5e-4)
    assert math.isclose(_value(se, "): "), math.sqrt(0.52 * 0.48 / 200), abs_tol=5e-4)
    assert "2 ladders" in sim and math.isclose(_value(sim, "(sd): "), math.sqrt(2 * 0.025**2), abs_tol=5e-4)
    # Differences 0.05, 0.01, 0.08, 0.08: mean 0.055, the widest 0.08.
    assert _value(diff, "mean ") == 0.055 and "widest +0.080" in diff


@pytest.mark.slow  # a subprocess
def test_one_ladder_with_runs_is_refused_with_exit_2():
    r = subprocess.run([sys.executable, "benchmarks/replay_container.py", "--qmax", "x.json", "--runs", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--replays" in r.stderr and "Traceback" not in r.stderr
