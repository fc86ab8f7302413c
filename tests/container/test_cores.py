"""Usable cores from cgroup v1/v2 files written to a tmp root, affinity, and CPU_CORES."""
from __future__ import annotations

import os

import httpx
import pytest
from pydantic import ValidationError

from container.cores import cgroup_quota, parse_cfs, parse_cpu_max, usable_cores
from container.settings import Settings


def _write(root, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _v2(root, cpu_max: str | None, cgroup: str = "/", parent_max: str | None = None):
    _write(root, "proc/self/cgroup", f"0::{cgroup}\n")
    _write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
    if parent_max is not None:
        _write(root, "sys/fs/cgroup/cpu.max", parent_max)
    if cpu_max is not None:
        _write(root, f"sys/fs/cgroup{cgroup.rstrip('/')}/cpu.max", cpu_max)


def test_parsers():
    assert parse_cpu_max("max 100000") is None
    assert parse_cpu_max("200000 100000") == 2.0
    assert parse_cpu_max("150000 100000") == 1.5
    assert parse_cpu_max("garbage") is None
    assert parse_cfs("-1", "100000") is None
    assert parse_cfs("50000", "100000") == 0.5
    assert parse_cfs(None, None) is None


def test_cgroup_v2_quota_in_the_namespace_root(tmp_path):
    _v2(tmp_path, "300000 100000\n")
    q, where = cgroup_quota(tmp_path)
    assert q == 3.0 and where == "cgroup v2 sys/fs/cgroup/cpu.max"
    c = usable_cores(None, tmp_path, affinity=16)
    assert (c.n, c.source, c.affinity, c.quota) == (3, where, 16, 3.0)


def test_cgroup_v2_unlimited_leaves_affinity(tmp_path):
    _v2(tmp_path, "max 100000\n")
    assert cgroup_quota(tmp_path) == (None, None)
    c = usable_cores(None, tmp_path, affinity=6)
    assert (c.n, c.source) == (6, "affinity")


def test_cgroup_v2_nested_takes_the_tightest_ancestor(tmp_path):
    # the process's own cgroup says 4 cores, its parent only 2: the parent's limit wins
    _v2(tmp_path, "400000 100000", cgroup="/kubepods/pod1", parent_max="max 100000")
    _write(tmp_path, "sys/fs/cgroup/kubepods/cpu.max", "200000 100000")
    q, where = cgroup_quota(tmp_path)
    assert q == 2.0 and where == "cgroup v2 sys/fs/cgroup/kubepods/cpu.max"


def test_fractional_quota_rounds_down_but_never_to_zero(tmp_path):
    _v2(tmp_path, "150000 100000")
    assert usable_cores(None, tmp_path, affinity=8).n == 1
    _v2(tmp_path, "50000 100000")
    c = usable_cores(None, tmp_path, affinity=8)
    assert c.n == 1 and c.quota == 0.5


def test_cgroup_v1_cfs_quota(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    q, where = cgroup_quota(tmp_path)
    assert q == 2.5 and where == "cgroup v1 sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"
    assert usable_cores(None, tmp_path, affinity=64).n == 2


def test_cgroup_v1_unlimited_and_affinity_smaller(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "1:cpu:/\n")
    _write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1")
    _write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000")
    assert cgroup_quota(tmp_path) == (None, None)
    assert usable_cores(None, tmp_path, affinity=3).source == "affinity"


def test_affinity_below_quota_wins(tmp_path):
    _v2(tmp_path, "800000 100000")
    c = usable_cores(None, tmp_path, affinity=2)
    assert (c.n, c.source) == (2, "affinity")


def test_cpu_cores_overrides_both(tmp_path):
    _v2(tmp_path, "100000 100000")
    c = usable_cores(12, tmp_path, affinity=2)
    assert (c.n, c.source) == (12, "CPU_CORES")


def test_fractional_cpu_cores_rounds_down_but_never_to_zero(monkeypatch):
    monkeypatch.setenv("CPU_CORES", "2.75")
    assert Settings().cores_info() == {"cores": 2, "source": "CPU_CORES", "affinity": None, "quota": 2.75,
                                       "infer_cores": 2}
    assert usable_cores(0.25).n == 1
    monkeypatch.setenv("CPU_CORES", "0")
    with pytest.raises(ValidationError, match="cpu_cores"):
        Settings()


def test_nothing_readable_falls_back_to_cpu_count(tmp_path):
    c = usable_cores(None, tmp_path, affinity=None)
    assert c.source == "cpu_count" and c.n >= 1


def test_settings_read_cpu_cores(monkeypatch):
    monkeypatch.setenv("CPU_CORES", "3")
    s = Settings()
    assert s.infer_cores == 3 and s.cores_info()["source"] == "CPU_CORES"
    assert Settings(cpu_cores=3, infer_cores=1).cores_info() == {
        "cores": 3, "source": "CPU_CORES", "affinity": None, "quota": None, "infer_cores": 1}


def test_ping_and_log_report_cores(server_factory, sine_server):
    srv = server_factory({"BACKEND": "sine", "CPU_CORES": "5"})
    body = httpx.get(srv.url + "/ping", timeout=10).json()
    assert body["cores"]["cores"] == 5 and body["cores"]["source"] == "CPU_CORES"
    assert body["cores"]["infer_cores"] == 5
    assert any("cores: 5 usable (CPU_CORES" in line for line in srv.stderr)
    # without the override (the session's default server): this machine's affinity or quota,
    # never more than it has
    cores = httpx.get(sine_server.url + "/ping", timeout=10).json()["cores"]
    assert cores["source"] != "CPU_CORES" and 1 <= cores["cores"] <= len(os.sched_getaffinity(0))
