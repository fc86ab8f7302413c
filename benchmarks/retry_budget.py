"""How long bench's AWS retry budget waits before a fault reaches the command, against botocore's
default (standard mode, 3 attempts, in this botocore) in the same run. Every attempt of one call is answered with the fault at
botocore's ``before-send`` (throttling: a ThrottlingException response; drop: ConnectionClosedError);
the backoff sleeps are recorded, not slept, so the run takes seconds. Prints a markdown table.

    PYTHONPATH=. .venv/bin/python benchmarks/retry_budget.py            # 300 runs per row
    PYTHONPATH=. .venv/bin/python benchmarks/retry_budget.py --runs 1000 --json

No AWS account and no network: nothing leaves the process. Exit 0, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import types


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_):
        yield self.body


def _fault(kind: str):
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ConnectionClosedError

    def answer(request, **_):
        if kind == "throttle":
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
            return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body))
        raise ConnectionClosedError(endpoint_url=request.url)

    return answer


def one_run(budget: str, kind: str) -> list[float]:
    """The backoff sleeps of one DescribeScalableTargets whose every attempt meets ``kind``."""
    import boto3
    import botocore.endpoint
    import botocore.session

    from bench.aws import client as aws

    sleeps: list[float] = []
    botocore.endpoint.time = types.SimpleNamespace(sleep=sleeps.append)  # type: ignore[attr-defined]
    if budget == "bench":
        sess = aws.session("us-east-1")
    else:
        sess = boto3.session.Session(botocore_session=botocore.session.get_session(), region_name="us-east-1")
    client = sess.client("application-autoscaling")
    client.meta.events.register_first("before-send", _fault(kind))
    try:
        client.describe_scalable_targets(ServiceNamespace="sagemaker")
    except Exception:  # noqa: BLE001 - the fault outlasting the budget is the point
        pass
    return sleeps


def row(budget: str, kind: str, runs: int) -> dict:
    samples = [one_run(budget, kind) for _ in range(runs)]
    totals = [sum(s) for s in samples]
    return {"budget": budget, "fault": kind, "attempts": max(len(s) for s in samples) + 1,
            "total_mean_s": round(statistics.mean(totals), 3), "total_max_s": round(max(totals), 3),
            "retry_max_s": [round(max(s[i] for s in samples if len(s) > i), 3) for i in range(max(map(len, samples)))]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=300, help="runs per row (default 300)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error(f"--runs {args.runs}: must be at least 1")
    for var in ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_PROFILE"):  # the baseline is botocore's own default
        os.environ.pop(var, None)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    rows = [row(b, k, args.runs) for k in ("throttle", "drop") for b in ("botocore default", "bench")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    import botocore

    print(f"botocore {botocore.__version__}, {args.runs} runs per row; sleeps recorded, not slept\n")
    print("| fault | budget | attempts | backoff before each retry, max s | total mean s | total max s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['budget']} | {r['attempts']} | {', '.join(f'{x:g}' for x in r['retry_max_s'])} | "
              f"{r['total_mean_s']:g} | {r['total_max_s']:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
