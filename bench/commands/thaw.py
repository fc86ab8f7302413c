"""``bench thaw``: restore an endpoint's scaling after a qmax/ttotal/validate --live run that was killed
outright. Parses (bench/cli/parsers/thaw.py), calls :func:`bench.operations.thaw.thaw`, prints what it did."""

from __future__ import annotations

import argparse
import json

from bench.operations.thaw import thaw


def run(args: argparse.Namespace, session=None) -> int:
    t = thaw(args, session)
    if args.json:
        print(json.dumps({"endpoint": t.endpoint, "action": t.action, "message": t.message, **t.state}))
    else:
        print(t.message)
    return 0
