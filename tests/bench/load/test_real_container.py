"""bench's load against the real inference container (real model, onnx).

The chain on the real model (qmax's ladder, ttotal's second container with every stage marker, plan,
tune, simulate) is `bench demo --quick`'s, tested in tests/bench/commands/test_demo.py; the ladder's
stepping and each command's flags are tested on servers built for them."""

from __future__ import annotations

import httpx
import pytest

from bench.cli.main import main

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def container_url(onnx_server):
    """The session's real-model server (tests/conftest.py): a test process that ran tests/container
    files before this one has it started already, and the replay below only reads from it."""
    # One synthesis before any measurement: the first run of an onnx session pays for its
    # allocations, which on a busy machine alone can outlast a short measuring window.
    assert httpx.post(onnx_server.url + "/invocations", json={"text": "Warm up."}, timeout=120).status_code == 200
    return onnx_server.url


def test_replay_on_two_locust_workers_against_the_container(container_url, tmp_path, capsys):
    """The Locust engine's stream client against the real container's /invocations (chunked PCM)."""
    capsys.readouterr()
    assert main(["replay", "--trace", "steady:rps=1,duration=5", "--url", container_url, "--mix", "short", "--engine", "locust",
                 "--workers", "2", "--out", str(tmp_path), "--json"]) == 0
    import json

    art = json.loads((tmp_path / "replay-steady.json").read_text())
    assert art["engine"] == "locust" and art["workers"] == 2 and art["dead_workers"] == []
    # The container's gate may turn some away on a busy CPU; every request is answered or rejected.
    assert art["requests"] == art["scheduled"] >= 3 and art["errors"] == 0 and art["ok"] >= 1, art["per_request"]
    assert all(r["ttfab_ms"] > 0 for r in art["per_request"] if r["status"] == "ok")
