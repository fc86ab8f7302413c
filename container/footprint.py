"""The memory a model copy occupies: what a scheduler packing copies onto an instance must reserve.

A copy is this serving process and every process it started (the torch backend's worker
processes, ``container/backends/torch_workers.py``, each hold their own weights). On the CPU the
footprint is their resident memory; on CUDA it is also their accelerator memory.

- ``rss_bytes``: the sum of VmRSS over the process tree now; ``rss_peak_bytes``: the sum of VmHWM
  (each process's peak resident set, so the warm-up's buffers count). A sum of RSS counts pages
  the processes share (libraries, a forked parent's pages) once per process, so it is an upper
  bound, which is the safe side for packing.
- ``accelerator_bytes`` (CUDA only): NVML's per-process used memory summed over the tree when
  ``pynvml`` is installed (it sees the worker processes too); else, in a process that uses torch
  on CUDA, ``torch.cuda.max_memory_reserved()`` of this process (the caching allocator's peak,
  which excludes the CUDA context and worker processes: ``accelerator_source`` says which), with
  ``accelerator_name`` and ``accelerator_total_bytes`` of the device(s) it was read on.

Standard library only (like :mod:`container.markers`), so ``bench`` can read the format without
the server's dependencies; torch and pynvml are used only when already importable here.
"""
from __future__ import annotations

import os
import sys
import threading
import time

CACHE_S = 2.0
"""/ping reads /proc at most this often (SageMaker and load balancers poll it every few seconds)."""


def _status_kib(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def process_tree(root: int | None = None) -> list[int]:
    """``root`` (default: this process) and every live descendant, root first."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [root]
    for name in entries:
        if name.isdigit():
            ppid = _parent_of(int(name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(sorted(children.get(pid, ()), reverse=True))
    return out


def _nvml(pids: list[int]) -> tuple[int, str, int] | None:
    """(bytes used by ``pids``, name of the first device they use, total bytes of the devices they use)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: report what torch knows instead
        return None
    try:
        wanted, used, names, total = set(pids), 0, [], 0
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            mine = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                    if p.pid in wanted and p.usedGpuMemory is not None]
            if mine:
                used += sum(int(p.usedGpuMemory) for p in mine)
                name = pynvml.nvmlDeviceGetName(handle)
                names.append(name.decode() if isinstance(name, bytes) else str(name))
                total += int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        return (used, names[0], total) if names else None
    except Exception:  # noqa: BLE001 - containers often hide other pids from NVML; fall back
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _torch() -> tuple[int, str, int] | None:
    """(peak bytes reserved by this process's caching allocator, device 0's name, its total bytes)."""
    torch = sys.modules.get("torch")  # only a process that already uses torch pays for the import
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        reserved = int(sum(torch.cuda.max_memory_reserved(d) for d in range(torch.cuda.device_count())))
        props = torch.cuda.get_device_properties(0)
        return reserved, str(props.name), int(props.total_memory)
    except Exception:  # noqa: BLE001 - a broken driver must not turn /ping into a 500
        return None


def measure(device: str = "cpu", root: int | None = None) -> dict:
    """The footprint of the process tree at ``root`` (this process by default) as a JSON object."""
    pids = process_tree(root)
    rss = [v for p in pids if (v := _status_kib(p, "VmRSS")) is not None]
    hwm = [v for p in pids if (v := _status_kib(p, "VmHWM")) is not None]
    out: dict = {"device": "cuda" if device.startswith("cuda") else "cpu", "processes": len(rss),
                 "rss_bytes": sum(rss) * 1024, "rss_peak_bytes": sum(hwm) * 1024,
                 "accelerator_bytes": None, "accelerator_source": None, "accelerator_name": None,
                 "accelerator_total_bytes": None}
    if out["device"] == "cuda":
        for source, read in (("nvml", lambda: _nvml(pids)), ("torch.cuda.max_memory_reserved", _torch)):
            got = read()
            if got is not None:
                out["accelerator_bytes"], out["accelerator_name"], out["accelerator_total_bytes"] = got
                out["accelerator_source"] = source
                break
    return out


class FootprintCache:
    """``measure`` at most every ``CACHE_S`` seconds, so a busy /ping never scans /proc per call."""

    def __init__(self, device: str = "cpu", max_age_s: float = CACHE_S) -> None:
        self.device, self.max_age_s = device, max_age_s
        self._lock = threading.Lock()
        self._at = -1e18
        self._value: dict | None = None

    def get(self) -> dict:
        with self._lock:
            now = time.monotonic()
            if self._value is None or now - self._at > self.max_age_s:
                self._value, self._at = measure(self.device), now
            return self._value
