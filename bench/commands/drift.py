"""``bench drift``: read-only reconciliation of deployed scaling with the stack config and plan.
Parses (bench/cli/parsers/drift.py), calls :func:`bench.operations.drift.stack_drift` (or, for
``--kubernetes``, :func:`bench.k8s.commands.drift`), prints the issues."""

from __future__ import annotations

import argparse
import json

from bench.k8s.commands import drift as drift_kubernetes
from bench.k8s.options import k8s_target
from bench.operations.drift import stack_drift


def run(args: argparse.Namespace, session=None) -> int:
    k8s = k8s_target(args)
    if k8s is not None:
        return drift_kubernetes(args, k8s)
    report = stack_drift(args, session)
    ok = not any(report.values())
    if args.json:
        print(json.dumps({"ok": ok, "endpoints": report}, indent=2))
    else:
        for endpoint, found in report.items():
            for i in found:
                print(f"{endpoint}: [{i['kind']}] {i['message']}")
        print("preflight-ok" if ok else f"drift: {sum(map(len, report.values()))} issue(s)")
    return 0 if ok else 1
