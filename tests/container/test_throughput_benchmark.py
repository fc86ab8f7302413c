"""benchmarks/container_throughput.py end to end on the sine backend (fast): rounds, the ceiling's
layouts, medians and per-round ratios in the JSON, and bad flags answered with exit code 2."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/container_throughput.py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                               "INFER_CORES": "2", "HOME": str(tmp_path)})


def test_rounds_ceiling_and_ratios(tmp_path):
    out = tmp_path / "tp.json"
    r = _run("--backend", "sine", "--levels", "1,2", "--rounds", "2", "--requests", "2",
             "--json", str(out), tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert "2 cores" in res["machine"] and "backend: sine" in res["machine"]
    assert len(res["ceiling_layouts"]) == 4 and res["ceiling_layout"] in res["ceiling_layouts"]
    # every layout once per round, the parallel ones again next to each level
    samples = res["ceiling_samples"]
    assert {len(v) for k, v in samples.items() if "parallel" in k} == {2 * 3}
    assert {len(v) for k, v in samples.items() if "sequential" in k} == {2}
    for side in ("ours", "baseline"):
        assert [row["concurrency"] for row in res[side]] == [1, 2]
        for row in res[side]:
            assert row["rounds"] == 2 and row["requests"] == 2
            ratios = row["ceiling_ratio_rounds"]
            assert len(ratios) == 2 and row["ceiling_ratio"] == statistics.median(ratios)
            assert row["throughput_audio_s_per_s"] == statistics.median(
                x["throughput_audio_s_per_s"] for x in row["runs"])
            # audio per CPU second: present where the server used measurable CPU (10 ms ticks)
            effs = row["cpu_efficiency_ratio_rounds"]
            assert all(e > 0 for e in effs)
            assert row["cpu_efficiency_ratio"] == (statistics.median(effs) if effs else None)
    assert res["c1_ttfab_over_baseline_full"] > 0
    assert "| concurrency | ours audio s/s |" in r.stdout and "ceiling = " in r.stdout


def test_bad_levels_exit_2(tmp_path):
    r = _run("--backend", "sine", "--levels", "1,x", tmp_path=tmp_path)
    assert r.returncode == 2 and "--levels" in r.stderr
