"""The copy's memory footprint: /ping's body and the footprint marker on the real onnx server."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from container.footprint import FootprintCache, measure, process_tree
from container.markers import emit_footprint, parse_footprint_line, parse_stage_line


def _rss_tree_kib(pid: int) -> int:
    total = 0
    for p in process_tree(pid):
        with open(f"/proc/{p}/status") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return total


def test_ping_reports_the_copys_footprint(onnx_server):
    body = httpx.get(onnx_server.url + "/ping", timeout=5).json()
    fp = body["footprint"]
    assert fp["device"] == "cpu" and fp["accelerator_bytes"] is None and fp["accelerator_source"] is None
    assert fp["accelerator_name"] is None and fp["accelerator_total_bytes"] is None
    assert fp["processes"] >= 1
    # The int8 model, espeak and onnxruntime's arenas: far more than an idle interpreter (~10 MiB).
    assert fp["rss_bytes"] > 80 * 2**20
    assert fp["rss_peak_bytes"] >= fp["rss_bytes"] * 0.9
    # What /ping says is the server's own resident set, read from outside (within 25 %: it moves).
    outside = _rss_tree_kib(onnx_server.proc.pid) * 1024
    assert abs(fp["rss_bytes"] - outside) < 0.25 * outside


def test_footprint_marker_between_warmup_and_ready(onnx_server):
    events = []
    for line in list(onnx_server.stdout):
        if (m := parse_stage_line(line)) is not None:
            events.append(m["stage"])
        elif (f := parse_footprint_line(line)) is not None:
            events.append("footprint")
            assert f["device"] == "cpu" and f["rss_peak_bytes"] > 80 * 2**20
    assert events.index("warmup_done") < events.index("footprint") < events.index("ready")
    assert events.count("footprint") == 1


# A model that never loads reports no footprint (/ping and stdout): test_protection.py's
# unloadable-model test, on the server it starts for that anyway.


@pytest.mark.slow
def test_process_tree_counts_worker_processes():
    """The torch backend's workers are child processes with their own weights: they count."""
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 * 2**20); import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while measure(root=child.pid)["rss_bytes"] < 60 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in process_tree()
        tree, alone = measure(), measure(root=child.pid)
        assert alone["rss_bytes"] > 60 * 2**20 and tree["processes"] >= 2
        assert tree["rss_bytes"] >= alone["rss_bytes"]
    finally:
        child.kill()
        child.wait()
    assert child.pid not in process_tree()


def test_cache_reads_proc_at_most_every_max_age():
    cache = FootprintCache(max_age_s=3600)
    a = cache.get()
    b = cache.get()
    assert a is b
    assert FootprintCache(max_age_s=0).get() is not FootprintCache(max_age_s=0).get()


def test_footprint_marker_round_trip_and_strictness(capsys):
    rec = emit_footprint({"device": "cuda", "processes": 3, "rss_bytes": 10, "rss_peak_bytes": 12,
                          "accelerator_bytes": 2**30, "accelerator_source": "nvml", "accelerator_name": "NVIDIA A10G",
                          "accelerator_total_bytes": 24 * 2**30})
    line = capsys.readouterr().out.strip()
    parsed = parse_footprint_line(line)
    assert parsed is not None and parsed["accelerator_bytes"] == 2**30 and parsed["at"] == rec["at"]
    obj = json.loads(line)
    bad = [
        {**obj, "extra": 1},
        {**obj, "rss_bytes": -1},
        {**obj, "rss_bytes": True},
        {**obj, "device": "tpu"},
        {**obj, "accelerator_source": None},  # bytes without a source
        {**obj, "accelerator_source": "guess"},
        {**obj, "at": "2026-11-30 03:00:00"},
        {**obj, "accelerator_name": 7},
        {**obj, "accelerator_total_bytes": -5},
        {k: v for k, v in obj.items() if k != "processes"},
    ]
    for b in bad:
        assert parse_footprint_line(json.dumps(b)) is None, b
    assert parse_stage_line(line) is None  # stage parsers never mistake it for a stage


def test_cuda_without_a_readable_device_reports_no_accelerator_memory():
    """Here (no GPU, no pynvml, torch never initialised CUDA) a cuda footprint says so, not 0."""
    fp = measure("cuda")
    assert fp["device"] == "cuda" and fp["accelerator_bytes"] is None and fp["accelerator_source"] is None
    assert fp["rss_bytes"] > 0
