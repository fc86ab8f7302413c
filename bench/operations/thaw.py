"""``bench thaw``'s restore, the one function the command calls (:func:`thaw`): an endpoint's scaling
(or a Deployment's autoscaler) put back after a qmax/ttotal/validate --live run that was killed
outright, from the state it saved, or registered from --min/--max."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from bench.aws import client as aws
from bench.aws.freeze import FreezeState, load_state, restore_state, state_path
from bench.errors import TargetError, UsageError
from bench.k8s.client import connect
from bench.k8s.options import k8s_target
from bench.k8s.pause import restore_saved, state_file


@dataclass(frozen=True)
class Thawed:
    """What ``bench thaw`` did: ``restored`` (saved state put back), ``registered`` (--min/--max) or
    ``nothing``; the message, the endpoint (or NAMESPACE/DEPLOYMENT) and the state now in force."""

    endpoint: str
    action: str
    message: str
    state: dict = field(default_factory=dict)


def thaw(args: argparse.Namespace, session=None) -> Thawed:
    """Restore the scaling a killed qmax/ttotal/validate --live left frozen, for the parsed flags of
    ``bench thaw`` (saved state first, else --min/--max); UsageError/TargetError when it cannot."""
    k8s = k8s_target(args)
    if k8s is not None:
        return _thaw_kubernetes(args, k8s)
    if not args.endpoint:
        raise UsageError("pass --endpoint NAME (a SageMaker endpoint) or --kubernetes NAMESPACE/DEPLOYMENT")
    sess = session or aws.session(args.region)
    path = state_path(args.state_dir, args.endpoint)
    target = aws.scalable_target(sess, args.endpoint)
    if path.exists():
        state = load_state(path)
        if target is None and state.min_capacity is not None:
            raise TargetError(
                f"{args.endpoint}: no scalable target is registered any more, but {path} holds saved state; "
                "the endpoint may have been redeployed: inspect and delete the file"
            )
        restore_state(sess, state, path, log=lambda m: print(m, file=sys.stderr))
        count = (f", desired instance count {state.desired_instance_count}" if state.pinned_instances is not None else "")
        return _thawed(args.endpoint, "restored",
                       f"restored {args.endpoint}: min {state.min_capacity}, max {state.max_capacity}, suspended "
                       f"{state.suspended_state}{count} (saved {state.saved_at:%Y-%m-%d %H:%M:%S} UTC by {state.tool})",
                       min_capacity=state.min_capacity, max_capacity=state.max_capacity,
                       suspended_state=state.suspended_state, desired_instance_count=state.desired_instance_count)
    if target is None:
        aws.describe_endpoint(sess, args.endpoint)  # a missing endpoint is a clearer error than a missing target
        return _thawed(args.endpoint, "nothing", f"{args.endpoint}: no scalable target and no saved state ({path}); nothing to thaw")
    frozen = any(aws.suspended(target).values())
    if args.min_capacity is None and args.max_capacity is None:
        if frozen:
            raise UsageError(
                f"{args.endpoint}: scaling is suspended (min {target['MinCapacity']}, max {target['MaxCapacity']}) but "
                f"there is no saved state in {path}; pass --min N --max N (the stack's fleet bounds) to resume it"
            )
        return _thawed(args.endpoint, "nothing", f"{args.endpoint}: scaling is not suspended and no saved state exists; nothing to thaw")
    if args.min_capacity is None or args.max_capacity is None or not 1 <= args.min_capacity <= args.max_capacity:
        raise UsageError(f"--min/--max: give both, 1 <= min <= max (got {args.min_capacity}, {args.max_capacity})")
    state = FreezeState(
        endpoint=args.endpoint, variant=aws.VARIANT, resource_id=target["ResourceId"],
        min_capacity=args.min_capacity, max_capacity=args.max_capacity,
        suspended_state={k: False for k in aws.SUSPEND_KEYS}, saved_at=target.get("CreationTime") or "1970-01-01T00:00:00Z",
        tool="bench thaw --min/--max",
    )
    restore_state(sess, state, None)
    return _thawed(args.endpoint, "registered",
                   f"{args.endpoint}: registered min {args.min_capacity}, max {args.max_capacity}, scaling resumed",
                   min_capacity=args.min_capacity, max_capacity=args.max_capacity,
                   suspended_state=state.suspended_state, desired_instance_count=None)


def _thaw_kubernetes(args: argparse.Namespace, target) -> Thawed:
    path = state_file(args.state_dir, target)
    if not path.exists():
        return _thawed(target.provenance, "nothing", f"{target.provenance}: no saved state at {path}; nothing to restore")
    s = restore_saved(connect(args.kubeconfig, args.context), path)
    return _thawed(target.provenance, "restored",
                   f"restored {target.provenance}: {s.autoscaler} {s.scaler} and {s.deployment_replicas} replicas")


def _thawed(endpoint: str, action: str, message: str, **state) -> Thawed:
    return Thawed(endpoint, action, message, state)
