"""Freeze an endpoint's autoscaling for the length of a measurement, and always give it back.

A ladder measured while Application Auto Scaling adds instances measures nothing. ``Freeze``
pins the scalable target (min = max = current desired count, or ``instances`` when given) and
suspends dynamic and scheduled scaling; with ``instances`` it also sets the variant's desired
count and waits until exactly that many instances are InService (``bench qmax`` measures one
instance). On every way out (normal end, exception, Ctrl-C, SIGTERM) it gives back the desired
count it changed and registers exactly the min, max and suspended state it found. The prior
state is written to a file BEFORE anything changes, so ``bench thaw`` can restore it after a run
that was killed outright (SIGKILL, power).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bench.aws import client as aws
from bench.errors import BenchError, TargetError, UsageError
from speech.files import atomic_write_text

STATE_DIR_ENV = "SPEECH_ENDPOINTS_STATE_DIR"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the same unwinding as Ctrl-C restores scaling."""


class FreezeState(BaseModel):
    endpoint: str
    variant: str
    resource_id: str
    service_namespace: str = aws.NAMESPACE
    scalable_dimension: str = aws.DIMENSION
    min_capacity: int | None
    """None: no scalable target was registered (only the desired count was changed)."""
    max_capacity: int | None
    suspended_state: dict[str, bool]
    desired_instance_count: int | None = None
    pinned_instances: int | None = None
    """The desired count the run set (None: it did not touch it); restore sets desired_instance_count back."""
    saved_at: datetime
    tool: str


def thaw_command(endpoint: str, state_dir: Path | None = None, region: str | None = None) -> str:
    """The exact ``bench thaw`` command that restores ``endpoint`` from its saved state (the state
    directory absolute and shell-quoted, so it runs from anywhere as printed)."""
    import shlex

    cmd = f"python -m bench thaw --endpoint {endpoint}"
    if state_dir is not None:
        cmd += f" --state-dir {shlex.quote(str(Path(state_dir).absolute()))}"
    return cmd + (f" --region {region}" if region else "")


REDELIVER_S = 0.5
"""How soon a SIGTERM whose exception Python dropped is delivered again (see :func:`sigterm_as_interrupt`)."""

_held = 0  # interrupts_held blocks open in the main thread: a SIGTERM then waits, it is not raised


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while restoring: a second signal mid-restore would leave scaling changed.
    Only the main thread can set signal handlers; elsewhere this holds nothing."""
    global _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        signal.signal(signal.SIGINT, old)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread for the length of the block, so a
    ``kill`` unwinds through the same restore as Ctrl-C.

    Python runs a signal handler wherever the main thread happens to be, and an exception raised
    inside a ``__del__`` or a garbage-collector callback is dropped (handed to
    ``sys.unraisablehook``): a kill landing there would be lost and the run would go on measuring.
    So a dropped :class:`Terminated` is sent again ``REDELIVER_S`` seconds later; one that
    propagated is never sent twice (a second one would land in the unwinding's own cleanup)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = threading.Event()
    sending = threading.Lock()  # the handler is not put back while a redelivery is on its way

    def redeliver() -> None:
        if stop.wait(REDELIVER_S):
            return
        with sending:
            if not stop.is_set():
                # To its own process from a thread that takes it: Linux runs the C-level handler
                # before kill() returns, so the Python handler is due before the lock is let go.
                os.kill(os.getpid(), signal.SIGTERM)

    def on_term(signum, frame):
        if _held or stop.is_set():
            return  # restoring or leaving the block already: the run is on its way out
        raise Terminated()

    old_hook = sys.unraisablehook

    def dropped(unraisable) -> None:
        if isinstance(unraisable.exc_value, Terminated) and not stop.is_set():
            threading.Thread(target=redeliver, name="sigterm-redeliver", daemon=True).start()
        else:
            old_hook(unraisable)

    old = signal.signal(signal.SIGTERM, on_term)
    sys.unraisablehook = dropped
    try:
        yield
    finally:
        stop.set()
        with sending:  # a redelivery already on its way lands (and is let pass) before the handler goes back
            pass
        sys.unraisablehook = old_hook
        signal.signal(signal.SIGTERM, old)


def default_state_dir() -> Path:
    env = os.environ.get(STATE_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "speech-endpoints"


def state_path(state_dir: Path | None, endpoint: str) -> Path:
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


def describe_variant(sess: Any, endpoint: str, variant: str) -> tuple[str, int | None, int | None, str]:
    """(EndpointStatus, CurrentInstanceCount, DesiredInstanceCount, FailureReason)."""
    ep = aws.describe_endpoint(sess, endpoint)
    current, desired = aws.variant_counts(ep, variant)
    return ep.get("EndpointStatus", ""), current, desired, ep.get("FailureReason", "")


def wait_in_service(
    sess: Any,
    endpoint: str,
    variant: str,
    count: int | None,
    *,
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda m: None,
) -> None:
    """Until the endpoint is InService (with exactly ``count`` instances running and desired, when
    given). Raises TargetError when it fails or the time runs out, naming what it saw."""
    t0 = clock()
    while True:
        status, current, desired, reason = describe_variant(sess, endpoint, variant)
        if status == "InService" and (count is None or (current == count and desired == count)):
            return
        if status in ("Failed", "OutOfService", "UpdateRollbackFailed", "Deleting"):
            raise TargetError(
                f"{endpoint} is {status}{f' ({reason})' if reason else ''} while waiting for "
                f"{count if count is not None else 'its'} instance(s) InService; nothing measured"
            )
        waited = clock() - t0
        if waited >= timeout_s:
            want = f"exactly {count} instance(s)" if count is not None else "InService"
            raise TargetError(
                f"{endpoint} did not reach {want} within {timeout_s:g} s (status {status}, current {current}, desired "
                f"{desired}); check the instance quota and capacity for its instance type, or raise --pin-timeout-s"
            )
        log(f"{endpoint}: {status}, {current} running / {desired} desired; waiting for "
            f"{count if count is not None else 'InService'} ({waited:.0f}/{timeout_s:g} s)")
        sleep(poll_s)


def restore_state(
    sess: Any,
    state: FreezeState,
    path: Path | None,
    *,
    timeout_s: float = 1800.0,
    poll_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda m: None,
) -> None:
    """Give back the desired count the run changed, register exactly the scaling that was saved,
    then forget the file (only once AWS has taken it all).

    The desired count goes back while scaling is still suspended at the saved min/max, so no
    policy acts between the two; SageMaker refuses a new count while the endpoint is Updating,
    so it first waits for InService."""
    give_back = False
    if state.pinned_instances is not None and state.desired_instance_count is not None:
        _, _, desired, _ = describe_variant(sess, state.endpoint, state.variant)
        give_back = desired != state.desired_instance_count
    if state.min_capacity is not None and state.max_capacity is not None:
        suspended = {k: True for k in aws.SUSPEND_KEYS} if give_back else dict(state.suspended_state)
        register(sess, state, state.min_capacity, state.max_capacity, suspended)
    if give_back:
        assert state.desired_instance_count is not None
        wait_in_service(sess, state.endpoint, state.variant, None, timeout_s=timeout_s, poll_s=poll_s, sleep=sleep, log=log)
        aws.set_desired_instances(sess, state.endpoint, state.desired_instance_count, state.variant)
        log(f"{state.endpoint}: desired instance count back to {state.desired_instance_count}")
        if state.min_capacity is not None and state.max_capacity is not None:
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
        state_dir: Path | None = None,
        variant: str = aws.VARIANT,
        tool: str = "bench",
        log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
        instances: int | None = None,
        timeout_s: float = 1800.0,
        poll_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.instances = instances
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.sleep = sleep
        self.sess = sess
        self.endpoint = endpoint
        self.variant = variant
        self.state_dir = state_dir
        self.path = state_path(state_dir, endpoint)
        self.tool = tool
        self.log = log
        self.state: FreezeState | None = None
        self.pinned: int | None = None
        self._sigterm = ExitStack()  # sigterm_as_interrupt, held from freezing until restored

    @property
    def active(self) -> bool:
        return self.state is not None

    def __enter__(self) -> Freeze:
        if self.path.exists():
            raise UsageError(
                f"{self.path} holds the scaling state saved by an earlier run that did not finish; restore it "
                f"first with: python -m bench thaw --endpoint {self.endpoint}"
            )
        target = aws.scalable_target(self.sess, self.endpoint, self.variant)
        current, desired = aws.variant_counts(aws.describe_endpoint(self.sess, self.endpoint), self.variant)
        if target is None and self.instances is None:
            self.log(f"{self.endpoint}: no scalable target registered; nothing to freeze")
            return self
        was = desired or current or (int(target["MinCapacity"]) if target else None)
        pin = self.instances if self.instances is not None else was
        self.state = FreezeState(
            endpoint=self.endpoint,
            variant=self.variant,
            resource_id=target["ResourceId"] if target else aws.resource_id(self.endpoint, self.variant),
            service_namespace=target.get("ServiceNamespace", aws.NAMESPACE) if target else aws.NAMESPACE,
            scalable_dimension=target.get("ScalableDimension", aws.DIMENSION) if target else aws.DIMENSION,
            min_capacity=int(target["MinCapacity"]) if target else None,
            max_capacity=int(target["MaxCapacity"]) if target else None,
            suspended_state=aws.suspended(target) if target else {},
            desired_instance_count=was,
            pinned_instances=self.instances,
            saved_at=datetime.now(UTC),
            tool=self.tool,
        )
        # Saved before anything changes: a SIGKILL after this line still leaves a way back.
        atomic_write_text(self.path, self.state.model_dump_json(indent=2) + "\n")
        self._install_sigterm()
        try:
            if target is not None:
                assert pin is not None  # with a target, was falls back to its MinCapacity
                self.pin(pin)
        except Exception as err:
            if aws.is_access_denied(err):
                # AWS refused the first change for want of a permission: nothing changed, and the
                # same permission would refuse the restore. Nothing to give back.
                self._forget()
                raise
            self._restore()
            raise
        except BaseException:
            self._restore()
            raise
        try:
            if self.instances is not None:
                self._set_instances(self.instances, was)
        except BaseException:
            self._restore()
            raise
        scaling = (f"min=max={pin}, dynamic scaling suspended (was min {self.state.min_capacity}, max "
                   f"{self.state.max_capacity})" if target is not None else "no scalable target")
        count = f"; {self.instances} instance(s) InService (was {was})" if self.instances is not None else ""
        self.log(f"froze {self.endpoint}: {scaling}{count}; state in {self.path}")
        return self

    def _set_instances(self, n: int, was: int | None) -> None:
        """Desired count n, then wait until exactly n instances are InService; TargetError when the
        endpoint cannot get there (quota, capacity, a failed update), so nothing measures a fleet."""
        from botocore.exceptions import ClientError

        wait: dict[str, Any] = dict(timeout_s=self.timeout_s, poll_s=self.poll_s, sleep=self.sleep, log=self.log)
        if was != n:
            wait_in_service(self.sess, self.endpoint, self.variant, None, **wait)
            try:
                aws.set_desired_instances(self.sess, self.endpoint, n, self.variant)
            except ClientError as err:
                raise TargetError(
                    f"{self.endpoint}: cannot set {n} instance(s) ({aws.client_error_message(err)}); nothing measured, "
                    "scaling restored"
                ) from None
            self.log(f"{self.endpoint}: desired instance count {was} -> {n}; waiting until exactly {n} is InService")
        wait_in_service(self.sess, self.endpoint, self.variant, n, **wait)

    def pin(self, n: int) -> None:
        """min = max = n with all scaling suspended (n may exceed the saved max: ttotal's +1)."""
        assert self.state is not None
        if self.state.min_capacity is None:
            return  # no scalable target: nothing to pin
        register(self.sess, self.state, n, n, {k: True for k in aws.SUSPEND_KEYS})
        self.pinned = n

    def _install_sigterm(self) -> None:
        self._sigterm.enter_context(sigterm_as_interrupt())

    def _forget(self) -> None:
        """Nothing was changed: drop the saved state and the SIGTERM handler."""
        self.state = None
        self.path.unlink(missing_ok=True)
        self._uninstall_sigterm()

    def _uninstall_sigterm(self) -> None:
        self._sigterm.close()

    def thaw_command(self) -> str:
        return thaw_command(self.endpoint, self.state_dir, getattr(self.sess, "region_name", None))

    def _restore(self) -> None:
        if self.state is None:
            return
        # A second Ctrl-C while restoring would leave scaling frozen: hold it until done.
        try:
            with interrupts_held():
                restore_state(self.sess, self.state, self.path, timeout_s=self.timeout_s, poll_s=self.poll_s,
                              sleep=self.sleep, log=self.log)
        except Exception as err:
            raise BenchError(
                f"could not restore scaling of {self.endpoint} ({aws.client_error_message(err)}); the saved state is "
                f"in {self.path}: run {self.thaw_command()}"
            ) from None
        finally:
            self._uninstall_sigterm()
        count = (f", desired instance count {self.state.desired_instance_count}"
                 if self.state.pinned_instances is not None else "")
        self.log(
            f"restored {self.endpoint}: min {self.state.min_capacity}, max {self.state.max_capacity}, "
            f"suspended {self.state.suspended_state}{count}"
        )
        self.state = None

    def __exit__(self, *exc) -> None:
        self._restore()
