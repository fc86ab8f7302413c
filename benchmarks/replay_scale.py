"""Open-loop replay at scale: the asyncio engine against Locust with 1 and 2 worker processes, one
table from one run, against a stand-in fleet started here with a known time to the first byte.

    .venv/bin/python benchmarks/replay_scale.py [--delay-ms 100] [--seconds 8] [--warmup-s 1]
        [--rates 250,500,1000,2000,3000,4000,5000,6000,8000]

The stand-in is ``bench.load.synthetic --engine raw`` with unbounded concurrency and a fixed first-byte
delay (--delay-ms): its true TTFAB is known, so a measured TTFAB minus the delay is the client's
timing error, and requests never queue, so lateness is the client's alone.

1. Highest rate with send-late p99 < 10 ms, and < 50 ms (bench replay's own "client fell behind"
   warning): each engine replays a steady trace of --seconds at each of --rates (ascending,
   stopping at 500 rps or above once late p99 reaches 50 ms; a run at 10 ms or more is run once
   more and the better kept, so one neighbour's burst on a shared machine does not set the limit):
   the asyncio engine (``--engine local``, one process), Locust with 1 worker, Locust with 2
   workers (real master and worker processes).
   Requests due in the first --warmup-s of each run are the warm-up and are left out of the late
   and TTFAB statistics (their worst lateness is printed apart): every run starts cold (new
   connections; Locust: new processes, gevent's hub), and in a run of a few seconds one cold
   start of a few tens of ms is over 1 % of the requests, so it would set the p99 of every rate
   alike and say nothing about the rate an engine sustains.
2. TTFAB error at 500 rps (measured minus --delay-ms), p50 and p99, for both engines (Locust with
   1 and with 2 workers), from the same runs.
3. SageMaker path: client CPU per request through the stand-in runtime API
   (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME) at --sm-rps: boto3 on a thread per request (the asyncio
   engine's SageMakerTarget) against one Locust worker's SigV4-signed event-stream client; the
   requests/s one worker core sustains, and the cores 5,000 rps needs, follow from it.

Client and server share this machine's cores, as in issue 33's table; the stand-in's own CPU is read
from /proc, so each rate's row says how many of the cores the client and the stand-in kept busy.
Takes 6-8 minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LATE_OK_MS = 10.0
LATE_WARN_MS = 50.0
"""bench replay's own warning threshold (client fell behind): on a machine whose other load alone
costs ~10 ms of run-queue wait, the engines part ways here."""
TTFAB_AT_RPS = 500
SCALE_TARGET = 1.6
"""Issue 33: two workers sustain at least this many times one worker's rate (send-late p99 < 10 ms)."""
ERROR_TARGET_MS = 5.0
"""Issue 33: Locust's TTFAB error p99 at 500 rps within this of the local engine's."""


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; nan elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def steady_times(rps: float, seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(rps * seconds)
    return np.sort(rng.random(n) * seconds)


def _stats(due_s: np.ndarray, late_ms: np.ndarray, ttfab_ms: np.ndarray, ok: np.ndarray, warmup_s: float) -> dict:
    """Late p99 and TTFAB of the requests due after the warm-up (all of them when none is)."""
    steady = due_s >= warmup_s
    if not steady.any():
        steady = np.ones_like(steady)
    late = late_ms[steady] if late_ms.size else np.array([np.inf])
    return {"late_p99": float(np.percentile(late, 99)) if late.size else float("inf"),
            "warmup_late_max": float(late_ms[~steady].max()) if (~steady).any() else 0.0,
            "ttfab": ttfab_ms[steady & ok], "ok": int((steady & ok).sum()), "n": int(steady.sum())}


def run_local(target, times: np.ndarray, warmup_s: float) -> dict:
    from bench.load.loadgen import new_event_loop
    from bench.operations.replay import open_loop_slots, replay_async

    texts = ["Hello there."] * times.size
    loop = new_event_loop()
    cpu0 = time.process_time()
    try:
        peak = float(np.bincount(times.astype(int)).max()) if times.size else 1.0
        sent = loop.run_until_complete(replay_async(target, times.tolist(), texts, open_loop_slots(peak)))
    finally:
        loop.close()
    cpu = time.process_time() - cpu0
    due = np.array([x.due_s for x in sent])
    late = np.array([max(0.0, x.sent_s - x.due_s) * 1000 for x in sent])
    ok = np.array([bool(x.outcome.ok and x.outcome.ttfab_s is not None) for x in sent])
    ttfab = np.array([x.outcome.ttfab_s * 1000 if o and x.outcome.ttfab_s is not None else np.nan
                      for x, o in zip(sent, ok, strict=True)])
    return {**_stats(due, late, ttfab, ok, warmup_s), "cpu_per_req_ms": 1000 * cpu / max(1, len(sent))}


def run_locust(target: dict, times: np.ndarray, workers: int, warmup_s: float) -> dict:
    from bench.load.locust_engine import EngineOptions
    from bench.load.locust_engine import run_locust as run
    from bench.load.schedule import Schedule, request_body

    sched = Schedule.of(times, ["Hello there."] * times.size, request_body, spec="steady", seed=0,
                        duration_s=float(times[-1]) if times.size else 0.0)
    res = run(target, EngineOptions(workers=workers, quiet=True), schedule=sched, timeout_s=float(times[-1]) + 120)
    due = np.array([r[0] for r in res.rows], dtype=float)
    late = np.array([max(0.0, r[1]) for r in res.rows], dtype=float)
    ok = np.array([r[3] == "ok" and r[2] is not None for r in res.rows], dtype=bool)
    ttfab = np.array([r[2] if o else np.nan for r, o in zip(res.rows, ok, strict=True)], dtype=float)
    return {**_stats(due, late, ttfab, ok, warmup_s), "dead": res.dead,
            "cpu_per_req_ms": 1000 * res.worker_cpu_s / max(1, len(res.rows))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup-s", type=float, default=1.0, help="requests due before this are left out of the statistics")
    ap.add_argument("--rates", default="250,500,1000,2000,3000,4000,5000,6000,8000")
    ap.add_argument("--sm-rps", type=float, default=300.0)
    a = ap.parse_args()
    rates = sorted({float(r) for r in a.rates.split(",")} | {float(TTFAB_AT_RPS)})

    from bench.load.synthetic import SyntheticServer
    from bench.load.targets import HttpTarget

    t_start = time.monotonic()
    load0 = os.getloadavg()
    results: dict[str, dict[float, dict]] = {"local": {}, "locust-1": {}, "locust-2": {}}
    with SyntheticServer(engine="raw", service_ms=0, concurrency=0, first_byte_delay_ms=a.delay_ms, chunks=3) as s:
        server_pid = s.proc.pid if s.proc is not None else -1
        for name in results:
            for rps in rates:
                times = steady_times(rps, a.seconds)
                # A miss is tried once more: on a shared machine a neighbour's burst can push one run
                # over, and the limit should be the engine's. The better of the two is kept.
                for _ in range(2):
                    server0 = proc_cpu_s(server_pid)
                    r = (run_local(HttpTarget(s.url), times, a.warmup_s) if name == "local"
                         else run_locust({"host": s.url}, times, int(name.split("-")[1]), a.warmup_s))
                    # What the stand-in itself burned: with it, the clients' CPU says how full the cores were.
                    r["server_cpu_per_req_ms"] = 1000 * (proc_cpu_s(server_pid) - server0) / max(1, times.size)
                    r["cores"] = times.size * (r["cpu_per_req_ms"] + r["server_cpu_per_req_ms"]) / 1000 / a.seconds
                    if rps not in results[name] or r["late_p99"] < results[name][rps]["late_p99"]:
                        results[name][rps] = r
                    if r["late_p99"] < LATE_OK_MS:
                        break
                r = results[name][rps]
                err = r["ttfab"] - a.delay_ms
                print(f"{name:9s} {rps:6.0f} rps: {r['n']} requests, {r['ok']} ok, late p99 {r['late_p99']:8.1f} ms, "
                      f"TTFAB error p50 {np.percentile(err, 50) if err.size else float('nan'):6.1f} ms "
                      f"p99 {np.percentile(err, 99) if err.size else float('nan'):6.1f} ms, "
                      f"client CPU {r['cpu_per_req_ms']:.3f} ms/request, stand-in {r['server_cpu_per_req_ms']:.3f} ms/request "
                      f"(client + stand-in {r['cores']:.2f} cores), warm-up late max {r['warmup_late_max']:.1f} ms",
                      file=sys.stderr, flush=True)
                if r["late_p99"] >= LATE_WARN_MS and rps >= TTFAB_AT_RPS:
                    break

        # SageMaker path through the stand-in runtime API.
        import boto3

        from bench.load.targets import SageMakerTarget

        os.environ.update({"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": s.url, "AWS_ACCESS_KEY_ID": "AKIDBENCHMARK",
                           "AWS_SECRET_ACCESS_KEY": "benchmark", "AWS_DEFAULT_REGION": "us-east-1"})
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.pop("AWS_PROFILE", None)
        sm_times = steady_times(a.sm_rps, a.seconds)
        boto = run_local(SageMakerTarget("bench-stand-in", session=boto3.Session(region_name="us-east-1")), sm_times,
                         a.warmup_s)
        sm = run_locust({"sagemaker_endpoint": "bench-stand-in", "aws_region": "us-east-1"}, sm_times, 1, a.warmup_s)
        for label, r in (("boto3 threads", boto), ("locust signed", sm)):
            err = r["ttfab"] - a.delay_ms
            print(f"sagemaker {label}: {r['n']} requests, {r['ok']} ok, late p99 {r['late_p99']:.1f} ms, TTFAB error p50 "
                  f"{np.percentile(err, 50) if err.size else float('nan'):.1f} ms, CPU {r['cpu_per_req_ms']:.3f} ms/request",
                  file=sys.stderr, flush=True)

    def sustained(name: str, limit_ms: float = LATE_OK_MS) -> tuple[float, float | None]:
        """(highest rate below the first miss, the rate that missed; None: none missed). A lucky pass
        above a miss does not count."""
        top = 0.0
        for rps in sorted(results[name]):
            r = results[name][rps]
            if r["late_p99"] >= limit_ms or r["ok"] != r["n"]:
                return top, rps
            top = rps
        return top, None

    def best(name: str, limit_ms: float = LATE_OK_MS) -> str:
        top, missed = sustained(name, limit_ms)
        if missed is None:
            return f"{top:.0f} (highest tried)"
        return (f"{top:.0f}" if top else f"< {missed:.0f}") + f" (missed at {missed:.0f})"

    print(f"\nreplay_scale: steady traces of {a.seconds:g} s (the first {a.warmup_s:g} s warm-up, left out) against "
          f"bench.load.synthetic --engine raw (first byte after "
          f"{a.delay_ms:g} ms, unbounded concurrency); {os.cpu_count()} cores shared by client and server; "
          f"load average {load0[0]:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print("| engine | highest rps, send-late p99 < 10 ms | < 50 ms | late p99 at 500 rps | TTFAB error p50 / p99 at 500 rps "
          "| client CPU per request at 500 rps |")
    print("|---|---|---|---|---|---|")
    for name, label in (("local", "local (asyncio, 1 process)"), ("locust-1", "Locust, 1 worker"), ("locust-2", "Locust, 2 workers")):
        at = results[name].get(float(TTFAB_AT_RPS))
        err = at["ttfab"] - a.delay_ms if at else np.array([])
        e = f"{np.percentile(err, 50):.1f} / {np.percentile(err, 99):.1f} ms" if err.size else "-"
        if at is None:
            print(f"| {label} | {best(name)} | {best(name, LATE_WARN_MS)} | - | - | - |")
        else:
            print(f"| {label} | {best(name)} | {best(name, LATE_WARN_MS)} | {at['late_p99']:.1f} ms | {e} | "
                  f"{at['cpu_per_req_ms']:.3f} ms |")
    print("\nsend-late p99 by rate, ms (cores busy: the client's processes and the stand-in, of "
          f"{os.cpu_count()}; - not run: the engine had missed at a lower rate):\n")
    print("| rps | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for rps in rates:
        cells = [f"{results[n][rps]['late_p99']:.1f} ({results[n][rps]['cores']:.2f})" if rps in results[n] else "-"
                 for n in results]
        print(f"| {rps:.0f} | " + " | ".join(cells) + " |")
    print(f"\nSageMaker path at {a.sm_rps:g} rps (stand-in runtime API, event-stream responses):\n")
    print("| client | CPU per request | requests/s per client core | cores for 5,000 rps |")
    print("|---|---|---|---|")
    for label, r in (("boto3, a thread per request (--engine local)", boto), ("Locust worker, SigV4 + event stream (--engine locust)", sm)):
        c = r["cpu_per_req_ms"]
        print(f"| {label} | {c:.3f} ms | {1000 / c:.0f} | {5000 * c / 1000:.1f} |" if c > 0 else f"| {label} | - | - | - |")
    print("\ntargets (issue 33):")
    one, two = sustained("locust-1")[0], sustained("locust-2")[0]
    ratio = two / one if one else float("nan")
    print(f"- Locust 2 workers sustain {two:.0f} rps, 1 worker {one:.0f} rps (send-late p99 < {LATE_OK_MS:g} ms): "
          f"{ratio:.2f}x (target >= {SCALE_TARGET:g}x) -> {'held' if ratio >= SCALE_TARGET else 'NOT held'}")
    base = results["local"].get(float(TTFAB_AT_RPS))
    for name in ("locust-1", "locust-2"):
        got = results[name].get(float(TTFAB_AT_RPS))
        if base is None or got is None or not base["ttfab"].size or not got["ttfab"].size:
            print(f"- TTFAB error p99 at {TTFAB_AT_RPS} rps, {name} vs local: not measured")
            continue
        gap = np.percentile(got["ttfab"] - a.delay_ms, 99) - np.percentile(base["ttfab"] - a.delay_ms, 99)
        print(f"- TTFAB error p99 at {TTFAB_AT_RPS} rps, {name} minus local: {gap:+.1f} ms (target <= {ERROR_TARGET_MS:g} ms) "
              f"-> {'held' if gap <= ERROR_TARGET_MS else 'NOT held'}")
    print(f"\ntook {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
