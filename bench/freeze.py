"""Freeze an endpoint's autoscaling for the length of a measurement, and always give it back.

A ladder measured while Application Auto Scaling adds instances measures nothing. ``Freeze``
pins the scalable target (min = max = current desired count) and suspends dynamic and scheduled
scaling; on every way out (normal end, exception, Ctrl-C, SIGTERM) it registers exactly the
min, max and suspended state it found. The prior state is written to a file BEFORE anything
changes, so ``bench thaw`` can restore it after a run that was killed outright (SIGKILL, power).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from pydantic import BaseModel, ValidationError

from speech.files import atomic_write_text

from . import aws
from .errors import BenchError, UsageError

STATE_DIR_ENV = "SPEECH_ENDPOINTS_STATE_DIR"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the same unwinding as Ctrl-C restores scaling."""


class FreezeState(BaseModel):
    endpoint: str
    variant: str
    resource_id: str
    service_namespace: str = aws.NAMESPACE
    scalable_dimension: str = aws.DIMENSION
    min_capacity: int
    max_capacity: int
    suspended_state: dict[str, bool]
    desired_instance_count: Optional[int] = None
    saved_at: datetime
    tool: str


def default_state_dir() -> Path:
    env = os.environ.get(STATE_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "speech-endpoints"


def state_path(state_dir: Optional[Path], endpoint: str) -> Path:
    return Path(state_dir or default_state_dir()) / f"freeze-{endpoint}.json"


def load_state(path: Path) -> FreezeState:
    try:
        return FreezeState.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no saved freeze state") from None
    except (ValidationError, ValueError) as err:
        raise UsageError(f"{path}: saved freeze state is unreadable ({err.__class__.__name__}); inspect it and "
                         "pass --min/--max to thaw by hand") from None


def register(sess: Any, state: FreezeState, min_c: int, max_c: int, suspended: dict[str, bool]) -> None:
    sess.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=state.service_namespace,
        ResourceId=state.resource_id,
        ScalableDimension=state.scalable_dimension,
        MinCapacity=min_c,
        MaxCapacity=max_c,
        SuspendedState=suspended,
    )


def restore_state(sess: Any, state: FreezeState, path: Optional[Path]) -> None:
    """Register exactly what was saved, then forget the file (only once AWS has taken it)."""
    register(sess, state, state.min_capacity, state.max_capacity, dict(state.suspended_state))
    if path is not None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


class Freeze:
    """Context manager: pin + suspend on enter, restore on every exit path."""

    def __init__(
        self,
        sess: Any,
        endpoint: str,
        state_dir: Optional[Path] = None,
        variant: str = aws.VARIANT,
        tool: str = "bench",
        log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    ) -> None:
        self.sess = sess
        self.endpoint = endpoint
        self.variant = variant
        self.path = state_path(state_dir, endpoint)
        self.tool = tool
        self.log = log
        self.state: Optional[FreezeState] = None
        self.pinned: Optional[int] = None
        self._old_sigterm: Any = None

    @property
    def active(self) -> bool:
        return self.state is not None

    def __enter__(self) -> "Freeze":
        if self.path.exists():
            raise UsageError(
                f"{self.path} holds the scaling state saved by an earlier run that did not finish; restore it "
                f"first with: python -m bench thaw --endpoint {self.endpoint}"
            )
        target = aws.scalable_target(self.sess, self.endpoint, self.variant)
        if target is None:
            self.log(f"{self.endpoint}: no scalable target registered; nothing to freeze")
            return self
        current, desired = aws.variant_counts(aws.describe_endpoint(self.sess, self.endpoint), self.variant)
        pin = desired or current or int(target["MinCapacity"])
        self.state = FreezeState(
            endpoint=self.endpoint,
            variant=self.variant,
            resource_id=target["ResourceId"],
            service_namespace=target.get("ServiceNamespace", aws.NAMESPACE),
            scalable_dimension=target.get("ScalableDimension", aws.DIMENSION),
            min_capacity=int(target["MinCapacity"]),
            max_capacity=int(target["MaxCapacity"]),
            suspended_state=aws.suspended(target),
            desired_instance_count=pin,
            saved_at=datetime.now(timezone.utc),
            tool=self.tool,
        )
        # Saved before anything changes: a SIGKILL after this line still leaves a way back.
        atomic_write_text(self.path, self.state.model_dump_json(indent=2) + "\n")
        self._install_sigterm()
        try:
            self.pin(pin)
        except BaseException:
            self._restore()
            raise
        self.log(
            f"froze {self.endpoint}: min=max={pin}, dynamic scaling suspended "
            f"(was min {self.state.min_capacity}, max {self.state.max_capacity}); state in {self.path}"
        )
        return self

    def pin(self, n: int) -> None:
        """min = max = n with all scaling suspended (n may exceed the saved max: ttotal's +1)."""
        assert self.state is not None
        register(self.sess, self.state, n, n, {k: True for k in aws.SUSPEND_KEYS})
        self.pinned = n

    def _install_sigterm(self) -> None:
        if threading.current_thread() is threading.main_thread():
            def on_term(signum, frame):
                raise Terminated()

            self._old_sigterm = signal.signal(signal.SIGTERM, on_term)

    def _restore(self) -> None:
        if self.state is None:
            return
        main = threading.current_thread() is threading.main_thread()
        # A second Ctrl-C while restoring would leave scaling frozen: hold signals until done.
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            restore_state(self.sess, self.state, self.path)
        except Exception as err:
            raise BenchError(
                f"could not restore scaling of {self.endpoint} ({aws.client_error_message(err)}); the saved state is "
                f"in {self.path}: run python -m bench thaw --endpoint {self.endpoint}"
            ) from None
        finally:
            if main:
                signal.signal(signal.SIGINT, old_int)
                if self._old_sigterm is not None:
                    signal.signal(signal.SIGTERM, self._old_sigterm)
                    self._old_sigterm = None
        self.log(
            f"restored {self.endpoint}: min {self.state.min_capacity}, max {self.state.max_capacity}, "
            f"suspended {self.state.suspended_state}"
        )
        self.state = None

    def __exit__(self, *exc) -> None:
        self._restore()
