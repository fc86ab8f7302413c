"""``bench thaw``: restore an endpoint's scaling after a qmax/ttotal/validate --live run that was killed outright."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Heavy imports (numpy, pydantic models, the simulator) run inside the functions that use them, so
# --help and argument errors answer without them.
from bench.errors import TargetError, UsageError

DESCRIPTION = """\
Restore the scalable target of an endpoint to exactly what qmax/ttotal/validate --live found before freezing it
(min, max and suspended state, and the desired instance count when qmax pinned one instance),
from the state file they wrote before changing anything
(~/.cache/speech-endpoints/freeze-<endpoint>.json, or --state-dir). Runs that end normally,
fail or are interrupted restore by themselves; thaw is for a run killed outright (SIGKILL).

Without a state file, --min N --max N registers those bounds and resumes all scaling.

  python -m bench thaw --endpoint prod-kokoro-82m
  python -m bench thaw --kubernetes speech/prod-kokoro-82m [--autoscaler keda]

Kubernetes (--kubernetes NAMESPACE/DEPLOYMENT): puts back the HPA's minReplicas/maxReplicas (or
the ScaledObject's paused-replicas annotation, absent or its old value) and the Deployment's
replicas from ~/.cache/speech-endpoints/k8s-<namespace>-<deployment>.json.

Exit 0 restored (or nothing to do), 2 bad input or no such endpoint.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint name")
    p.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="where the freeze state was saved (default ~/.cache/speech-endpoints)")
    p.add_argument("--min", dest="min_capacity", type=int, metavar="N", help="min capacity when no state file exists")
    p.add_argument("--max", dest="max_capacity", type=int, metavar="N", help="max capacity when no state file exists")
    p.add_argument("--region", metavar="REGION", help="AWS region (default: the environment's)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object: {"endpoint", "action": restored|registered|nothing, "message", ...}')
    from bench.k8s.options import add_kubernetes_arguments

    add_kubernetes_arguments(p, "restore this Deployment's autoscaler instead of an endpoint's scaling")


def _report(args: argparse.Namespace, action: str, message: str, **state) -> int:
    if args.json:
        print(json.dumps({"endpoint": args.endpoint, "action": action, "message": message, **state}))
    else:
        print(message)
    return 0


def run(args: argparse.Namespace, session=None) -> int:
    from bench.aws import client as aws
    from bench.aws.freeze import FreezeState, load_state, restore_state, state_path
    from bench.k8s.options import k8s_target

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
        return _report(args, "restored",
                       f"restored {args.endpoint}: min {state.min_capacity}, max {state.max_capacity}, suspended "
                       f"{state.suspended_state}{count} (saved {state.saved_at:%Y-%m-%d %H:%M:%S} UTC by {state.tool})",
                       min_capacity=state.min_capacity, max_capacity=state.max_capacity,
                       suspended_state=state.suspended_state, desired_instance_count=state.desired_instance_count)
    if target is None:
        aws.describe_endpoint(sess, args.endpoint)  # a missing endpoint is a clearer error than a missing target
        return _report(args, "nothing", f"{args.endpoint}: no scalable target and no saved state ({path}); nothing to thaw")
    frozen = any(aws.suspended(target).values())
    if args.min_capacity is None and args.max_capacity is None:
        if frozen:
            raise UsageError(
                f"{args.endpoint}: scaling is suspended (min {target['MinCapacity']}, max {target['MaxCapacity']}) but "
                f"there is no saved state in {path}; pass --min N --max N (the stack's fleet bounds) to resume it"
            )
        return _report(args, "nothing", f"{args.endpoint}: scaling is not suspended and no saved state exists; nothing to thaw")
    if args.min_capacity is None or args.max_capacity is None or not 1 <= args.min_capacity <= args.max_capacity:
        raise UsageError(f"--min/--max: give both, 1 <= min <= max (got {args.min_capacity}, {args.max_capacity})")
    state = FreezeState(
        endpoint=args.endpoint, variant=aws.VARIANT, resource_id=target["ResourceId"],
        min_capacity=args.min_capacity, max_capacity=args.max_capacity,
        suspended_state={k: False for k in aws.SUSPEND_KEYS}, saved_at=target.get("CreationTime") or "1970-01-01T00:00:00Z",
        tool="bench thaw --min/--max",
    )
    restore_state(sess, state, None)
    return _report(args, "registered",
                   f"{args.endpoint}: registered min {args.min_capacity}, max {args.max_capacity}, scaling resumed",
                   min_capacity=args.min_capacity, max_capacity=args.max_capacity,
                   suspended_state=state.suspended_state, desired_instance_count=None)


def _thaw_kubernetes(args: argparse.Namespace, target) -> int:
    from bench.k8s.client import connect
    from bench.k8s.pause import restore_saved, state_file

    args.endpoint = target.provenance
    path = state_file(args.state_dir, target)
    if not path.exists():
        return _report(args, "nothing", f"{target.provenance}: no saved state at {path}; nothing to restore")
    s = restore_saved(connect(args.kubeconfig, args.context), path)
    return _report(args, "restored", f"restored {target.provenance}: {s.autoscaler} {s.scaler} and {s.deployment_replicas} replicas")
