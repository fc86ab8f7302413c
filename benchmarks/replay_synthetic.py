"""The fleet simulator against bench.load.synthetic: a step trace replayed open-loop against the
synthetic server (deterministic service, a gate at its measured Q_max), the same arrivals simulated
on that server's own measured ladder; replayed vs simulated rejected share and answered TTFAB p95.

    .venv/bin/python benchmarks/replay_synthetic.py [--runs 3] [--service-ms 20] [--slo-ms 130]

Agreement is a measurement, so it lives here and not in the suite (the suite checks the chain on
the same server: tests/bench/commands/test_simulate_replay.py): a busy machine delays the client's
sends and the server's sleeps, and each run prints the load average beside its numbers. Targets:
rejected share within 0.05 absolute, answered p95 within 25 % (the chain assumes exponential service,
this server's is deterministic; the trace is 12 s at 1 s resolution). Exit 0 when every run is within
both, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REJECTED_ABS_TOL = 0.05
P95_REL_TOL = 0.25
SPEC = "step:base=20,factor=4,at=4,duration=12,seed=3"


def one_run(service_ms: float, slo_ms: float) -> dict:
    from bench.cli.main import main
    from bench.load.synthetic import SyntheticServer
    from speech.files import load_artifact
    from speech.schema.artifacts import QmaxArtifact
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.instance import build_instance
    from speech.sim.peers import FixedPolicy

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with SyntheticServer(service_ms=service_ms) as s, redirect_stdout(StringIO()):
            rc = main(["qmax", "--url", s.url, "--slo-ms", str(slo_ms), "--levels", "1,2,4,6,8", "--settle-s", "0.2",
                       "--measure-s", "0.6", "--out", str(out), "--json", "-q"])
        if rc != 0:
            return {"error": f"qmax exited {rc}"}
        qmax = load_artifact(next(out.glob("qmax-*.json")), QmaxArtifact)
        buf = StringIO()
        with SyntheticServer(service_ms=service_ms, queue_max=qmax.q_max) as s, redirect_stdout(buf):
            rc = main(["replay", "--trace", SPEC, "--url", s.url, "--slo-ms", str(slo_ms), "--out", str(out), "--json"])
        if rc != 0:
            return {"error": f"replay exited {rc}"}
        summary = json.loads(buf.getvalue())
        reqs = json.loads((out / "replay-step.json").read_text())["per_request"]
    arrivals = np.bincount(np.floor([r["due_s"] for r in reqs]).astype(int), minlength=12).astype(float)
    model = build_instance(qmax, None)
    sim = summarize(run_policy(model, arrivals, FixedPolicy("one", 1)), model, slo_ms, planning_total_s=60)
    real_rej = summary["rejected"] / summary["requests"]
    return {"q_max": qmax.q_max, "requests": summary["requests"], "send_late_p99_ms": summary["send_late_p99_ms"],
            "replay_rejected": real_rej, "sim_rejected": sim.rejected_share,
            "replay_p95_ms": summary["ttfab_p95_ms"], "sim_p95_ms": sim.ttfab_p95_ms,
            "load_before": load_before, "load_after": os.getloadavg()[0]}


def within(r: dict) -> bool:
    return ("error" not in r and abs(r["sim_rejected"] - r["replay_rejected"]) <= REJECTED_ABS_TOL
            and abs(r["sim_p95_ms"] - r["replay_p95_ms"]) <= P95_REL_TOL * r["replay_p95_ms"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs, each a fresh ladder and replay (default 3)")
    ap.add_argument("--service-ms", type=float, default=20.0, help="the synthetic server's service time (default 20)")
    ap.add_argument("--slo-ms", type=float, default=130.0, help="the ladder's SLO (default 130: Q_max 6 at 20 ms)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.service_ms <= 0 or args.slo_ms <= 0:
        ap.error("--runs must be at least 1, --service-ms and --slo-ms above 0")
    rows = [one_run(args.service_ms, args.slo_ms) for _ in range(args.runs)]
    print(f"| run | Q_max | requests | send late p99 ms | rejected replay | rejected sim | diff (<= {REJECTED_ABS_TOL}) "
          f"| p95 replay ms | p95 sim ms | diff (<= {P95_REL_TOL:.0%}) | load 1 min before/after | within |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        if "error" in r:
            print(f"| {i} | {r['error']} |||||||||| no |")
            continue
        print(f"| {i} | {r['q_max']} | {r['requests']} | {r['send_late_p99_ms']:.1f} | {r['replay_rejected']:.3f} | "
              f"{r['sim_rejected']:.3f} | {r['sim_rejected'] - r['replay_rejected']:+.3f} | {r['replay_p95_ms']:.1f} | "
              f"{r['sim_p95_ms']:.1f} | {(r['sim_p95_ms'] - r['replay_p95_ms']) / r['replay_p95_ms']:+.1%} | "
              f"{r['load_before']:.1f}/{r['load_after']:.1f} | {'yes' if within(r) else 'no'} |")
    return 0 if all(within(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
