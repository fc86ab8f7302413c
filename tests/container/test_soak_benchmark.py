"""benchmarks/container_soak.py end to end for a few seconds on the sine backend: the hostile mix
gets its expected answers, no 5xx, and the final table with its verdict is printed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_soak_smoke(tmp_path):
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "benchmarks/container_soak.py", "--backend", "sine", "--seconds", "6",
                        "--interval-s", "2", "--concurrency", "3", "--burst-s", "1",
                        # seconds, not minutes: start-up growth is not a leak, so RSS gets slack here
                        "--max-rss-growth-pct", "50", "--json", str(out)],
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "| 5xx besides the gate's 503s (all intervals) | 0 | 0 | 0 in all (0) | yes |" in r.stdout
    assert "verdict: within bounds" in r.stdout
    data = json.loads(out.read_text())
    assert data["ok"] and data["q"] == 3 and len(data["intervals"]) == 3
    assert all(iv["good_ok"] > 0 and iv["wrong"] == 0 and iv["errors_5xx"] == 0 for iv in data["intervals"])
    # the hostile kinds cycled (several a second), and bursts of Q + 4 met the gate of Q
    assert sum(iv["hostile"] for iv in data["intervals"]) >= 30
    assert sum(iv["rejected"] for iv in data["intervals"]) > 0
    assert all(iv["rss_mib"] > 10 and iv["fds"] > 5 and iv["threads"] > 2 for iv in data["intervals"])
