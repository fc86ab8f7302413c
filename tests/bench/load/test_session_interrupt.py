"""An interrupt that lands while the event loop is starting must leave the ladder's session closable
(the freeze tests' SIGTERM once landed there: exit 1 and a RuntimeError instead of exit 130)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from bench.load.loadgen import Session
from bench.load.targets import HttpTarget


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt / bench.aws.freeze.Terminated: raised by a Python-level handler."""


# The level's task never ran: the wedged loop is left to the process's exit, and its coroutine with it.
@pytest.mark.filterwarnings("ignore:coroutine 'run_level_async' was never awaited:RuntimeWarning")
def test_an_interrupt_inside_the_loops_start_up_leaves_the_session_closable():
    session = Session(HttpTarget("http://127.0.0.1:1"))
    if type(session.loop).__module__.split(".")[0] != "uvloop":
        pytest.skip("uvloop's start-up is what this reproduces")

    # A signal handler runs at the next Python bytecode, wherever that is; uvloop's start-up calls Python's
    # socket.socketpair (its signal wake-up) after marking the loop running. A profile hook that raises on that
    # call puts the interrupt exactly there, every time.
    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "socketpair":
            sys.setprofile(None)
            raise Interrupt

    sys.setprofile(hook)
    try:
        with pytest.raises(Interrupt):
            session.level(1, 0.0, 0.1, ["a"])
    finally:
        sys.setprofile(None)
    assert session.loop.is_running()  # the state the interrupt left: neither runnable nor closable
    session.close()  # must not raise: the interrupt is what the command exits with


def test_ctrl_c_while_the_loop_is_starting_stops_the_level():
    # The mid-ladder Ctrl-C test once ran its whole 30 s level after the signal (exit 2: the level's errors,
    # not 130): the signal landed after the level's handler was set and before uvloop's wake-up socket
    # existed. Here it is sent from exactly there, and the level must end as interrupted, not run out.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    session = Session(HttpTarget("http://127.0.0.1:1"))

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "socketpair":
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGINT)

    sys.setprofile(hook)
    try:
        with pytest.raises(KeyboardInterrupt):
            session.level(1, 0.0, 30.0, ["a"])  # 30 s of level: the interrupt, not the clock, ends it
    finally:
        sys.setprofile(None)
        signal.signal(signal.SIGINT, previous)
        session.close()
