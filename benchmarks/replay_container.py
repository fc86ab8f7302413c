"""The fleet simulator against the real container: one trace replayed open-loop, the same arrivals
simulated on that container's own measured ladder.

    .venv/bin/python benchmarks/replay_container.py [--slo-ms 2500] [--levels 1,2,3,4,6] [--duration 90]
    .venv/bin/python benchmarks/replay_container.py --qmax out/demo/qmax-....json   # reuse a ladder

1. Starts the inference container (real Kokoro-82M, int8 ONNX on CPU) and measures a short
   closed-loop ladder with ``bench qmax --url`` (skipped with --qmax).
2. Starts it again with its gate at that Q_max (QUEUE_MAX_DEPTH) and replays a step trace with
   ``bench replay``: --base-x of the measured throughput at Q_max, then --factor times that from
   --at seconds on, every request at its own timestamp.
3. Simulates the same per-second arrivals on one instance built from the ladder (speech.sim,
   the fixed-fleet policy, no scaling) and prints replayed vs simulated TTFAB p95 (answered) and
   rejected share for the instance model with its service phases fitted to the ladder's level 1
   (speech.sim.instance.service_phases) and, as the baseline of the same run, with exponential
   service (one phase: the plan's chain), the differences, the target (0.05 rejected share, 15 %
   answered p95) and the machine (cores, load average before and after).

Both container runs have deadline shedding off (SLO_MS very large): the simulator models the gate
at Q_max, not the container's shedding of requests that would miss the SLO. Takes 3-5 minutes.
Exit 0 when the run finished (whatever the agreement), 1 when a step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The tolerances benchmarks/replay_synthetic.py measures bench.load.synthetic against.
REJECTED_ABS_TOL = 0.05
P95_REL_TOL = 0.15
"""Issue 23's target for the fitted instance model (the bench.load.synthetic test asserts 25 %)."""
NO_SHEDDING_SLO_MS = 600000


def _container(out: Path, name: str, queue_max_depth: int):
    from bench.operations.demo import Container

    serve = (f"{shlex.quote(sys.executable)} -m container serve --queue-max-depth {queue_max_depth} "
             f"--slo-ms {NO_SHEDDING_SLO_MS} --log-level warning")
    c = Container(serve, out / f"{name}.log", slo_ms=NO_SHEDDING_SLO_MS)
    try:
        c.wait_ready()
    except BaseException:
        c.stop()
        raise
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slo-ms", type=float, default=2500.0, help="SLO of the ladder (default 2500, as the demo)")
    ap.add_argument("--levels", default="1,2,3,4,6", help="ladder levels (default 1,2,3,4,6)")
    ap.add_argument("--settle-s", type=float, default=2.0)
    ap.add_argument("--measure-s", type=float, default=30.0, help="seconds per ladder level (default 30: 10 s gave a p95 of ~10 samples)")
    ap.add_argument("--qmax", type=Path, default=None, help="reuse this qmax artifact instead of measuring a ladder")
    ap.add_argument("--mix", default="short", help="request texts for ladder and replay (default short, as the demo)")
    ap.add_argument("--base-x", type=float, default=0.5, help="rate before the step, x throughput at Q_max (default 0.5)")
    ap.add_argument("--factor", type=float, default=4.0, help="step factor (default 4: 2x the throughput at Q_max)")
    ap.add_argument("--at", type=int, default=20, help="second of the step (default 20)")
    ap.add_argument("--duration", type=int, default=90, help="trace length, s (default 90)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "replay-container")
    ap.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")
    args = ap.parse_args()

    import numpy as np

    from bench.cli.main import main as bench
    from speech.files import load_artifact
    from speech.plan.survival import service_rates
    from speech.schema.artifacts import QmaxArtifact
    from speech.sim.fleet import run_policy, summarize
    from speech.sim.instance import build_instance
    from speech.sim.peers import FixedPolicy

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    t0 = time.monotonic()

    if args.qmax is None:
        top = max(int(x) for x in args.levels.split(","))
        c = _container(out, "container-ladder", queue_max_depth=max(64, 2 * top))
        try:
            print(f"ladder {args.levels} against {c.url} (SLO {args.slo_ms:g} ms, shedding off)", flush=True)
            for old in out.glob("qmax-*.json"):
                old.unlink()
            rc = bench(["qmax", "--url", c.url, "--slo-ms", f"{args.slo_ms:g}", "--levels", args.levels, "--no-refine",
                        "--settle-s", f"{args.settle_s:g}", "--measure-s", f"{args.measure_s:g}", "--mix", args.mix,
                        "--out", str(out)])
        finally:
            c.stop()
        if rc != 0:
            print(f"bench qmax failed (exit {rc})", file=sys.stderr)
            return 1
        qmax_path = next(out.glob("qmax-*.json"))
    else:
        qmax_path = args.qmax
    qmax = load_artifact(qmax_path, QmaxArtifact)
    if qmax.q_max < 1:
        print(f"{qmax_path}: Q_max is 0 at SLO {qmax.slo.ttfab_p95_ms:g} ms; raise --slo-ms", file=sys.stderr)
        return 1
    x_q = float(service_rates([(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder], qmax.q_max)[-1])
    base = round(args.base_x * x_q, 3)
    spec = f"step:base={base:g},factor={args.factor:g},at={args.at},duration={args.duration},seed=3"

    c = _container(out, "container-replay", queue_max_depth=qmax.q_max)
    try:
        print(f"replaying {spec} against {c.url} (gate QUEUE_MAX_DEPTH={qmax.q_max})", flush=True)
        rc = bench(["replay", "--trace", spec, "--url", c.url, "--mix", args.mix, "--slo-ms", f"{args.slo_ms:g}",
                    "--out", str(out)])
    finally:
        c.stop()
    if rc != 0:
        print(f"bench replay failed (exit {rc})", file=sys.stderr)
        return 1
    replay = json.loads((out / "replay-step.json").read_text())
    reqs = replay["per_request"]
    real_rej = replay["rejected"] / replay["requests"]
    real_p95 = replay["ttfab_p95_ms"]

    arrivals = np.bincount(np.floor([r["due_s"] for r in reqs]).astype(int), minlength=args.duration).astype(float)
    sims = {}
    for phases in (None, 1):
        model = build_instance(qmax, None, slo_ms=args.slo_ms, phases=phases)
        label = f"fitted, {model.service_phases} phases" if phases is None else "exponential (1 phase)"
        sims[label] = summarize(run_policy(model, arrivals, FixedPolicy("one", 1)), model, args.slo_ms, planning_total_s=60)
        if phases is None:
            fit = model.service_fit
    load_after = os.getloadavg()
    wall = time.monotonic() - t0

    rows = []
    for label, sim in sims.items():
        d_rej = abs(sim.rejected_share - real_rej)
        d_p95 = abs(sim.ttfab_p95_ms - real_p95) / real_p95 if real_p95 else float("nan")
        rows += [
            (label, "rejected share", f"{real_rej:.3f}", f"{sim.rejected_share:.3f}", f"{d_rej:.3f} abs",
             f"{REJECTED_ABS_TOL:.2f} abs", "yes" if d_rej <= REJECTED_ABS_TOL else "no"),
            (label, "TTFAB p95 (answered)", f"{real_p95:.0f} ms", f"{sim.ttfab_p95_ms:.0f} ms", f"{100 * d_p95:.1f}%",
             f"{100 * P95_REL_TOL:.0f}%", "yes" if d_p95 <= P95_REL_TOL else "no"),
        ]
    sim = sims[next(iter(sims))]
    cores = os.cpu_count()
    print()
    print(f"machine: {cores} cores, load average {load_before[0]:.2f} before / {load_after[0]:.2f} after "
          f"(1 min); one run, {wall / 60:.1f} min")
    print(f"instance: real container, int8 ONNX Kokoro-82M; ladder {[lv.concurrency for lv in qmax.ladder]} "
          f"({qmax_path.name}), Q_max {qmax.q_max} at SLO {qmax.slo.ttfab_p95_ms:g} ms, X(Q_max) {x_q:.2f} rps")
    print(f"trace: {spec}: {replay['requests']} requests, {replay['errors']} errors, "
          f"sent late p99 {replay['send_late_p99_ms']:.1f} ms")
    print(f"service: {fit}")
    print()
    print("| instance model | metric | replay | simulation | difference | target | within |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if args.json:
        args.json.write_text(json.dumps({
            "cores": cores, "load_before": load_before, "load_after": load_after, "q_max": qmax.q_max,
            "x_qmax_rps": x_q, "trace": spec, "requests": replay["requests"], "errors": replay["errors"],
            "replay": {"rejected_share": real_rej, "ttfab_p95_ms": real_p95},
            "simulation": {"rejected_share": sim.rejected_share, "ttfab_p95_ms": sim.ttfab_p95_ms},
            "by_model": {k: {"rejected_share": v.rejected_share, "ttfab_p95_ms": v.ttfab_p95_ms} for k, v in sims.items()},
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
