"""SIGTERM during a measurement: raised as Terminated in the main thread, delivered again when the
first exception was dropped (a handler that fires inside __del__ or a gc callback cannot raise),
and held while scaling is being restored."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from bench.aws import freeze
from bench.aws.freeze import Terminated, interrupts_held, sigterm_as_interrupt


class _KillsInDel:
    """Python drops an exception raised in __del__: the place where a real kill can be lost."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGTERM)


def _wait_for_terminated(limit_s: float = 60.0) -> None:
    # Bounded only so a broken build ends; the verdict is whether Terminated came, not how fast.
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_dropped_inside_del_is_delivered_again():
    hook_before = sys.unraisablehook
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            obj = _KillsInDel()
            del obj  # the first Terminated is raised inside __del__ and dropped there
            _wait_for_terminated()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert sys.unraisablehook is hook_before


def test_a_sigterm_is_held_while_restoring_and_not_raised_after():
    restored = []
    with sigterm_as_interrupt():
        with pytest.raises(Terminated):
            signal.raise_signal(signal.SIGTERM)
        with interrupts_held():
            signal.raise_signal(signal.SIGTERM)  # a second kill mid-restore: held
            restored.append("min/max/suspended")
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        # the first kill propagated: it is not delivered again
        time.sleep(freeze.REDELIVER_S * 3)
    assert restored == ["min/max/suspended"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_without_a_signal_leaves_the_handlers_as_it_found_them():
    hook_before = sys.unraisablehook
    with sigterm_as_interrupt():
        assert sys.unraisablehook is not hook_before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and sys.unraisablehook is hook_before
