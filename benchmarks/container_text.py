"""What text normalization and sentence segmentation add to the time to first audio byte.

    PYTHONPATH=. python benchmarks/container_text.py [--levels 1,2] [--rounds 3] [--requests 6] [--json out.json]

One server (the real int8 onnx model unless --backend), shedding effectively off (SLO_MS huge) so
every request is measured. Per round and level, the same requests are sent twice, alternating
which goes first: "off" with `normalization_options: {"normalize": false}` (the text as written,
still segmented by pysbd) and "on" with the defaults (normalized). Client-side TTFAB (first body
byte) p50 and p95 over all rounds, per side and level, and the difference on minus off.

The text stage itself runs on the server's G2P thread, before the first segment's G2P; it is also
timed here in this process for the same text, CPU only, so what segmentation costs against the
regex splitter it replaced (kept below for the comparison only) is measured in the same run:
the first segment (what TTFAB waits for) and the whole text, for the paragraph and for a text of
about 4,000 characters.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
# First on the path: the text stage is timed on this tree's container package, not an installed one.
sys.path.insert(0, str(ROOT))

from benchmarks import container_server  # noqa: E402

TEXT = ("Dr. Smith paid $5.50 on 12/01/2025 at 3:30 pm. Visit https://example.com for the "
        "details, or call (555) 123-4567. The U.S. economy grew 3.5% in Jan. 2024, i.e. faster "
        "than the 1,234 analysts expected.")

# The splitter before issue 35 (container/text.py at the time): a regex on sentence punctuation.
_OLD_SENTENCE = re.compile(r"(?<=[.!?。！？;:])\s+|\n+")


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))]


async def _one(client: httpx.AsyncClient, url: str, text: str, normalize: bool) -> float:
    body = {"text": text, "response_format": "pcm", "normalization_options": {"normalize": normalize}}
    t0 = time.monotonic()
    first = None
    async with client.stream("POST", url + "/invocations", json=body) as r:
        r.raise_for_status()
        async for chunk in r.aiter_raw():
            if chunk and first is None:
                first = time.monotonic() - t0
    return (first or 0.0) * 1000


async def _level(url: str, c: int, n: int, text: str, normalize: bool) -> list[float]:
    """A closed loop of c clients sharing n requests; TTFAB of each, ms."""
    out: list[float] = []
    remaining = n

    async def loop(client):
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            out.append(await _one(client, url, text, normalize))

    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=c + 2)) as client:
        await asyncio.gather(*(loop(client) for _ in range(c)))
    return out


def text_stage_ms(text: str, repeat: int) -> dict:
    """CPU ms of the text stage, median of `repeat` runs: (first segment, all) for the old regex
    splitter, pysbd alone, and pysbd plus normalization."""
    from container.normalize import normalize
    from container.text import iter_segments

    def old(t: str):
        for s in _OLD_SENTENCE.split(t.strip()):
            if s.strip():
                yield s.strip()

    def new(t: str):
        yield from iter_segments(t, 300)

    def new_norm(t: str):
        for s in iter_segments(t, 300):
            yield normalize(s)

    out = {}
    list(new_norm(text))  # imports and pysbd's compiled rules, as the server's warm-up does
    for name, fn in (("regex (before)", old), ("pysbd", new), ("pysbd + normalization", new_norm)):
        firsts, alls = [], []
        for _ in range(repeat):
            t0 = time.process_time()
            it = fn(text)
            next(it)
            t1 = time.process_time()
            n = 1 + sum(1 for _ in it)
            t2 = time.process_time()
            firsts.append((t1 - t0) * 1000)
            alls.append((t2 - t0) * 1000)
        out[name] = {"first_segment_ms": statistics.median(firsts), "all_ms": statistics.median(alls),
                     "segments": n}
    return out


def bench(url: str, levels: list[int], rounds: int, requests: int, text: str) -> dict:
    samples: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        for c in levels:
            n = max(requests, c)
            order = (False, True) if r % 2 == 0 else (True, False)
            for normalize in order:
                side = "on" if normalize else "off"
                samples.setdefault((side, c), []).extend(asyncio.run(_level(url, c, n, text, normalize)))
                print(f"round {r + 1}/{rounds} c={c} {side}: done", file=sys.stderr, flush=True)
    rows = []
    for c in levels:
        row = {"concurrency": c}
        for side in ("off", "on"):
            v = samples[(side, c)]
            row[side] = {"requests": len(v), "ttfab_p50_ms": statistics.median(v), "ttfab_p95_ms": _pct(v, 95)}
        row["delta_p50_ms"] = row["on"]["ttfab_p50_ms"] - row["off"]["ttfab_p50_ms"]
        row["delta_p95_ms"] = row["on"]["ttfab_p95_ms"] - row["off"]["ttfab_p95_ms"]
        rows.append(row)
    return {"levels": rows}


def report(res: dict) -> str:
    lines = [res["machine"], "",
             "| concurrency | requests per side | normalization off: TTFAB p50 / p95 ms | on: TTFAB p50 / p95 ms "
             "| on - off: p50 / p95 ms |", "|---:|---:|---:|---:|---:|"]
    for row in res["levels"]:
        off, on = row["off"], row["on"]
        lines.append(f"| {row['concurrency']} | {off['requests']} | {off['ttfab_p50_ms']:.0f} / {off['ttfab_p95_ms']:.0f} "
                     f"| {on['ttfab_p50_ms']:.0f} / {on['ttfab_p95_ms']:.0f} "
                     f"| {row['delta_p50_ms']:+.0f} / {row['delta_p95_ms']:+.0f} |")
    lines += ["", "| text | stage | segments | first segment ms (CPU) | whole text ms (CPU) |",
              "|---|---|---:|---:|---:|"]
    for label, stages in res["text_stage"].items():
        for name, v in stages.items():
            lines.append(f"| {label} | {name} | {v['segments']} | {v['first_segment_ms']:.2f} | {v['all_ms']:.2f} |")
    return "\n".join(lines)


def _levels(value: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--levels {value!r}: write concurrencies like 1,2") from None
    if not out or any(x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"--levels {value!r}: each concurrency must be >= 1")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="onnx", choices=("onnx", "torch", "sine"))
    ap.add_argument("--levels", type=_levels, default=[1, 2],
                    help="concurrencies: 1 and the machine's Q_max (default 1,2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=6, help="requests per side, level and round")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.requests < 1:
        print("error: --rounds and --requests must be >= 1", file=sys.stderr)
        return 2
    server = container_server.start({**container_server.QUIET_ENV, "BACKEND": args.backend})
    url = server.url
    try:
        asyncio.run(_level(url, 1, 1, TEXT, True))  # the connection path and first-request work
        res = bench(url, args.levels, args.rounds, args.requests, TEXT)
    finally:
        container_server.stop(server.proc)
    long_text = (TEXT + " ") * (4000 // (len(TEXT) + 1) + 1)
    res["text_stage"] = {f"the paragraph ({len(TEXT)} chars)": text_stage_ms(TEXT, 50),
                         f"{len(long_text)} chars": text_stage_ms(long_text, 5)}
    load = os.getloadavg()
    res["machine"] = (f"{os.cpu_count()} cores, {platform.machine()}, load average {load[0]:.2f} / {load[1]:.2f} / "
                      f"{load[2]:.2f} at the end; backend: {args.backend}; {args.rounds} rounds x "
                      f"{args.requests} requests per side and level")
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
