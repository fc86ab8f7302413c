"""Soak: the real container at its Q_max concurrency with hostile requests mixed in, for minutes.

    PYTHONPATH=. .venv/bin/python benchmarks/container_soak.py [--minutes 30] [--concurrency Q]
    PYTHONPATH=. .venv/bin/python benchmarks/container_soak.py --backend sine --seconds 8 --interval-s 2   # smoke

Starts `python -m container serve` (int8 ONNX Kokoro-82M by default, on 127.0.0.1 only) with its
gate at Q + 2 (QUEUE_MAX_DEPTH; the 2 are for the hostile requests that get admitted, so they do
not take the good clients' slots). Q is --concurrency, else measured quickly:
closed loops at 1, 2, 4, 8 clients, the largest level whose TTFAB p95 stays within SLO_MS.

Traffic, all bounded loops: Q "good" clients streaming a two-sentence request back to back, and
hostile clients cycling through oversized bodies (declared and chunked), bad JSON, JSON nested
10,000 deep, invalid UTF-8, a wrong content type, unknown voices, an unknown OpenAI field,
slowloris-ish bodies (a byte every 0.3 s, then completed or abandoned), disconnects right after
the first audio chunk, WebSocket sessions of invalid messages (each hostile client pauses
--hostile-gap-s between requests), and every --burst-s a burst of gate + 4 requests at once.

Every --interval-s (60) it prints a row: good requests answered, requests (good, burst or
disconnecting) rejected by the gate or shed (503 queue_saturated / shed_deadline, the designed
answers), TTFAB p95 of the good ones, hostile
requests sent and answered other than expected ("wrong"), 5xx other than those designed 503s
("5xx", must be 0), and the server's process tree: RSS (VmRSS summed over the server and its
workers), open file descriptors and threads (medians of samples every interval/12). The end
table compares the first and the last interval against the bounds (RSS growth < --max-rss-growth-pct,
fds and threads within --max-fd-growth / --max-thread-growth) and exits 1 if any is out, if any
5xx or wrong answer occurred, or if the server logged a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import container_server  # noqa: E402

GOOD_TEXT = ("The soak test keeps the server busy for a long time. "
             "Memory, file descriptors and threads must stay flat while it runs.")
DESIGNED_503 = {"queue_saturated", "shed_deadline"}
# Gate slots beyond Q for the hostile requests that are admitted (disconnects, slow bodies), so
# they do not take the good clients' slots; bursts still go 4 over the gate.
HOSTILE_ROOM = 2


def start_server(env_extra: dict[str, str], log_dir: Path) -> container_server.Server:
    """The server with its stdout and stderr kept in ``log_dir`` (the verdict counts tracebacks in it)."""
    env = {"HF_HUB_OFFLINE": "1", "METRICS_INTERVAL_S": "3600", "HOST": "127.0.0.1", **env_extra}
    return container_server.start(env, args=(), log_dir=log_dir, wait_s=240)


# ---- process tree ---------------------------------------------------------------------------

def _tree(root: int) -> list[int]:
    from container.footprint import process_tree
    return process_tree(root)


def _status_field(pid: int, name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def sample_tree(root: int) -> dict:
    pids = _tree(root)
    fds = 0
    for pid in pids:
        try:
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return {"rss_mib": sum(_status_field(p, "VmRSS") for p in pids) / 1024,
            "fds": fds, "threads": sum(_status_field(p, "Threads") for p in pids), "processes": len(pids)}


# ---- traffic --------------------------------------------------------------------------------

@dataclass
class Interval:
    good_ok: int = 0
    rejected: int = 0
    ttfab_ms: list[float] = field(default_factory=list)
    hostile: int = 0
    wrong: int = 0
    errors_5xx: int = 0
    samples: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, url: str, pid: int, q: int, seconds: float, interval_s: float, burst_s: float,
                 max_body: int, hostile_gap_s: float = 0.5):
        self.url, self.pid, self.q = url, pid, q
        self.gate = q + HOSTILE_ROOM
        self.hostile_gap_s = hostile_gap_s
        self.seconds, self.interval_s, self.burst_s = seconds, interval_s, burst_s
        self.max_body = max_body
        self.t0 = 0.0
        self.intervals: list[Interval] = []
        self.stop = False

    def cur(self) -> Interval:
        i = min(int((time.monotonic() - self.t0) // self.interval_s), len(self.intervals) - 1)
        return self.intervals[i]

    def _classify(self, r: httpx.Response) -> str:
        """'ok', 'designed' (the gate's or the shedder's 503) or '5xx'."""
        if r.status_code < 500:
            return "ok"
        try:
            code = r.json().get("error")
        except (ValueError, AttributeError):
            code = None
        if r.status_code == 503 and code in DESIGNED_503:
            return "designed"
        self.cur().notes.append(f"{r.status_code} {r.text[:120]}")
        return "5xx"

    async def good_client(self, client: httpx.AsyncClient) -> None:
        while not self.stop:
            t0 = time.monotonic()
            try:
                async with client.stream("POST", self.url + "/invocations",
                                         json={"text": GOOD_TEXT, "response_format": "pcm"}) as r:
                    first = None
                    if r.status_code == 200:
                        async for chunk in r.aiter_raw():
                            if chunk and first is None:
                                first = (time.monotonic() - t0) * 1000
                    else:
                        await r.aread()
                iv = self.cur()
                if r.status_code == 200:
                    iv.good_ok += 1
                    iv.ttfab_ms.append(first or 0.0)
                else:
                    kind = self._classify(r)
                    if kind == "designed":
                        iv.rejected += 1
                        await asyncio.sleep(0.2)  # what a client honouring Retry-After does, scaled down
                    elif kind == "5xx":
                        iv.errors_5xx += 1
                    else:
                        iv.wrong += 1
                        iv.notes.append(f"good request got {r.status_code}")
            except Exception as e:  # noqa: BLE001 - any failure is counted and shown, the loop goes on
                self.cur().wrong += 1
                self.cur().notes.append(f"good request failed: {type(e).__name__}: {e}")
                await asyncio.sleep(0.5)

    def _expect(self, r: httpx.Response, statuses: set[int], what: str) -> None:
        iv = self.cur()
        iv.hostile += 1
        if r.status_code in statuses:
            return
        kind = self._classify(r)
        if kind == "designed" and 200 in statuses:
            iv.rejected += 1  # a request that would be admitted met the gate: the designed answer
            return
        if kind == "5xx":
            iv.errors_5xx += 1
            return
        iv.wrong += 1
        iv.notes.append(f"{what}: got {r.status_code} {r.text[:80]!r}, want {sorted(statuses)}")

    # Each hostile kind: one request, its answer checked.
    async def oversized_declared(self, c: httpx.AsyncClient) -> None:
        body = b'{"text": "' + b"a" * (self.max_body + 16) + b'"}'
        r = await c.post(self.url + "/invocations", content=body, headers={"content-type": "application/json"})
        self._expect(r, {413}, "oversized body")

    async def oversized_chunked(self, c: httpx.AsyncClient) -> None:
        async def gen():
            yield b'{"text": "'
            for _ in range(self.max_body // 8192 + 2):
                yield b"a" * 8192
            yield b'"}'
        r = await c.post(self.url + "/invocations", content=gen(), headers={"content-type": "application/json"})
        self._expect(r, {413}, "oversized chunked body")

    async def bad_json(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/invocations", content=b'{"text": "unterminated',
                         headers={"content-type": "application/json"})
        self._expect(r, {400}, "bad JSON")

    async def deep_json(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/invocations", content=b"[" * 10000 + b"]" * 10000,
                         headers={"content-type": "application/json"})
        self._expect(r, {400}, "deep JSON")

    async def bad_utf8(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/invocations", content=b'{"text": "\xff\xfe"}',
                         headers={"content-type": "application/json"})
        self._expect(r, {400}, "invalid UTF-8")

    async def wrong_type(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/invocations", content=b"text=hello",
                         headers={"content-type": "application/x-www-form-urlencoded"})
        self._expect(r, {415}, "wrong content type")

    async def unknown_voice(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/invocations", json={"text": "Hello.", "voice": "nobody_here"})
        self._expect(r, {400}, "unknown voice")

    async def unknown_field(self, c: httpx.AsyncClient) -> None:
        r = await c.post(self.url + "/v1/audio/speech", json={"input": "Hello.", "temperature": 2})
        self._expect(r, {400}, "unknown OpenAI field")

    async def disconnect_mid_stream(self, c: httpx.AsyncClient) -> None:
        async with c.stream("POST", self.url + "/invocations",
                            json={"text": GOOD_TEXT + " " + GOOD_TEXT, "response_format": "pcm"}) as r:
            if r.status_code == 200:
                async for chunk in r.aiter_raw():
                    if chunk:
                        break  # leave with the rest unread: httpx closes the connection
            else:
                await r.aread()
        self._expect(r, {200}, "disconnect mid-stream")

    async def slow_body(self, c: httpx.AsyncClient, complete: bool) -> None:
        body = json.dumps({"text": "Slow.", "response_format": "pcm", "stream": False}).encode()
        host, port = self.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body))
            cut = len(body) if complete else len(body) // 2
            for i in range(cut):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.3 if i < 8 else 0.01)
            self.cur().hostile += 1
            if not complete:
                return  # abandon half-way: the server must drop it without a trace
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 120)
            first_line = head.split(b"\r\n", 1)[0]
            status = int(first_line.split()[1]) if len(first_line.split()) > 1 else 0
            length = next((int(h.split(b":", 1)[1]) for h in head.split(b"\r\n")
                           if h.lower().startswith(b"content-length:")), 0)
            body = await asyncio.wait_for(reader.readexactly(length), 60) if length else b""
            if status == 503 and any(code.encode() in body for code in DESIGNED_503):
                self.cur().rejected += 1
            elif status >= 500:
                self.cur().errors_5xx += 1
                self.cur().notes.append(f"slow body: {status} {body[:120]!r}")
            elif status != 200:
                self.cur().wrong += 1
                self.cur().notes.append(f"slow body: status line {first_line[:60]!r}")
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def ws_garbage(self, c: httpx.AsyncClient) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed
        ws_url = self.url.replace("http://", "ws://") + "/invocations-bidirectional-stream"
        code = None
        async with connect(ws_url, open_timeout=10, close_timeout=5) as ws:
            for _ in range(8):
                await ws.send("{not json")
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd else None
        iv = self.cur()
        iv.hostile += 1
        if code != 1008:
            iv.wrong += 1
            iv.notes.append(f"websocket of invalid messages closed with {code}, want 1008")

    async def hostile_client(self, c: httpx.AsyncClient, offset: int) -> None:
        kinds = [self.oversized_declared, self.bad_json, self.deep_json, self.unknown_voice,
                 self.disconnect_mid_stream, self.bad_utf8, self.oversized_chunked, self.wrong_type,
                 self.unknown_field, self.ws_garbage]
        i = offset
        while not self.stop:
            kind = kinds[i % len(kinds)]
            i += 1
            try:
                await kind(c)
            except Exception as e:  # noqa: BLE001 - counted and shown, the loop goes on
                self.cur().wrong += 1
                self.cur().notes.append(f"{kind.__name__}: {type(e).__name__}: {e}")
            await asyncio.sleep(self.hostile_gap_s)

    async def slow_client(self, c: httpx.AsyncClient) -> None:
        n = 0
        while not self.stop:
            n += 1
            try:
                await self.slow_body(c, complete=n % 2 == 0)
            except (TimeoutError, OSError, ValueError) as e:
                self.cur().wrong += 1
                self.cur().notes.append(f"slow body: {type(e).__name__}: {e}")

    async def burster(self, c: httpx.AsyncClient) -> None:
        while not self.stop:
            await asyncio.sleep(self.burst_s)
            if self.stop:
                return

            async def one():
                try:
                    r = await c.post(self.url + "/invocations",
                                     json={"text": "Burst.", "response_format": "pcm", "stream": False})
                    self._expect(r, {200}, "burst")
                except httpx.HTTPError as e:
                    self.cur().wrong += 1
                    self.cur().notes.append(f"burst: {type(e).__name__}: {e}")
            await asyncio.gather(*(one() for _ in range(self.gate + 4)))

    async def sampler(self) -> None:
        step = self.interval_s / 12
        while not self.stop:
            self.cur().samples.append(await asyncio.to_thread(sample_tree, self.pid))
            await asyncio.sleep(step)

    async def reporter(self) -> None:
        for k in range(len(self.intervals)):
            end = self.t0 + (k + 1) * self.interval_s
            await asyncio.sleep(max(0.0, end - time.monotonic()))
            print_row(k + 1, self.intervals[k], self.interval_s)
        self.stop = True

    async def run(self) -> None:
        n = max(1, math.ceil(self.seconds / self.interval_s))
        self.intervals = [Interval() for _ in range(n)]
        limits = httpx.Limits(max_connections=self.q * 2 + 16, max_keepalive_connections=self.q * 2 + 16)
        async with httpx.AsyncClient(timeout=120, limits=limits) as good, \
                httpx.AsyncClient(timeout=60, limits=limits) as hostile:
            self.t0 = time.monotonic()
            tasks = [asyncio.create_task(self.good_client(good)) for _ in range(self.q)]
            tasks += [asyncio.create_task(self.hostile_client(hostile, off)) for off in (0, 5)]
            tasks += [asyncio.create_task(self.slow_client(hostile)) for _ in range(2)]
            tasks += [asyncio.create_task(self.burster(hostile)), asyncio.create_task(self.sampler())]
            await self.reporter()
            done, pending = await asyncio.wait(tasks, timeout=120)
            for t in pending:
                t.cancel()
            for t in done:
                if t.exception() is not None:
                    raise t.exception()


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[max(0, min(len(v) - 1, math.ceil(q / 100 * len(v)) - 1))]


def _median(iv: Interval, key: str) -> float:
    return statistics.median(s[key] for s in iv.samples) if iv.samples else float("nan")


HEADER = (f"{'interval':>8} {'good':>5} {'rejected':>8} {'TTFAB p95 ms':>12} {'hostile':>7} {'wrong':>5} "
          f"{'5xx':>4} {'RSS MiB':>8} {'fds':>5} {'threads':>7}")


def print_row(k: int, iv: Interval, interval_s: float) -> None:
    p95 = pct(iv.ttfab_ms, 95)
    print(f"{k:>8} {iv.good_ok:>5} {iv.rejected:>8} {'-' if p95 is None else f'{p95:.0f}':>12} "
          f"{iv.hostile:>7} {iv.wrong:>5} {iv.errors_5xx:>4} {_median(iv, 'rss_mib'):>8.1f} "
          f"{_median(iv, 'fds'):>5.0f} {_median(iv, 'threads'):>7.0f}", flush=True)
    for note in iv.notes[:5]:
        print(f"         ! {note}", flush=True)


def summary(intervals: list[Interval], args, traceback_lines: int) -> tuple[str, bool]:
    first, last = intervals[0], intervals[-1]
    rss0, rss1 = _median(first, "rss_mib"), _median(last, "rss_mib")
    growth = 100 * (rss1 - rss0) / rss0 if rss0 else float("inf")
    fd0, fd1 = _median(first, "fds"), _median(last, "fds")
    th0, th1 = _median(first, "threads"), _median(last, "threads")
    total_5xx = sum(iv.errors_5xx for iv in intervals)
    wrong = sum(iv.wrong for iv in intervals)
    p0, p1 = pct(first.ttfab_ms, 95), pct(last.ttfab_ms, 95)
    rows = [
        ("RSS of server + workers (MiB)", f"{rss0:.1f}", f"{rss1:.1f}",
         f"growth < {args.max_rss_growth_pct:g} % ({growth:+.1f} %)", growth < args.max_rss_growth_pct),
        ("open file descriptors", f"{fd0:.0f}", f"{fd1:.0f}", f"+ <= {args.max_fd_growth}",
         fd1 - fd0 <= args.max_fd_growth),
        ("threads", f"{th0:.0f}", f"{th1:.0f}", f"+ <= {args.max_thread_growth}", th1 - th0 <= args.max_thread_growth),
        ("5xx besides the gate's 503s (all intervals)", str(first.errors_5xx), str(last.errors_5xx),
         f"0 in all ({total_5xx})", total_5xx == 0),
        ("hostile requests answered wrongly (all)", str(first.wrong), str(last.wrong), f"0 in all ({wrong})", wrong == 0),
        ("server tracebacks logged", "", "", f"0 ({traceback_lines})", traceback_lines == 0),
        ("good requests answered", str(first.good_ok), str(last.good_ok), "> 0 each interval",
         all(iv.good_ok > 0 for iv in intervals)),
        ("TTFAB p95 of good requests (ms)", "-" if p0 is None else f"{p0:.0f}", "-" if p1 is None else f"{p1:.0f}",
         "reported", True),
        ("rejected or shed (designed 503)", str(first.rejected), str(last.rejected), "reported", True),
        ("hostile requests sent", str(first.hostile), str(last.hostile), "reported", True),
    ]
    lines = ["| metric | interval 1 | last interval | bound | within |", "|---|---:|---:|---|---|"]
    lines += [f"| {m} | {a} | {b} | {bound} | {'yes' if ok else 'NO'} |" for m, a, b, bound, ok in rows]
    return "\n".join(lines), all(r[4] for r in rows)


def measure_qmax(url: str, slo_ms: float, levels: list[int]) -> int:
    """Largest level whose TTFAB p95 is within the SLO over a short closed loop (2 c requests)."""
    async def level(c: int) -> float:
        ttfab: list[float] = []

        async def loop(client):
            for _ in range(2):
                t0 = time.monotonic()
                async with client.stream("POST", url + "/invocations",
                                         json={"text": GOOD_TEXT, "response_format": "pcm"}) as r:
                    first = None
                    if r.status_code == 200:
                        async for chunk in r.aiter_raw():
                            if chunk and first is None:
                                first = (time.monotonic() - t0) * 1000
                    else:
                        await r.aread()
                ttfab.append(first if r.status_code == 200 and first else float("inf"))
        async with httpx.AsyncClient(timeout=120) as client:
            await asyncio.gather(*(loop(client) for _ in range(c)))
        return pct(ttfab, 95)

    best = levels[0]
    for c in levels:
        p95 = asyncio.run(level(c))
        print(f"# qmax: c={c} TTFAB p95 {p95:.0f} ms", file=sys.stderr, flush=True)
        if p95 > slo_ms:
            break
        best = c
    return best


def machine() -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return (f"{platform.node()}: {platform.processor() or platform.machine()}, {usable} usable cores "
            f"({os.cpu_count()} online), load average {load}, Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, help="run length in seconds (overrides --minutes)")
    ap.add_argument("--interval-s", type=float, default=60.0, help="one row per interval (default a minute)")
    ap.add_argument("--concurrency", type=int, help="Q: good clients and the gate (default: measured)")
    ap.add_argument("--backend", default="onnx", choices=["onnx", "sine"])
    ap.add_argument("--slo-ms", type=float, default=3000.0)
    ap.add_argument("--burst-s", type=float, help="seconds between bursts over the gate (default interval/4)")
    ap.add_argument("--hostile-gap-s", type=float, default=0.5, help="pause of each hostile client between requests")
    ap.add_argument("--max-rss-growth-pct", type=float, default=10.0)
    ap.add_argument("--max-fd-growth", type=int, default=8)
    ap.add_argument("--max-thread-growth", type=int, default=4)
    ap.add_argument("--json", help="write the rows and the verdict here")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    env = {"BACKEND": args.backend, "SLO_MS": str(args.slo_ms)}
    if args.backend == "sine":
        env["SINE_DELAY_MS"] = "40"
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        q = args.concurrency
        if q is None:
            probe = start_server({**env, "QUEUE_MAX_DEPTH": "64"}, Path(tmp))
            try:
                q = measure_qmax(probe.url, args.slo_ms, [1, 2, 4, 8])
            finally:
                container_server.stop(probe.proc)
        server = start_server({**env, "QUEUE_MAX_DEPTH": str(q + HOSTILE_ROOM)}, Path(tmp))
        proc, url = server.proc, server.url
        try:
            ping = httpx.get(url + "/ping", timeout=10).json()
            print(f"# soak: backend {args.backend}, Q = {q} good clients, gate QUEUE_MAX_DEPTH = {q + HOSTILE_ROOM}, "
                  f"{seconds:g} s in "
                  f"{args.interval_s:g} s intervals, cores {ping.get('cores')}", flush=True)
            print(f"# {machine()}", flush=True)
            print(f"# started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", flush=True)
            print(HEADER, flush=True)
            max_body = int(os.environ.get("MAX_BODY_BYTES") or 64 * 1024)
            soak = Soak(url, proc.pid, q, seconds, args.interval_s, args.burst_s or args.interval_s / 4, max_body,
                        args.hostile_gap_s)
            asyncio.run(soak.run())
            alive = proc.poll() is None
        finally:
            container_server.stop(proc)
        assert server.stderr is not None  # started with a log_dir
        log = server.stderr.read_text(errors="replace")
        tracebacks = log.count("Traceback")
        table, ok = summary(soak.intervals, args, tracebacks)
        ok = ok and alive
        print()
        print(table)
        print(f"\nserver {'stayed up' if alive else 'DIED'}; verdict: {'within bounds' if ok else 'OUT OF BOUNDS'}",
              flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({
                "q": q, "seconds": seconds, "interval_s": args.interval_s, "ok": ok, "machine": machine(),
                "intervals": [{"good_ok": iv.good_ok, "rejected": iv.rejected, "ttfab_p95_ms": pct(iv.ttfab_ms, 95),
                               "hostile": iv.hostile, "wrong": iv.wrong, "errors_5xx": iv.errors_5xx,
                               "rss_mib": _median(iv, "rss_mib"), "fds": _median(iv, "fds"),
                               "threads": _median(iv, "threads"), "notes": iv.notes[:20]}
                              for iv in soak.intervals]}, indent=2))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
