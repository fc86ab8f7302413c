"""BACKEND=torch throughput on the device it finds (CUDA when present): our engine vs one request
at a time, same model, same process, same run.

    PYTHONPATH=. python benchmarks/gpu_throughput.py                   # GPU: ~5 min at 10 s/level
    PYTHONPATH=. python benchmarks/gpu_throughput.py --tiny            # CPU smoke run (~1-2 min)
    PYTHONPATH=. python benchmarks/gpu_throughput.py --out-dir out/gpu --json-stdout

Model: the real Kokoro-82M architecture (kokoro.KModel from the upstream config.json) with RANDOM
weights written in the upstream layout (config.json, kokoro-v1_0.pth, voices/*.pt), unless
--model-dir names real ones. Random weights cost the same arithmetic as trained ones except for
durations, so the duration head is fixed to FRAMES_PER_TOKEN frames per phoneme (50 ms at 2,
close to real speech): audio length, and with it the decoder's work, is then realistic.

What runs: container.engine.Engine with container.backends.torch_backend.TorchBackend, no HTTP
(the HTTP path is container_throughput.py's subject), one side after another at each level:

- "baseline": SERIALIZE=1 (one request at a time, whole utterance, no segment streaming) on an
  in-process copy;
- "streams": the same copy, TORCH_WORKERS=0, TORCH_STREAMS runs in flight (one CUDA stream each);
- "workersN": TORCH_WORKERS=N, N spawned processes with a copy each (--workers, default 4,8).

Shedding is off everywhere (SLO_MS huge), so the table says what the device sustains; the SLO
(--slo-ms) is applied when reading it:

- requests/s, audio s/s: everything completed in the level / wall time of the level;
- at SLO: only requests whose first audio came within the SLO (goodput);
- "best at SLO" = the highest requests/s over the levels whose TTFAB p95 <= SLO, per side;
  the goal is the best side >= 3x the baseline's.

GPU utilization: NVML (pynvml) sampled every 100 ms during each level, else `nvidia-smi`, else
torch.cuda.utilization(); "n/a" on CPU. Exit codes: 0 ran (the goal line says met or not),
2 bad input (e.g. --device cuda without a GPU), 130 interrupted.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

PARAGRAPH = ("Streaming speech starts playing before the whole text is spoken. "
             "Each sentence is synthesized on its own and sent as soon as it is ready. "
             "The listener hears the first words while the rest is still being computed.")
TINY_TEXT = "Hello world. How are you?"
VOICE = "af_random"
FRAMES_PER_TOKEN = 2
SAMPLE_RATE = 24000
_PARTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")


class BenchError(Exception):
    """Bad input or an environment that cannot run the benchmark; printed as one line, exit 2."""


# ---- model ---------------------------------------------------------------------------------
def write_random_upstream_model(dest: Path, frames_per_token: int = FRAMES_PER_TOKEN,
                                seed: int = 0) -> Path:
    """MODEL_DIR in the upstream layout: the real architecture (kokoro-onnx ships upstream's
    config.json), random weights, duration head fixed so every phoneme lasts frames_per_token
    frames at speed 1.0. Keys carry upstream's "module." prefix (it was saved from DataParallel)."""
    import torch

    from container.backends.torch_model import import_kmodel as _import_kmodel
    KModel = _import_kmodel()
    # find_spec locates the package without importing it: kokoro_onnx's __init__ would pull in
    # onnxruntime and its own G2P, none of which this needs.
    spec = importlib.util.find_spec("kokoro_onnx")
    try:
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError("kokoro_onnx")
        config = Path(list(spec.submodule_search_locations)[0]) / "config.json"
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError) as e:
        raise BenchError("kokoro-onnx (for upstream's config.json) is not installed: "
                         "pip install --no-deps kokoro-onnx==0.6.1, or pass --model-dir") from e
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    empty = dest / "empty.pth"
    torch.save({}, empty)  # KModel keeps its random initialisation and never reaches the hub
    torch.manual_seed(seed)
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=cfg, model=str(empty))
    empty.unlink()
    head = model.predictor.duration_proj.linear_layer
    p = frames_per_token / cfg["max_dur"]  # duration = sum of max_dur sigmoids, each p
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(math.log(p / (1 - p)))
    torch.save({part: {f"module.{k}": v for k, v in getattr(model, part).state_dict().items()}
                for part in _PARTS}, dest / "kokoro-v1_0.pth")
    (dest / "voices").mkdir(exist_ok=True)
    torch.save(torch.randn(510, 1, 256) * 0.1, dest / "voices" / f"{VOICE}.pt")
    return dest


# ---- GPU utilization -----------------------------------------------------------------------
class GpuSampler:
    """Mean GPU utilization (%) and peak memory used (MiB) while a level runs."""

    def __init__(self, device: str, period_s: float = 0.1):
        self.period_s = period_s
        self.source = "n/a"
        self._read = None
        self._stop = threading.Event()
        self._samples: list[tuple[float, float]] = []
        self._thread: threading.Thread | None = None
        if device != "cuda":
            return
        try:
            import pynvml
            pynvml.nvmlInit()
            import torch
            h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())

            def read():
                return (float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                        pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20)
            read()
            self._read, self.source = read, "nvml"
            return
        except Exception:
            pass
        if shutil.which("nvidia-smi"):
            def read():
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                      "--format=csv,noheader,nounits", "-i", "0"],
                                     capture_output=True, text=True, timeout=5).stdout
                util, mem = (float(x) for x in out.strip().splitlines()[0].split(","))
                return util, mem
            try:
                read()
                self._read, self.source, self.period_s = read, "nvidia-smi", 0.25
                return
            except Exception:
                pass
        try:
            import torch
            torch.cuda.utilization()
            self._read = lambda: (float(torch.cuda.utilization()), float("nan"))
            self.source = "torch.cuda.utilization"
        except Exception:
            self.source = "n/a (no NVML, nvidia-smi or torch.cuda.utilization)"

    def __enter__(self):
        self._samples.clear()
        self._stop.clear()
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="gpu-sampler")
            self._thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(self.period_s):
            try:
                self._samples.append(self._read())
            except Exception:
                return

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def result(self) -> tuple[float | None, float | None]:
        if not self._samples:
            return None, None
        mems = [m for _, m in self._samples if m == m]
        return statistics.fmean(u for u, _ in self._samples), (max(mems) if mems else None)


# ---- load generation -----------------------------------------------------------------------
def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100) of a non-empty list."""
    v = sorted(values)
    return v[max(0, min(len(v) - 1, math.ceil(q * len(v) / 100) - 1))]


def pick_voice(model_dir: Path) -> str:
    """The voice every request uses: the random one this script writes, else (a --model-dir such as
    the rehearsed upstream layout) af_heart when there, else the first voice by name."""
    names = sorted(p.stem for p in (model_dir / "voices").glob("*.pt"))
    for want in (VOICE, "af_heart"):
        if want in names:
            return want
    if not names:
        raise BenchError(f"{model_dir}/voices holds no *.pt")
    return names[0]


async def _one(engine, text: str) -> tuple[float, float, float]:
    """(TTFAB s, full latency s, audio s) of one request through the engine, as a client sees it."""
    t0 = time.monotonic()
    job = engine.submit(text, VOICE, 1.0, stream=True)
    first, n = None, 0
    async for chunk in job.chunks():
        if first is None:
            first = time.monotonic() - t0
        n += len(chunk)
    return first if first is not None else math.nan, time.monotonic() - t0, n / 2 / SAMPLE_RATE


async def run_level(engine, c: int, text: str, seconds: float, max_requests: int,
                    slo_s: float, sampler: GpuSampler) -> dict:
    """Closed loop: c clients, each sends its next request when the last one ends, until
    `seconds` have passed or max_requests were sent (at least c). In-flight requests finish."""
    results: list[tuple[float, float, float]] = []
    sent = 0
    budget = max(max_requests, c)
    t0 = time.monotonic()

    async def client():
        nonlocal sent
        while sent < budget and time.monotonic() - t0 < seconds:
            sent += 1
            results.append(await _one(engine, text))

    with sampler:
        await asyncio.gather(*(client() for _ in range(c)))
        wall = time.monotonic() - t0
    util, mem = sampler.result()
    ttfab = [r[0] for r in results]
    ok = [r for r in results if r[0] <= slo_s]
    return {
        "concurrency": c, "requests": len(results), "wall_s": wall,
        "requests_per_s": len(results) / wall,
        "audio_s_per_s": sum(r[2] for r in results) / wall,
        "requests_per_s_at_slo": len(ok) / wall,
        "audio_s_per_s_at_slo": sum(r[2] for r in ok) / wall,
        "ttfab_p50_ms": 1000 * statistics.median(ttfab), "ttfab_p95_ms": 1000 * _pct(ttfab, 95),
        "full_p50_ms": 1000 * statistics.median(r[1] for r in results),
        "audio_s_per_request": statistics.fmean(r[2] for r in results),
        "gpu_util_pct": util, "gpu_mem_used_mib": mem,
    }


def _settings(model_dir: Path, args, serialize: bool, workers: int = 0):
    from container.settings import Settings
    # Shedding off (SLO_MS huge): the table reports what the device sustains; the SLO is
    # applied when reading the rows. Queue limit above any level so nothing is refused.
    return Settings(backend="torch", model_dir=model_dir, torch_device=args.device,
                    torch_streams=args.streams, torch_workers=workers, serialize=serialize,
                    slo_ms=600_000, queue_max_depth=max(args.levels) * 4 + 8, warmup=True)


def _load(settings):
    from container.backends.torch_backend import TorchBackend
    from container.errors import ModelLoadError
    backend = TorchBackend(settings)
    t0 = time.monotonic()
    try:
        backend.init_framework()
        backend.load_weights()
        backend.warmup()
    except ModelLoadError as e:
        backend.close()
        raise BenchError(str(e.detail or e)) from e
    return backend, time.monotonic() - t0


async def bench(model_dir: Path, args) -> dict:
    """Every side on the same machine in one run: 'baseline' (one request at a time) and
    'streams' share one in-process copy; each 'workersN' side is its own pool of N processes.
    All are loaded before the first level and the sides alternate per level, so drift (clocks,
    other load) hits them alike; an idle pool waits in a pipe read and costs nothing."""
    global VOICE
    VOICE = pick_voice(model_dir)
    from container.engine import Engine
    from container.metrics import MetricsRecorder

    backends, load_s, engines, layouts = [], {}, {}, {}
    try:
        inproc, load_s["streams"] = _load(_settings(model_dir, args, serialize=False))
        backends.append(inproc)
        sides = [("baseline", inproc, True), ("streams", inproc, False)]
        for n in args.workers:
            print(f"starting {n} worker processes ...", file=sys.stderr, flush=True)
            pool, load_s[f"workers{n}"] = _load(_settings(model_dir, args, False, workers=n))
            backends.append(pool)
            sides.append((f"workers{n}", pool, False))
        for name, backend, serialize in sides:
            s = _settings(model_dir, args, serialize)
            metrics = MetricsRecorder(s.model_name, capacity_rps=s.pressure_capacity_rps,
                                      queue_max_depth=s.queue_max_depth, weights=s.pressure_weights,
                                      stream=open(os.devnull, "w"))
            engines[name] = Engine(s, backend, metrics)
            engines[name].start()
            engines[name].ready = True
            layouts[name] = ("one request at a time (SERIALIZE=1) on: " if serialize else "") + backend.layout
        sampler = GpuSampler(inproc.device)
        slo_s = args.slo_ms / 1000
        rows: dict[str, list[dict]] = {name: [] for name in engines}
        for eng in engines.values():  # one request each: first-call costs out of the table
            await _one(eng, args.text)
        for c in args.levels:
            for name, eng in engines.items():
                row = await run_level(eng, c, args.text, args.seconds, args.max_requests,
                                      slo_s, sampler)
                rows[name].append(row)
                if args.out_dir:  # what a run cut short by a timeout still leaves behind
                    args.out_dir.mkdir(parents=True, exist_ok=True)
                    _write_atomic(args.out_dir / "gpu_throughput.partial.json",
                                  json.dumps({"layouts": layouts, "rows": rows}, indent=2) + "\n")
                util = "n/a" if row["gpu_util_pct"] is None else f"{row['gpu_util_pct']:.0f}%"
                print(f"  {name:9s} c={c:<3d} {row['requests_per_s']:7.2f} req/s "
                      f"{row['audio_s_per_s']:8.1f} audio s/s  TTFAB p50/p95 "
                      f"{row['ttfab_p50_ms']:.0f}/{row['ttfab_p95_ms']:.0f} ms  GPU {util}",
                      file=sys.stderr, flush=True)
    finally:
        for eng in engines.values():
            await eng.stop()
        for backend in backends:
            backend.close()
    import torch
    device = inproc.device
    machine = {
        "device": device,
        "device_name": (torch.cuda.get_device_name() if device == "cuda"
                        else platform.processor() or platform.machine()),
        "cpu_count": os.cpu_count(), "load_average": list(os.getloadavg()),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "peak_torch_alloc_mib_in_process": (torch.cuda.max_memory_allocated() / 2**20
                                            if device == "cuda" else None),
    }
    return {"schema_version": 2, "weights": "random" if args.model_dir is None else str(args.model_dir),
            "frames_per_token": None if args.model_dir else args.frames_per_token,
            "layouts": layouts, "streams": inproc.parallel_runs, "workers": args.workers,
            "slo_ms": args.slo_ms, "text": args.text, "load_and_warmup_s": load_s,
            "gpu_util_source": sampler.source, "machine": machine,
            "rows": rows, "summary": summarize(rows, args.slo_ms)}


def summarize(rows: dict[str, list[dict]], slo_ms: float, goal: float = 3.0) -> dict:
    """Best requests/s at the SLO per side: the highest rate over levels whose TTFAB p95 is
    within the SLO (None when no level is); each side's best / the baseline's best, and
    whether the best side reaches the goal."""
    best = {}
    for name, rs in rows.items():
        ok = [r for r in rs if r["ttfab_p95_ms"] <= slo_ms]
        top = max(ok, key=lambda r: r["requests_per_s"]) if ok else None
        best[name] = None if top is None else {"concurrency": top["concurrency"],
                                               "requests_per_s": top["requests_per_s"],
                                               "audio_s_per_s": top["audio_s_per_s"]}
    base = best.get("baseline")
    speedup = {name: (b["requests_per_s"] / base["requests_per_s"] if b and base else None)
               for name, b in best.items() if name != "baseline"}
    known = {k: v for k, v in speedup.items() if v is not None}
    top = max(known, key=known.get) if known else None
    return {"best_at_slo": best, "speedup": speedup, "best_side": top, "goal": goal,
            "goal_met": None if top is None else known[top] >= goal}


def table(result: dict) -> str:
    m = result["machine"]
    head = (f"{m['device_name']} ({m['device']}), {m['cpu_count']} CPU cores, load average "
            f"{m['load_average'][0]:.2f}, torch {m['torch']}, Python {m['python']}; weights: {result['weights']}"
            + (f" (duration head fixed at {result['frames_per_token']} frames/phoneme)"
               if result["weights"] == "random" else "")
            + f"; SLO {result['slo_ms']:.0f} ms TTFAB; GPU utilization from {result['gpu_util_source']}")
    lines = [head, ""] + [f"- {name}: {layout}" for name, layout in result["layouts"].items()] + [
        "", "| c | side | req/s | x baseline | req/s at SLO | audio s/s at SLO | TTFAB p50 / p95 ms "
        "| full p50 ms | GPU % |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = result["rows"]
    for i, base in enumerate(rows["baseline"]):
        for name, rs in rows.items():
            r = rs[i]
            util = "n/a" if r["gpu_util_pct"] is None else f"{r['gpu_util_pct']:.0f}"
            x = "" if name == "baseline" else f"{r['requests_per_s'] / base['requests_per_s']:.2f}x"
            lines.append(
                f"| {r['concurrency']} | {name} | {r['requests_per_s']:.2f} | {x} | "
                f"{r['requests_per_s_at_slo']:.2f} | {r['audio_s_per_s_at_slo']:.1f} | "
                f"{r['ttfab_p50_ms']:.0f} / {r['ttfab_p95_ms']:.0f} | {r['full_p50_ms']:.0f} | {util} |")
    s = result["summary"]

    def fmt(b):
        return "no level within the SLO" if b is None else (
            f"{b['requests_per_s']:.2f} req/s ({b['audio_s_per_s']:.1f} audio s/s) at c={b['concurrency']}")
    lines += ["", f"Best at SLO (TTFAB p95 <= {result['slo_ms']:.0f} ms):"]
    for name, b in s["best_at_slo"].items():
        x = s["speedup"].get(name)
        lines.append(f"- {name}: {fmt(b)}" + ("" if x is None else f", {x:.2f}x the baseline"))
    if s["best_side"] is None:
        why = "the baseline has" if s["best_at_slo"].get("baseline") is None else "no other side has"
        lines.append(f"Speedup at SLO: not computable ({why} no level within the SLO).")
    else:
        lines.append(f"Speedup at SLO: {s['speedup'][s['best_side']]:.2f}x the one-at-a-time baseline "
                     f"({s['best_side']}; goal >= {s['goal']:.0f}x: {'met' if s['goal_met'] else 'NOT met'}).")
    return "\n".join(lines)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default=None,
                    help="client concurrencies, comma-separated (default 1,2,4,8,16,32)")
    ap.add_argument("--seconds", type=float, default=10.0, help="time per level and side (default 10)")
    ap.add_argument("--max-requests", type=int, default=1000,
                    help="cap on requests per level and side (default 1000)")
    ap.add_argument("--slo-ms", type=float, default=3000.0, help="TTFAB SLO applied to the rows (default 3000)")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                    help="TORCH_DEVICE for the run (default auto: cuda when torch sees a GPU)")
    ap.add_argument("--streams", default="auto",
                    help="TORCH_STREAMS for the 'streams' side (default auto: the container's own choice)")
    ap.add_argument("--workers", default=None,
                    help="TORCH_WORKERS sides, comma-separated worker counts, '' for none "
                         "(default 4,8; --tiny: 2)")
    ap.add_argument("--model-dir", type=Path, help="real weights in the upstream layout (default: random)")
    ap.add_argument("--frames-per-token", type=int, default=FRAMES_PER_TOKEN,
                    help=f"random weights: fixed phoneme duration in frames (default {FRAMES_PER_TOKEN})")
    ap.add_argument("--text", default=PARAGRAPH, help="text of every request (default: a three-sentence paragraph)")
    ap.add_argument("--tiny", action="store_true",
                    help="smoke size for CPU/CI: levels 1,2, 2 requests per level, a two-sentence text")
    ap.add_argument("--out-dir", type=Path, help="also write gpu_throughput.md and gpu_throughput.json here")
    ap.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    args = ap.parse_args(argv)
    if args.tiny:
        args.levels, args.max_requests = args.levels or "1,2", 2
        args.workers = "2" if args.workers is None else args.workers
        if args.text == PARAGRAPH:
            args.text = TINY_TEXT
    args.levels = args.levels or "1,2,4,8,16,32"
    args.workers = "4,8" if args.workers is None else args.workers
    try:
        args.workers = [int(x) for x in str(args.workers).split(",") if x.strip()]
    except ValueError:
        ap.error(f"--workers must be comma-separated integers, got {args.workers!r}")
    if any(not 1 <= n <= 64 for n in args.workers):
        ap.error("--workers counts must be between 1 and 64")
    try:
        args.levels = [int(x) for x in str(args.levels).split(",") if x.strip()]
    except ValueError:
        ap.error(f"--levels must be comma-separated integers, got {args.levels!r}")
    if not args.levels or min(args.levels) < 1:
        ap.error("--levels needs at least one concurrency >= 1")
    if args.streams != "auto":
        try:
            args.streams = int(args.streams)
        except ValueError:
            ap.error(f"--streams must be 'auto' or an integer, got {args.streams!r}")
        if not 1 <= args.streams <= 64:
            ap.error("--streams must be between 1 and 64")
    if args.seconds <= 0 or args.max_requests < 1 or args.slo_ms <= 0 or args.frames_per_token < 1:
        ap.error("--seconds, --slo-ms must be > 0; --max-requests, --frames-per-token >= 1")
    if not args.text.strip():
        ap.error("--text is empty")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach for the hub
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # KModel's construction warns about LSTM dropout and weight_norm deprecation on every load;
    # they say nothing about this run and would bury the progress lines.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.")
    try:
        with tempfile.TemporaryDirectory(prefix="kokoro-random-") as tmp:
            model_dir = args.model_dir
            if model_dir is None:
                print("building a random-weight Kokoro-82M (upstream layout) ...", file=sys.stderr)
                model_dir = write_random_upstream_model(Path(tmp), args.frames_per_token)
            elif not model_dir.is_dir():
                raise BenchError(f"--model-dir {model_dir} is not a directory")
            result = asyncio.run(bench(model_dir, args))
    except BenchError as e:
        print(f"BenchError: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    text = table(result)
    print(json.dumps(result, indent=2) if args.json else text)
    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        _write_atomic(args.out_dir / "gpu_throughput.md", text + "\n")
        _write_atomic(args.out_dir / "gpu_throughput.json", json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
