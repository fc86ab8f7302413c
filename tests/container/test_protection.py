import pytest

"""Admission gate, deadline shedding, drain on SIGTERM, missing model: real servers (sine backend
slowed on purpose so requests overlap predictably)."""
import asyncio
import json
import signal
import socket
import time

import httpx
import numpy as np

from container.markers import parse_footprint_line

# Starts servers, subprocesses or the real model: not in the fast tier (make test-fast).
pytestmark = pytest.mark.slow

TEXT = "A tone that stands in for speech."  # one segment


async def _post_many(url, n, body, spacing=0.0):
    async with httpx.AsyncClient(timeout=60) as c:
        async def one(i):
            await asyncio.sleep(i * spacing)
            t0 = time.monotonic()
            r = await c.post(url + "/invocations", json=body)
            return r, time.monotonic() - t0
        return await asyncio.gather(*(one(i) for i in range(n)))


def test_gate_rejects_exactly_the_overflow(server_factory):
    k = 3
    srv = server_factory({"BACKEND": "sine", "SINE_DELAY_MS": 400, "INFER_CORES": 1, "SINE_MAX_BATCH": 1,
                          "QUEUE_MAX_DEPTH": k, "SLO_MS": 60000})
    results = asyncio.run(_post_many(srv.url, k + 5, {"text": TEXT}))
    ok = [(r, t) for r, t in results if r.status_code == 200]
    rejected = [(r, t) for r, t in results if r.status_code == 503]
    assert len(ok) == k and len(rejected) == 5
    for r, _ in rejected:
        assert r.json() == {"error": "queue_saturated", "detail": r.json()["detail"]}
    # Refused at once, not after waiting: every refusal is answered before the first admitted request
    # (400 ms of service at least) completes. An order, which load does not reverse.
    assert max(t for _, t in rejected) < min(t for _, t in ok), (results, [t for _, t in results])
    for r, _ in ok:
        assert len(r.content) > 24000  # real audio for the admitted ones
    assert max(t for _, t in ok) > 3 * 0.4 - 0.05  # they really were queued one after another


def test_stale_requests_are_shed(server_factory):
    # A run takes 3 s (a sleep: load only lengthens it) and the SLO is 1.2 s: the first request is
    # served, the others cannot have their first audio in time and are shed by the deadline.
    srv = server_factory({"BACKEND": "sine", "SINE_DELAY_MS": 3000, "INFER_CORES": 1, "SINE_MAX_BATCH": 1,
                          "SLO_MS": 1200})
    results = asyncio.run(_post_many(srv.url, 5, {"text": TEXT}))
    codes = [r.status_code for r, _ in results]
    ok = [t for r, t in results if r.status_code == 200]
    shed = [(r, t) for r, t in results if r.status_code == 503]
    assert ok and shed, codes
    for r, _ in shed:
        assert r.json()["error"] == "shed_deadline"
    # Answered by the deadline, not after queueing to the end: every refusal before the first served
    # request (3 s of service at least) completes. An order, which load does not reverse.
    assert max(t for _, t in shed) < min(ok), [t for _, t in results]
    assert codes.count(200) + len(shed) == 5


def test_drain_on_sigterm(server_factory):
    srv = server_factory({"BACKEND": "sine", "SINE_DELAY_MS": 300, "INFER_CORES": 1, "SINE_MAX_BATCH": 1,
                          "SLO_MS": 60000, "DRAIN_TIMEOUT_S": 20})

    async def scenario():
        async with httpx.AsyncClient(timeout=60) as c:
            started = asyncio.Queue()

            async def one(i: int):
                # Streamed: headers arrive once the request is admitted and its first segment is
                # out, so SIGTERM below provably lands while all four are in flight.
                text = f"{TEXT} It keeps going for a while. Then it ends {i}."  # three segments
                async with c.stream("POST", srv.url + "/invocations", json={"text": text}) as r:
                    await started.put(i)
                    body = b"".join([chunk async for chunk in r.aiter_bytes()])
                    return r.status_code, body

            inflight = [asyncio.create_task(one(i)) for i in range(4)]
            for _ in range(4):
                await asyncio.wait_for(started.get(), 30)
            srv.proc.send_signal(signal.SIGTERM)
            # Until the server has seen the signal (its /ping turns 503), not a fixed 0.1 s that a
            # loaded machine can outlast: a request sent before that is rightly still admitted.
            for _ in range(600):
                ping = await c.get(srv.url + "/ping")
                if ping.status_code == 503:
                    break
                await asyncio.sleep(0.05)
            late = await c.post(srv.url + "/invocations", json={"text": TEXT})
            return await asyncio.gather(*inflight), late, ping

    done, late, ping = asyncio.run(scenario())
    assert [status for status, _ in done] == [200] * 4
    assert all(len(body) > 3 * 24000 for _, body in done)  # every segment arrived, not just the first
    assert late.status_code == 503 and late.json()["error"] == "draining"
    assert ping.status_code == 503
    assert srv.proc.wait(15) == 0
    log = "".join(srv.stderr)
    assert "active requests = 0" in log
    assert "Traceback" not in log


def _broken_onnx_dir(d):
    """Every file the onnx backend looks for is there, but the model is not a model."""
    (d / "kokoro.onnx").write_bytes(b"not an onnx graph")
    np.savez(d / "voices.npz", jf_alpha=np.zeros((510, 1, 256), np.float32))
    (d / "vocab.json").write_text('{"vocab": {"a": 1}}')
    return d


def test_unloadable_model_is_a_clear_503_not_a_crash(server_factory, tmp_path):
    """Files present but broken are found while loading: the server stays up, /ping 503 names it
    and reports no footprint (SageMaker's contract: /ping stays 503 while the model never loads).
    (Files missing altogether stop the start: tests/container/test_preflight.py.)"""
    srv = server_factory({"BACKEND": "onnx", "MODEL_DIR": _broken_onnx_dir(tmp_path)}, wait=False)
    ping = srv.wait_ready(want=503, timeout=60)
    assert ping.json()["status"] == "error" and "kokoro.onnx" in ping.json()["detail"]
    # No copy loaded, so no footprint: none in /ping, no footprint marker on stdout (this server
    # was test_footprint.py's own, started a second time on the same broken files).
    assert "footprint" not in ping.json()
    assert not any(parse_footprint_line(line) for line in list(srv.stdout))
    r = httpx.post(srv.url + "/invocations", json={"text": "hi"}, timeout=10)
    assert r.status_code == 503 and r.json()["error"] == "model_unavailable"
    time.sleep(0.5)
    assert srv.proc.poll() is None  # still serving, not crash-looping
    assert "cannot load" in "".join(srv.stderr)


def test_emf_metrics_on_stdout(server_factory):
    srv = server_factory({"BACKEND": "sine", "METRICS_INTERVAL_S": 0.3, "QUEUE_MAX_DEPTH": 1,
                          "SINE_DELAY_MS": 300, "INFER_CORES": 1, "ENDPOINT_NAME": "prod-kokoro-82m",
                          "VARIANT_NAME": "AllTraffic"})
    results = asyncio.run(_post_many(srv.url, 3, {"text": TEXT}))
    assert sorted(r.status_code for r, _ in results) == [200, 503, 503]

    def emf(lines):
        return [json.loads(line) for line in lines if '"_aws"' in line]
    # Flushed every 0.3 s: wait until the flushes have counted all three and the service time, rather
    # than sleeping for a few intervals (a loaded machine delays them).
    lines = srv.wait_for_stdout(lambda lines: sum(r["Admitted"] + r["Rejected"] for r in emf(lines)) >= 3
                                and any("ServiceTimep95" in r for r in emf(lines)))
    recs = emf(lines)
    cw = recs[-1]["_aws"]["CloudWatchMetrics"][0]
    assert cw["Namespace"] == "SpeechEndpoints/Container"
    assert cw["Dimensions"] == [["EndpointName", "VariantName", "Model"]]
    assert all(r["EndpointName"] == "prod-kokoro-82m" and r["VariantName"] == "AllTraffic" for r in recs)
    assert sum(r["Admitted"] for r in recs) == 1 and sum(r["Rejected"] for r in recs) == 2
    assert any("TTFABp95" in r for r in recs)
    # The one admitted request ran alone: its service time is recorded, at least the sine delay.
    service = [r["ServiceTimep95"] for r in recs if "ServiceTimep95" in r]
    assert len(service) == 1 and service[0] >= 300
    assert max(r["PressureIndex"] for r in recs) > 0


def _metrics(url: str) -> dict[str, int]:
    """/metrics as {series: value}, the series named without its labels but the outcome's."""
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("speech_"):
            name, value = line.rsplit(" ", 1)
            outcome = name.split('outcome="')[1].split('"')[0] if 'outcome="' in name else None
            out[name.split("{")[0] + (f":{outcome}" if outcome else "")] = int(float(value))
    return out


def _until(url: str, holds, what: str, timeout_s: float = 60.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        m = _metrics(url)
        if holds(m):
            return m
        assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f} s: {m}"
        time.sleep(0.05)


def _send(port: int, text: str) -> socket.socket:
    """A request on a raw socket whose answer is never read: it stays admitted until closed."""
    s = socket.create_connection(("127.0.0.1", port))
    body = json.dumps({"text": text, "response_format": "pcm"}).encode()
    s.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return s


def test_batching_scheduler_groups_equal_length_segments(server_factory):
    # The server's own gauges, not completion times: a blocker runs alone (one run at a time,
    # each two minutes of sleep, which abort() cuts short), four equal-length requests queue behind
    # it, the blocker's client leaves, and the four leave the queue together: queue depth 0 with
    # four in flight. One at a time, three would wait two minutes more behind the first; the test
    # gives the scheduler a minute. Their clients then leave too: the four were one run, aborted once.
    srv = server_factory({"BACKEND": "sine", "SINE_DELAY_MS": 120000, "INFER_CORES": 1, "SINE_MAX_BATCH": 4,
                          "SLO_MS": 600000, "QUEUE_MAX_DEPTH": 8})
    blocker = _send(srv.port, "Hold on.")
    _until(srv.url, lambda m: m["speech_concurrent_requests"] == 1 and m["speech_queue_depth"] == 0,
           "the blocker running")
    four = [_send(srv.port, TEXT) for _ in range(4)]
    _until(srv.url, lambda m: m["speech_queue_depth"] == 4, "four requests queued behind the blocker")
    blocker.close()
    m = _until(srv.url, lambda m: m["speech_queue_depth"] == 0, "the four taken off the queue")
    assert m["speech_concurrent_requests"] == 4 and m["speech_runs_aborted_total"] == 1, m
    for s in four:
        s.close()
    m = _until(srv.url, lambda m: m["speech_requests_total:cancelled"] == 5, "five requests cancelled")
    m = _until(srv.url, lambda m: m["speech_concurrent_requests"] == 0, "nothing in flight")
    assert m["speech_runs_aborted_total"] == 2, m  # the blocker's run, and the four's one run