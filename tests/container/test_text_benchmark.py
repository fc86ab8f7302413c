"""benchmarks/container_text.py end to end on the sine backend (fast): both sides at every level,
the text stage timed for the old splitter and the new one, bad flags answered with exit code 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Starts a server: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/container_text.py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                               "INFER_CORES": "2", "HOME": str(tmp_path)})


def test_both_sides_per_level_and_the_text_stage(tmp_path):
    out = tmp_path / "text.json"
    r = _run("--backend", "sine", "--levels", "1,2", "--rounds", "2", "--requests", "2", "--json", str(out),
             tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert [row["concurrency"] for row in res["levels"]] == [1, 2]
    for row in res["levels"]:
        assert row["off"]["requests"] == row["on"]["requests"] == 4  # 2 rounds x 2
        assert row["delta_p50_ms"] == pytest.approx(row["on"]["ttfab_p50_ms"] - row["off"]["ttfab_p50_ms"])
    stages = next(iter(res["text_stage"].values()))
    assert set(stages) == {"regex (before)", "pysbd", "pysbd + normalization"}
    # the regex made seven pieces of the paragraph's three sentences (Dr., p.m., U.S., Jan., i.e.)
    assert stages["regex (before)"]["segments"] > stages["pysbd"]["segments"] == 3
    assert "| concurrency | requests per side |" in r.stdout


def test_bad_levels_exit_2(tmp_path):
    r = _run("--backend", "sine", "--levels", "0", tmp_path=tmp_path)
    assert r.returncode == 2 and "--levels" in r.stderr
