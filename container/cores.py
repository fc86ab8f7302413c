"""How many CPU cores this process may really use.

os.cpu_count() counts the host's cores. A container gets fewer: its CPU affinity
(os.sched_getaffinity, e.g. docker --cpuset-cpus) and its cgroup CPU quota (cgroup v2
`cpu.max` "QUOTA PERIOD", cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, e.g. docker --cpus
or a SageMaker inference component's NumberOfCpuCoresRequired). Sizing thread pools from the
host's count over-subscribes the quota and the kernel throttles every thread. The usable count
is the minimum of affinity and quota (quota rounded down, at least 1); CPU_CORES overrides both
(rounded down the same way: an inference component's NumberOfCpuCoresRequired comes in 0.25 steps).

Every reader takes the filesystem root, so tests point it at files they write."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast


@dataclass(frozen=True)
class Cores:
    n: int
    source: str  # "CPU_CORES", "cgroup v2 cpu.max ...", "cgroup v1 ...", "affinity", "cpu_count"
    affinity: int | None = None
    quota: float | None = None  # cores the cgroup quota allows (fractional), None = unlimited

    def as_dict(self) -> dict:
        return {"cores": self.n, "source": self.source, "affinity": self.affinity, "quota": self.quota}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_paths(root: Path) -> dict[str, str]:
    """/proc/self/cgroup -> {controller or "" (v2): path inside the hierarchy}."""
    out: dict[str, str] = {}
    text = _read(root / "proc/self/cgroup") or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _dirs_up(base: Path, rel: str) -> list[Path]:
    """The cgroup's directory and its ancestors up to the mount (a parent's limit applies too).
    Inside a cgroup namespace the path is "/" and the mount itself is the cgroup."""
    rel = rel.strip("/")
    d = base / rel if rel else base
    out = [d]
    while d != base and base in d.parents:
        d = d.parent
        out.append(d)
    if base not in out:
        out.append(base)
    return out


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 cpu.max "QUOTA PERIOD" ("max 100000" = unlimited) -> cores, or None."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def parse_cfs(quota_text: str | None, period_text: str | None) -> float | None:
    """cgroup v1 cpu.cfs_quota_us (-1 = unlimited) / cpu.cfs_period_us -> cores, or None."""
    try:
        quota = int(quota_text or "-1")
        period = int(period_text or "100000")
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def cgroup_quota(root: str | Path = "/") -> tuple[float | None, str | None]:
    """(cores the quota allows, where it was read) or (None, None) when nothing limits the CPU."""
    root = Path(root)
    paths = _cgroup_paths(root)
    best: tuple[float | None, str | None] = (None, None)

    def take(q: float | None, where: str) -> None:
        nonlocal best
        if q is not None and (best[0] is None or q < best[0]):
            best = (q, where)

    v2 = root / "sys/fs/cgroup"
    if (v2 / "cgroup.controllers").exists():
        for d in _dirs_up(v2, paths.get("", "/")):
            text = _read(d / "cpu.max")
            if text is not None:
                take(parse_cpu_max(text), f"cgroup v2 {d.relative_to(root)}/cpu.max")
        return best
    for mount in ("sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpu"):
        base = root / mount
        if not base.is_dir():
            continue
        for d in _dirs_up(base, paths.get("cpu", "/")):
            q = parse_cfs(_read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us"))
            take(q, f"cgroup v1 {d.relative_to(root)}/cpu.cfs_quota_us")
        break
    return best


def affinity_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return None


def usable_cores(env_value: float | None = None, root: str | Path = "/",
                 affinity: int | None = -1) -> Cores:
    """CPU_CORES (env_value) if given, else min(affinity, cgroup quota), else os.cpu_count().
    affinity=-1 reads this process's; tests pass a number (or None for "unknown")."""
    if env_value is not None:  # NumberOfCpuCoresRequired may be fractional: round down, at least 1
        return Cores(max(1, int(env_value)), "CPU_CORES", None, float(env_value) if env_value % 1 else None)
    aff = affinity_count() if affinity == -1 else affinity
    quota, where = cgroup_quota(root)
    quota_cores = None if quota is None else max(1, int(quota))
    # cgroup_quota names where it read a quota whenever it finds one, so no source here is None.
    candidates = cast(list[tuple[int, str]], [(c, s) for c, s in ((aff, "affinity"), (quota_cores, where)) if c is not None])
    if not candidates:
        return Cores(max(1, os.cpu_count() or 1), "cpu_count", None, None)
    n, source = min(candidates, key=lambda x: x[0])
    return Cores(max(1, n), source, aff, quota)
