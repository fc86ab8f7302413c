"""Re-run the container's client-and-hostile-input table: the official `openai` client for every
response format (streamed and not), /v1/models, the voices listing, 20 concurrent requests at
QUEUE_MAX_DEPTH=2, JSON nested 10,000 deep, a 200 MB body (declared and chunked) with the server's
RSS before and after, 50 half-open connections, and a set of bad inputs. Prints a markdown table.

    PYTHONPATH=. .venv/bin/python benchmarks/container_contract.py            # starts the onnx server
    PYTHONPATH=. .venv/bin/python benchmarks/container_contract.py --json     # for CI
    PYTHONPATH=. .venv/bin/python benchmarks/container_contract.py --url http://127.0.0.1:8080  # no RSS then

Exit code 0 when every row is as expected, 1 when one is not, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import container_server  # noqa: E402

SENTENCE = "The quick brown fox jumps over the lazy dog."
J = {"content-type": "application/json"}


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def decoded_seconds(fmt: str, data: bytes) -> float:
    if fmt == "pcm":
        return len(data) / 48000
    import av
    with av.open(io.BytesIO(data)) as c:
        frames = [f for f in c.decode(audio=0)]
    return sum(f.samples for f in frames) / frames[0].sample_rate


class Table:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, what: str, result: str, ok: bool):
        self.rows.append({"what": what, "result": result, "ok": ok})
        print(f"  {'ok ' if ok else 'BAD'} {what}: {result}", file=sys.stderr)


def openai_rows(url: str, t: Table) -> None:
    import openai
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    for fmt in ("mp3", "opus", "aac", "flac", "wav", "pcm"):
        r = client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE, response_format=fmt)
        whole = decoded_seconds(fmt, r.content)
        with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=SENTENCE, response_format=fmt) as s:
            chunks = list(s.iter_bytes())
            status = s.status_code
        streamed = decoded_seconds(fmt, b"".join(chunks))
        t.add(f"`audio.speech.create(voice='alloy', response_format='{fmt}')`, plain and streamed",
              f"{r.response.status_code} / {status}; {whole:.2f} s / {streamed:.2f} s of audio "
              f"({len(chunks)} chunks)", r.response.status_code == 200 and status == 200 and whole > 1 and streamed > 1)
    ids = [m.id for m in client.models.list()]
    t.add("`client.models.list()`", f"200; {', '.join(ids)}", "tts-1" in ids)
    v = httpx.get(url + "/v1/audio/voices", timeout=10)
    t.add("`GET /v1/audio/voices`", f"{v.status_code}; {len(v.json().get('voices', []))} voices, "
          f"{len(v.json().get('aliases', {}))} OpenAI aliases", v.status_code == 200)


def concurrency_row(url: str, pid: int | None, n: int, t: Table) -> None:
    before = rss_mb(pid)

    async def burst():
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=n)) as c:
            async def one():
                t0 = time.monotonic()
                r = await c.post(url + "/v1/audio/speech", json={"model": "tts-1", "voice": "alloy",
                                                                  "input": SENTENCE, "response_format": "mp3"})
                return r.status_code, time.monotonic() - t0
            return await asyncio.gather(*(one() for _ in range(n)))

    res = asyncio.run(burst())
    ok = [s for c, s in res if c == 200]
    rej = [s for c, s in res if c == 503]
    after = rss_mb(pid)
    p99 = float(np.percentile(rej, 99)) * 1000 if rej else float("nan")
    service = min(ok) * 1000 if ok else float("nan")
    mem = f"; RSS {before:.0f} -> {after:.0f} MB" if before is not None else ""
    t.add(f"{n} concurrent requests at QUEUE_MAX_DEPTH=2",
          f"{len(rej)} x 503 queue_saturated (p99 {p99:.0f} ms), {len(ok)} x 200 (fastest {service:.0f} ms){mem}",
          len(ok) + len(rej) == n and len(ok) >= 1 and (not rej or p99 < 0.5 * service))


def deep_json_row(url: str, t: Table) -> None:
    deep = b"[" * 10000 + b"]" * 10000
    codes = [httpx.post(url + p, content=deep, headers=J, timeout=10).status_code
             for p in ("/invocations", "/v1/audio/speech")]
    t.add("JSON nested 10,000 deep (/invocations, /v1/audio/speech)", " / ".join(map(str, codes)),
          all(c == 400 for c in codes))


def big_body_row(port: int, pid: int | None, chunked: bool, t: Table) -> None:
    total = 200 * 2 ** 20
    before = rss_mb(pid)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + (b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"Content-Length: %d\r\n\r\n" % total))
    s.sendall(head)
    block = b"a" * (1 << 20)
    reply = b""
    t0 = time.monotonic()
    sent = 0
    try:
        while sent < total:
            s.sendall((b"%x\r\n%s\r\n" % (len(block), block)) if chunked else block)
            sent += len(block)
        if chunked:
            s.sendall(b"0\r\n\r\n")
        while b"\r\n\r\n" not in reply:
            data = s.recv(65536)
            if not data:
                break
            reply += data
    except OSError as e:
        reply = reply or f"({type(e).__name__} after {sent >> 20} MB)".encode()
    finally:
        s.close()
    after = rss_mb(pid)
    status = reply.split(b"\r\n", 1)[0].decode(errors="replace")
    mem = f"; RSS {before:.0f} -> {after:.0f} MB" if before is not None else ""
    t.add(f"a 200 MB body ({'chunked' if chunked else 'Content-Length'})",
          f"{status} after {time.monotonic() - t0:.1f} s{mem}",
          " 413 " in status and (before is None or after - before < 50))


def half_open_row(url: str, port: int, t: Table) -> None:
    socks = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # never finished
        socks.append(s)
    try:
        t0 = time.monotonic()
        r = httpx.get(url + "/ping", timeout=10)
        ms = (time.monotonic() - t0) * 1000
    finally:
        for s in socks:
            s.close()
    t.add("50 half-open connections", f"/ping {r.status_code} in {ms:.0f} ms", r.status_code == 200)


def bad_input_rows(url: str, t: Table) -> None:
    cases = [
        ("NUL characters", "/invocations", json.dumps({"text": "a\x00b"}).encode(), J),
        ("invalid UTF-8", "/invocations", b'{"text": "\xc3\x28"}', J),
        ("bad speed", "/v1/audio/speech", json.dumps({"input": "hi", "speed": 9}).encode(), J),
        ("unknown voice", "/v1/audio/speech", json.dumps({"input": "hi", "voice": "nobody"}).encode(), J),
        ("200k characters", "/invocations", json.dumps({"text": "a" * 200_000}).encode(), J),
        ("wrong content type", "/invocations", b'{"text": "hi"}', {"content-type": "text/plain"}),
        ("unknown model", "/v1/audio/speech", json.dumps({"input": "hi", "model": "gpt-5"}).encode(), J),
        ("unknown format", "/v1/audio/speech", json.dumps({"input": "hi", "response_format": "ogg"}).encode(), J),
    ]
    out, ok = [], True
    for name, path, body, headers in cases:
        r = httpx.post(url + path, content=body, headers=headers, timeout=30)
        err = r.json().get("error")
        code = err.get("code") if isinstance(err, dict) else err
        out.append(f"{name} {r.status_code} {code}")
        ok &= 400 <= r.status_code < 500
    t.add("bad inputs", "; ".join(out), ok)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="use a running server (QUEUE_MAX_DEPTH=2 for the concurrency row); "
                                 "default: start the onnx server on a free port")
    p.add_argument("--concurrency", type=int, default=20, help="requests at once (default 20)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of markdown")
    args = p.parse_args(argv)
    if args.concurrency < 1:
        print("--concurrency must be at least 1", file=sys.stderr)
        return 2
    proc = None
    if args.url:
        url, pid = args.url.rstrip("/"), None
        port = httpx.URL(url).port or 80
    else:
        try:
            server = container_server.start({"QUEUE_MAX_DEPTH": "2"}, args=())
        except (RuntimeError, TimeoutError) as err:
            print(err, file=sys.stderr)
            return 1
        proc, url, port, pid = server.proc, server.url, server.port, server.proc.pid
    t = Table()
    try:
        openai_rows(url, t)
        concurrency_row(url, pid, args.concurrency, t)
        deep_json_row(url, t)
        big_body_row(port, pid, chunked=False, t=t)
        big_body_row(port, pid, chunked=True, t=t)
        half_open_row(url, port, t)
        bad_input_rows(url, t)
        alive = httpx.get(url + "/ping", timeout=10).status_code == 200
        t.add("server after all of it", "/ping 200" if alive else "/ping failed", alive)
    except KeyboardInterrupt:
        return 130
    finally:
        if proc is not None:
            container_server.stop(proc)
    if args.json:
        print(json.dumps(t.rows, indent=2))
    else:
        print("| what | result | as expected |\n|---|---|---|")
        for r in t.rows:
            print(f"| {r['what']} | {r['result']} | {'yes' if r['ok'] else '**no**'} |")
    return 0 if all(r["ok"] for r in t.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
