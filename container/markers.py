"""Stage markers: the one definition of the start-up stage names, their line format and parser.

The container prints one JSON object per line on stdout; `bench ttotal` parses them from the
container's logs (or a local process's stdout) and `bench.load.synthetic` prints the same lines.

Format (exactly): {"event": "stage", "stage": "<name>", "at": "<ISO-8601 UTC with Z>",
"elapsed_s": <float seconds since process start>}

A second line, once, after ``warmup_done`` and before ``ready``: the copy's memory footprint
(``container/footprint.py``), which ``bench tcopy`` records:
{"event": "footprint", "at": ..., "elapsed_s": ..., "device": "cpu"|"cuda", "processes": <int>,
"rss_bytes": <int>, "rss_peak_bytes": <int>, "accelerator_bytes": <int or null>,
"accelerator_source": "nvml"|"torch.cuda.max_memory_reserved"|null, "accelerator_name": <str or null>,
"accelerator_total_bytes": <int or null>}

Why here: the image copies only ``container/`` (container/Dockerfile), so the module the server
emits with must live inside that package; ``container/__init__.py`` imports nothing, and this
module uses the standard library only, so ``bench`` imports it without loading the server's
dependencies. Anything else (a shared top-level module) would be missing from the image.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from datetime import UTC, datetime

STAGES = ("container_started", "framework_init", "weights_ready", "warmup_done", "ready")
_AT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_lock = threading.Lock()


def _process_start_wall() -> float:
    """Wall-clock time the process started; the kernel knows it better than our first import."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        hz = os.sysconf("SC_CLK_TCK")
        return time.time() - uptime + start_ticks / hz
    except (OSError, ValueError, IndexError):
        return time.time()


PROCESS_START = _process_start_wall()


def format_at(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def stage_record(stage: str, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    return {"event": "stage", "stage": stage, "at": format_at(now),
            "elapsed_s": round(max(0.0, now - PROCESS_START), 3)}


def emit_stage(stage: str, stream=None) -> dict:
    rec = stage_record(stage)
    line = json.dumps(rec, separators=(", ", ": "))
    with _lock:
        out = stream or sys.stdout
        out.write(line + "\n")
        out.flush()
    return rec


def parse_at(text: str) -> datetime:
    """A marker's ``at`` (``...Z``) as an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_stage_line(line: str) -> dict | None:
    """Return the marker dict if `line` is a stage marker, else None (any other log line).

    Strict: the stage must be one of STAGES, ``at`` UTC with ``Z`` and ``elapsed_s`` a number;
    a line that only looks like a marker is ignored rather than timed."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("event") != "stage":
        return None
    stage, at, elapsed = obj.get("stage"), obj.get("at"), obj.get("elapsed_s")
    if stage not in STAGES or not isinstance(at, str) or not _AT_RE.match(at):
        return None
    if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)):
        return None
    return {"event": "stage", "stage": stage, "at": at, "elapsed_s": float(elapsed)}


FOOTPRINT_FIELDS = ("device", "processes", "rss_bytes", "rss_peak_bytes", "accelerator_bytes", "accelerator_source",
                    "accelerator_name", "accelerator_total_bytes")
_ACCEL_SOURCES = (None, "nvml", "torch.cuda.max_memory_reserved")


def emit_footprint(footprint: dict, stream=None) -> dict:
    """One footprint line (see the module docstring); ``footprint`` is ``container.footprint.measure``."""
    rec = {"event": "footprint", **{k: v for k, v in stage_record("footprint").items() if k in ("at", "elapsed_s")},
           **{k: footprint.get(k) for k in FOOTPRINT_FIELDS}}
    line = json.dumps(rec, separators=(", ", ": "))
    with _lock:
        out = stream or sys.stdout
        out.write(line + "\n")
        out.flush()
    return rec


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def parse_footprint_line(line: str) -> dict | None:
    """The footprint dict if ``line`` is a footprint marker, else None. Strict like
    :func:`parse_stage_line`: every field present with its type, nothing else."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("event") != "footprint":
        return None
    if set(obj) != {"event", "at", "elapsed_s", *FOOTPRINT_FIELDS}:
        return None
    at, elapsed = obj["at"], obj["elapsed_s"]
    if not isinstance(at, str) or not _AT_RE.match(at) or isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)):
        return None
    if obj["device"] not in ("cpu", "cuda") or not all(_count(obj[k]) for k in ("processes", "rss_bytes", "rss_peak_bytes")):
        return None
    if obj["accelerator_source"] not in _ACCEL_SOURCES or (obj["accelerator_bytes"] is not None and not _count(obj["accelerator_bytes"])):
        return None
    if (obj["accelerator_bytes"] is None) != (obj["accelerator_source"] is None):
        return None
    if obj["accelerator_name"] is not None and not isinstance(obj["accelerator_name"], str):
        return None
    if obj["accelerator_total_bytes"] is not None and not _count(obj["accelerator_total_bytes"]):
        return None
    return {**obj, "elapsed_s": float(elapsed)}
