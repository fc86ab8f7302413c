"""``bench tcopy --inference-component NAME``: the copy count of a SageMaker inference component
raised by one and given back, ``starts`` times, each start timed to InService (the AWS side of
the command; :mod:`bench.commands.tcopy` parses, calls :func:`run_sagemaker` and renders).

On every way out the count is put back; when AWS refuses that too, the error names the aws CLI
call that does it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from bench.aws import client as aws
from bench.aws.freeze import interrupts_held, sigterm_as_interrupt
from bench.errors import BenchError, CopyNotReady, TargetError, UsageError
from speech.plan.copies import COPY_SCALABLE_DIMENSION, copy_resource_id
from speech.schema.artifacts import CopyStart


def _component_state(sess: Any, name: str) -> tuple[str, int | None, int | None, dict]:
    ic = aws.describe_inference_component(sess, name)
    current, desired = aws.copy_counts(ic)
    return str(ic.get("InferenceComponentStatus")), current, desired, ic


def check_copy_scaling_suspended(sess: Any, name: str) -> None:
    """Copy scaling that may act during the run would undo (or add to) the measured copy: refuse."""
    resp = sess.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace=aws.NAMESPACE, ResourceIds=[copy_resource_id(name)], ScalableDimension=COPY_SCALABLE_DIMENSION)
    for target in resp.get("ScalableTargets", []):
        state = aws.suspended(target)
        if not (state["DynamicScalingInSuspended"] and state["DynamicScalingOutSuspended"]):
            raise UsageError(
                f"copy scaling of inference component {name!r} is active (min {target.get('MinCapacity')}, max "
                f"{target.get('MaxCapacity')}): it would undo the copy this run adds. Suspend it for the run "
                f"(RegisterScalableTarget {copy_resource_id(name)} with SuspendedState DynamicScalingInSuspended and "
                "DynamicScalingOutSuspended true) and resume it after; nothing changed"
            )


def put_back_command(name: str, count: int, region: str | None = None) -> str:
    """The aws CLI call that sets the component's copy count (UpdateInferenceComponentRuntimeConfig)."""
    return (f"aws sagemaker update-inference-component-runtime-config --inference-component-name {name} "
            f"--desired-runtime-config CopyCount={count}" + (f" --region {region}" if region else ""))


FAILED_STATES = ("Failed", "Deleting")
"""InferenceComponentStatus values a copy cannot come back from by waiting."""


def run_sagemaker(
    sess: Any, name: str, starts: int, *, poll_s: float, timeout_s: float,
    clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    done: Callable[[int, CopyStart], None] = lambda i, s: None,
    notify: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> tuple[list[CopyStart], dict]:
    """``starts`` copy-count increases of one, each timed to InService and given back before the
    next. On every way out (an AWS error past the retry budget, a Failed component, Ctrl-C,
    SIGTERM) the count is put back and ``notify`` says so; when AWS refuses that too, a
    :class:`~bench.errors.BenchError` names the aws CLI call that puts it back."""
    status, base, desired, ic = _component_state(sess, name)
    if status != "InService" or base is None or base != desired:
        raise TargetError(f"inference component {name!r} is {status} with {base} of {desired} copies; wait until it is "
                          "InService with its copies all current")
    check_copy_scaling_suspended(sess, name)
    sm = sess.client("sagemaker")
    region = getattr(sess, "region_name", None)

    def set_count(n: int) -> None:
        try:
            sm.update_inference_component_runtime_config(InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": n})
        except ClientError as err:
            if aws.is_access_denied(err) or aws.is_throttled(err):
                raise
            raise TargetError(f"inference component {name!r}: cannot set {n} copies ({aws.client_error_message(err)})") from None

    def wait_for(n: int, t0: float, what: str) -> float:
        while True:
            status, current, _, info = _component_state(sess, name)
            if status in FAILED_STATES:
                raise CopyNotReady(f"inference component {name!r} went {status} while {what}: "
                                   f"{info.get('FailureReason', 'no reason given')}; nothing written")
            if status == "InService" and current == n:
                return clock() - t0
            if clock() - t0 > timeout_s:
                raise CopyNotReady(f"inference component {name!r}: not InService with {n} copies after --timeout-s "
                                   f"{timeout_s:g} while {what} (now {status}, {current} copies); nothing written")
            sleep(poll_s)

    def put_back(raised: bool, why: BaseException) -> None:
        """The desired count back to ``base`` (unless AWS already has it there)."""
        try:
            _, _, now, info = _component_state(sess, name)
        except Exception:  # noqa: BLE001 - cannot read it: set it anyway
            now, info = None, {}
        if now == base:
            if raised:
                notify(f"restored {name}: copy count {base}, as before the run")
            return
        try:
            set_count(base)
        except Exception as err:  # noqa: BLE001 - whatever AWS said, the count is not back: say what to run
            stopped = "Ctrl-C" if isinstance(why, KeyboardInterrupt) else (
                f"{why.__class__.__name__}: {aws.client_error_message(why) if isinstance(why, Exception) else why}")
            raise BenchError(
                f"the run stopped ({stopped}) and could not put the copy count of inference component {name} back to "
                f"{base} ({aws.client_error_message(err)}); its desired count is "
                f"{now if now is not None else 'unknown'}: run {put_back_command(name, base, region)}"
            ) from None
        status = info.get("InferenceComponentStatus")
        after = (f"; it is {status} ({info.get('FailureReason', 'no reason given')}): fix the cause and redeploy it "
                 f"(pulumi up), then check it with aws sagemaker describe-inference-component --inference-component-name "
                 f"{name}" if status in FAILED_STATES else "")
        notify(f"restored {name}: copy count set back to {base} (was {now if now is not None else 'unknown'}){after}")

    out: list[CopyStart] = []
    pending = raised = False
    """pending: the count may differ from base (a raise was sent); raised: AWS took one."""
    with sigterm_as_interrupt():
        try:
            for i in range(starts):
                started_at = datetime.fromtimestamp(clock(), tz=UTC)
                t0 = clock()
                pending = True
                set_count(base + 1)
                raised = True
                ready = round(wait_for(base + 1, t0, f"adding copy {base + 1}"), 3)
                start = CopyStart(started_at=started_at, weights_ready_s=ready, ready_s=ready,
                                  source=f"UpdateInferenceComponentRuntimeConfig CopyCount {base} -> {base + 1}, then "
                                         f"DescribeInferenceComponent InService with CurrentCopyCount {base + 1} (polled "
                                         f"every {poll_s:g} s: up to one poll late); no stage markers, so weights_ready_s "
                                         "= ready_s")
                out.append(start)
                set_count(base)
                wait_for(base, clock(), f"giving copy {base + 1} back")
                pending = raised = False
                done(i, start)
        except BaseException as why:
            if pending:
                with interrupts_held():
                    put_back(raised, why)
            raise
    return out, ic
