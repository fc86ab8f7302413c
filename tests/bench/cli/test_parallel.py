"""bench.cli.parallel: the worker processes behind --jobs, real ones."""

from __future__ import annotations

import os

import pytest

from bench.cli.parallel import process_map
from bench.errors import WorkerError


def _square(x: int) -> int:
    return x * x


def _pid(_: int) -> int:
    return os.getpid()


def _die(x: int) -> int:
    if x == 3:
        os._exit(9)  # as the kernel's OOM killer would leave it: no exception, no cleanup
    return x


def test_results_come_back_in_order_from_other_processes():
    with process_map(2) as (pmap, width):
        assert width == 2
        assert pmap(_square, list(range(20))) == [x * x for x in range(20)]
        assert os.getpid() not in set(pmap(_pid, list(range(8))))
    with process_map(1) as (pmap, width):
        assert width == 1 and pmap(_pid, [0, 1]) == [os.getpid()] * 2  # 1: in this process, no pool


def test_a_worker_that_dies_is_one_clear_error():
    with pytest.raises(WorkerError, match=r"a worker process died .*--jobs 1"), process_map(2) as (pmap, _):
        pmap(_die, list(range(6)))
