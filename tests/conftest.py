"""Shared fixtures: the reference artifacts (public figures) as the canonical test input."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "artifacts" / "reference"
QMAX_REF = REFERENCE / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json"
TTOTAL_REF = REFERENCE / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json"


@pytest.fixture
def qmax_ref():
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact

    return load_artifact(QMAX_REF, QmaxArtifact)


@pytest.fixture
def ttotal_ref():
    from speech.files import load_artifact
    from speech.schema.artifacts import TtotalArtifact

    return load_artifact(TTOTAL_REF, TtotalArtifact)


@pytest.fixture(scope="session")
def onnx_server():
    """The real model (onnx, default settings) behind a real server, once per test process: the
    container's tests and bench's chain against the real container (tests/bench/load) share it.
    Tests only read from it; counters on it move with every test: compare differences."""
    from tests.container.conftest import ServerProc

    srv = ServerProc({"BACKEND": "onnx"})
    try:
        srv.wait_ready(timeout=120)
        yield srv
    finally:
        srv.stop()


# --- test tiers ----------------------------------------------------------------------------------
# `make test` runs everything (CI). `make test-fast` (SPEECH_TEST_TIER=fast, -m "not slow") is the
# inner loop: no model, no servers, no subprocesses. A test that needs any of them is marked `slow`
# (per test, or per module with `pytestmark = pytest.mark.slow`; the marker is declared once, in
# pyproject.toml's [tool.pytest.ini_options]); in the fast tier a test that tries
# to start a process or listen on a socket fails at once and says to mark it, so the tier stays honest.

FAST = os.environ.get("SPEECH_TEST_TIER") == "fast"


def pytest_configure(config):
    # A shell without job control starts background commands (`make test &`, nohup, some CI
    # runners) with SIGINT ignored, and every process started from them inherits that: the Ctrl-C
    # tests would then wait forever for an interrupt that never comes. Python's own handler is
    # what an interactive run has; a handled signal is reset to the default in the subprocesses.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


HEAVY_FIXTURES = frozenset({"onnx_server", "server_factory", "container_url", "async_server", "synthetic_40ms", "real_pack",
                            "torch_server"})
"""Fixtures that start the real model, a server or the pack process (``real_pack``; ``pack`` calls the
policies in process): a test using one is `slow` by itself."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # Files with slow tests first, each file's tests in their own order: `make test` hands whole files to
    # its processes (pytest-xdist --dist loadfile) in this order, and a long file handed out last kept one
    # process busy for minutes after the other had run out of work. Tests do not depend on order.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


# Files that load the torch backend's model in the test process (torch, kokoro, the session's random
# checkpoint, the session's loaded backend: about 8 s of CPU in each process that needs them) are one
# unit of `--dist loadfile`'s work, so one process pays for them instead of both. Kept as a list, and
# tests/test_suite_schedule.py fails when one of these files is renamed or moved.
TORCH_FILES = ("tests/container/backends/test_torch_workers.py", "tests/container/backends/test_torch_backend.py",
               "tests/container/test_gpu_benchmark.py")


def xdist_scope(nodeid: str) -> str:
    """The work unit a test belongs to under `--dist loadfile`: its file, or "torch" for TORCH_FILES."""
    path = nodeid.split("::", 1)[0]
    return "torch" if path in TORCH_FILES else path


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None  # pytest-xdist's own scheduler for every other mode
    from xdist.scheduler import LoadFileScheduling

    class TorchTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return TorchTogether(config, log)


class _SlowOnly(RuntimeError):
    pass


def _refuse(what):
    def refuse(*args, **kwargs):
        raise _SlowOnly(f"this test {what} in the fast tier: mark it @pytest.mark.slow")
    return refuse


def pytest_collection_finish(session):
    """In the fast tier, from the end of collection on: patched for the whole run, so module- and
    session-scoped fixtures that start a server are caught too (a function-scoped guard would run
    after them). Collection itself may import what it likes.

    In both tiers, what collection imported lives for the whole run: frozen (see
    _freeze_what_outlives_each_module)."""
    gc.freeze()
    if not FAST:
        return
    subprocess.Popen.__init__ = _refuse("starts a subprocess")  # type: ignore[method-assign]
    socket.socket.listen = _refuse("listens on a socket")  # type: ignore[method-assign]
    try:
        import onnxruntime
    except ImportError:  # without the container extra there is no model to load either
        return
    onnxruntime.InferenceSession.__init__ = _refuse("loads the real model")  # type: ignore[method-assign]


@pytest.fixture(autouse=True, scope="module")
def _freeze_what_outlives_each_module():
    """Every preview runs a full garbage collection, to close the event loops Pulumi's runtime
    leaves in reference cycles (speech.infra.preview). In this process the heap holds every
    package, botocore's service models and moto's backends, and scanning it cost 0.1-0.6 s per
    preview, a quarter of the fast tier. What is alive when a test module starts (imports,
    session fixtures, caches) lives on, so it is moved out of the collector's reach: each later
    collection scans only what the module itself made. Behaviour under test is unchanged; frozen
    objects are simply never freed before the run ends."""
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(autouse=True)
def _signal_handlers_left_as_found():
    """A test that leaves SIGINT or SIGTERM changed (ignored, or a handler of a command that
    returned) breaks every later Ctrl-C test, and the subprocesses it starts inherit an ignored
    signal. Restore them and fail the test that did it, so the failure points at its cause."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = {s.name: signal.getsignal(s) for s, h in before.items() if signal.getsignal(s) is not h}
    for s, h in before.items():
        signal.signal(s, h)
    if changed:
        pytest.fail(f"the test left signal handlers changed: {changed}")
