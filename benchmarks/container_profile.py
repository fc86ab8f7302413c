"""Where the server's CPU time goes under load: the model runs, the event loop, G2P, the encoder
and onnxruntime's own pool threads, and how full the inference slots are kept.

    PYTHONPATH=. python benchmarks/container_profile.py [--levels 1,2,4] [--requests 4] [--json out.json]

The real server (build_app, uvicorn, the onnx backend) runs in this process on 127.0.0.1, so
every thread's CPU time can be read from /proc/self/task and named: the server's event loop,
the G2P thread, the infer threads (the model runs), the default executor (encoder calls), the
client (another thread with its own loop) and threads Python does not know, which here are
onnxruntime's intra-op pool of the wide session. Each backend.infer call is timed (start, end,
threads it was given) by a wrapper around the real method; from those the report integrates
the slots in use over the level's wall time: "slot idle" is the share of cores x wall that no
model run held. Linux only (/proc).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path

import uvicorn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.container_server import free_port, wait_ready  # noqa: E402
from benchmarks.container_throughput import PARAGRAPH, run_level  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu_s() -> dict[int, float]:
    """CPU seconds (user + system) of every thread of this process, by native thread id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended between listdir and open
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def thread_role(name: str, server_loop_tid: int | None, tid: int) -> str:
    if tid == server_loop_tid:
        return "server event loop"
    for prefix, role in (("infer", "model runs (infer threads)"), ("g2p", "G2P thread")):
        if name.startswith(prefix):
            return role
    if name == "MainThread":
        return "benchmark main"
    return "executor threads (encoder, other)"


def slot_idle(calls: list[tuple[float, float, int]], t0: float, t1: float, cores: int) -> float:
    """Core-seconds between t0 and t1 that no model run held (a run holds `threads` slots)."""
    events = sorted([(a, w) for a, _, w in calls] + [(b, -w) for _, b, w in calls])
    used, last, idle = 0, t0, 0.0
    for t, d in events:
        idle += max(0, cores - used) * (t - last)
        used += d
        last = t
    return idle + max(0, cores - used) * (t1 - last)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,2,4", help="concurrency levels (default 1,2,4)")
    ap.add_argument("--requests", type=int, default=4, help="requests per level, at least c (default 4)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        print(f"--levels: {args.levels!r} is not a comma-separated list of integers", file=sys.stderr)
        return 2
    if not os.path.isdir("/proc/self/task"):
        print("this profile reads /proc/self/task (Linux only)", file=sys.stderr)
        return 2

    from container.app import build_app
    from container.backends.onnx import OnnxBackend
    from container.settings import Settings

    calls: list[tuple[float, float, int]] = []
    real_infer = OnnxBackend.infer

    def timed_infer(self, batch, threads):
        t = time.monotonic()
        try:
            return real_infer(self, batch, threads)
        finally:
            calls.append((t, time.monotonic(), threads))

    OnnxBackend.infer = timed_infer
    port = free_port()
    settings = Settings(backend="onnx", port=port, slo_ms=600000, queue_max_depth=256,
                        metrics_interval_s=3600)
    server = uvicorn.Server(uvicorn.Config(build_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    server_tid: list[int] = []

    def serve():
        server_tid.append(threading.get_native_id())
        server.run()

    th = threading.Thread(target=serve, name="server", daemon=True)
    th.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, th.is_alive, 180)
    except (RuntimeError, TimeoutError) as err:
        print(err, file=sys.stderr)
        return 1

    def client(c: int, n: int, box: list) -> None:
        cpu0 = time.thread_time()
        box.append(asyncio.run(run_level(url, c, n, PARAGRAPH)))
        box.append(time.thread_time() - cpu0)  # the thread's own clock: it is gone from /proc by the end

    rows = []
    try:
        box: list = []
        client(1, 1, box)  # warm the connection path
        for c in levels:
            n = max(args.requests, c)
            calls.clear()
            box = []
            before = thread_cpu_s()
            t0 = time.monotonic()
            worker = threading.Thread(target=client, args=(c, n, box), name="client")
            worker.start()
            worker.join()
            t1 = time.monotonic()
            after = thread_cpu_s()
            names = {t.native_id: t.name for t in threading.enumerate()}
            roles: dict[str, float] = {}
            for tid, cpu in after.items():
                if tid not in before and tid not in names:
                    continue  # a thread started and ended inside the level (the client's)
                role = (thread_role(names[tid], server_tid[0], tid) if tid in names
                        else "onnxruntime pool threads")
                roles[role] = roles.get(role, 0.0) + cpu - before.get(tid, 0.0)
            roles["benchmark client"] = box[1]
            wall = t1 - t0
            row = {"concurrency": c, "requests": n, "wall_s": wall,
                   "audio_s_per_s": box[0]["throughput_audio_s_per_s"], "model_runs": len(calls),
                   "wide_runs": sum(1 for *_, w in calls if w > 1),
                   "wide_run_s": sum(b - a for a, b, w in calls if w > 1),
                   "slot_idle_pct": 100 * slot_idle(calls, t0, t1, settings.infer_cores)
                   / (settings.infer_cores * wall),
                   "cpu_s": roles, "cores": settings.infer_cores,
                   "load_average": os.getloadavg()}
            rows.append(row)
            print(f"c={c}: {row['audio_s_per_s']:.2f} audio s/s, slot idle {row['slot_idle_pct']:.1f}%",
                  file=sys.stderr)
    finally:
        server.should_exit = True
        th.join(30)

    print(f"machine: {os.cpu_count()} cores, load average "
          + " / ".join(f"{x:.2f}" for x in os.getloadavg()) + "; backend: onnx (in-process server)\n")
    roles = sorted({r for row in rows for r in row["cpu_s"]},
                   key=lambda r: -max(row["cpu_s"].get(r, 0) for row in rows))
    print("| c | requests | wall s | audio s/s | model runs (wide) | slot idle | "
          + " | ".join(f"{r} CPU s" for r in roles) + " |")
    print("|---:" * (6 + len(roles)) + "|")
    for row in rows:
        print(f"| {row['concurrency']} | {row['requests']} | {row['wall_s']:.2f} | {row['audio_s_per_s']:.2f} | "
              f"{row['model_runs']} ({row['wide_runs']}, {row['wide_run_s']:.2f} s) | {row['slot_idle_pct']:.1f}% | "
              + " | ".join(f"{row['cpu_s'].get(r, 0):.2f}" for r in roles) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
