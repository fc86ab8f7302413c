"""The Locust engine end to end: real Locust master and worker processes (bench/load/locustfile.py)
against bench.load.synthetic of known first-byte delay, and against its stand-in of the SageMaker
runtime API (the response-stream event format, SigV4 header required)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from botocore.eventstream import EventStreamBuffer

from bench.cli.main import main
from bench.load.eventstream import error_code_of, model_stream_error, payload_part
from bench.load.locust_engine import LOCUSTFILE
from bench.load.schedule import Schedule
from bench.load.synthetic import SyntheticServer, free_port

from ..commands.test_validate_live import GATE, SERVICE_MS, SLO_MS, WINDOW, _plan
from ..conftest import ENDPOINT, create_endpoint

ROOT = Path(__file__).resolve().parents[3]
DELAY_MS = 40.0


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def _stand_in(**kw) -> SyntheticServer:
    return SyntheticServer(engine="raw", service_ms=0, concurrency=0, first_byte_delay_ms=DELAY_MS, **kw)


# --- fast: the pieces without processes -------------------------------------------------------------


def test_event_stream_frames_decode_with_botocore():
    buf = EventStreamBuffer()
    data = payload_part(b"\x01\x02audio") + model_stream_error("ModelStreamError", "boom")
    buf.add_data(data[:7])  # frames split anywhere still decode once complete
    assert list(buf) == []
    buf.add_data(data[7:])
    part, err = list(buf)
    assert part.headers[":event-type"] == "PayloadPart" and part.payload == b"\x01\x02audio"
    assert err.headers[":message-type"] == "exception" and json.loads(err.payload)["ErrorCode"] == "ModelStreamError"


def test_runtime_error_codes_come_from_the_container_body():
    gate = json.dumps({"OriginalStatusCode": 503, "OriginalMessage": json.dumps({"error": "queue_saturated"})}).encode()
    assert error_code_of(424, gate) == ("queue_saturated", True)
    assert error_code_of(400, b'{"__type": "com.amazon#ValidationError", "message": "x"}') == ("ValidationError", False)
    assert error_code_of(500, b"<html>") == ("http_500", False)


def test_worker_shares_are_seeded_independent_thinnings():
    s = Schedule(np.sort(np.random.default_rng(1).random(20_000) * 100), np.zeros(20_000, dtype=np.int32), [b"{}"])
    a, b = s.split(2, seed=3), s.split(2, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))  # repeatable
    assert sorted(np.concatenate(a).tolist()) == list(range(20_000))  # every request exactly once
    assert abs(a[0].size - 10_000) < 400  # about half each...
    # ...and not alternating: runs of the same worker occur as for coin flips (mean run length 2).
    who = np.zeros(20_000, dtype=int)
    who[a[1]] = 1
    runs = 1 + np.count_nonzero(np.diff(who))
    assert 1.8 < 20_000 / runs < 2.2


@pytest.mark.parametrize("extra, needle", [
    (["--engine", "locust", "--workers", "0"], "--workers"),
    (["--engine", "locust", "--workers", "5000"], "--workers"),
    (["--engine", "locust", "--master-bind", "nohost"], "expected HOST:PORT"),
    (["--engine", "locust", "--master-bind", "127.0.0.1:5557"], "needs --expect-workers"),
    (["--engine", "locust", "--expect-workers", "2"], "add --master-bind"),
    (["--engine", "locust", "--transport", "bidirectional"], "--transport stream only"),
])
def test_engine_flags_bad_input_exit_2(tmp_path, capsys, extra, needle):
    rc = main(["replay", "--trace", "steady:rps=5,duration=2", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o"),
               *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


# --- slow: real Locust processes ---------------------------------------------------------------------


@pytest.mark.slow
class _Niceness:
    """Watches this process's Locust children while a run lasts: the last nice value seen of the
    master and of the workers (psutil: Locust's own dependency)."""

    def __enter__(self):
        import threading

        import psutil

        self.seen: dict[str, int] = {}
        self._stop = threading.Event()

        def watch() -> None:
            me = psutil.Process()
            while not self._stop.is_set():
                for child in me.children(recursive=True):
                    try:
                        cmd, nice = child.cmdline(), child.nice()
                    except psutil.Error:
                        continue
                    role = "master" if "--master" in cmd else "worker" if "--worker" in cmd else None
                    if role:
                        self.seen[role] = nice
                time.sleep(0.05)

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow  # starts a Locust master and two worker processes
def test_replay_on_two_locust_workers_writes_one_artifact_and_locusts_files(tmp_path, capsys):
    from bench.load.locust_engine import MASTER_NICE

    with _stand_in() as s, _Niceness() as nice:
        # The SLO is one no answer of a 40 ms stand-in misses on a loaded machine: the share is computed, not this CPU judged.
        rc = main(["replay", "--trace", "steady:rps=60,duration=6", "--url", s.url, "--engine", "locust", "--workers", "2",
                   "--slo-ms", "30000", "--out", str(tmp_path), "--csv", str(tmp_path / "csv"),
                   "--html", str(tmp_path / "replay.html"), "--json"])
    assert rc == 0
    # The master yields the cores to its workers: its bursts at every report must not delay a send.
    assert nice.seen["master"] - nice.seen["worker"] == MASTER_NICE > 0
    summary = json.loads(capsys.readouterr().out)
    art = json.loads((tmp_path / "replay-steady.json").read_text())
    assert art["engine"] == "locust" and art["workers"] == 2 and art["dead_workers"] == [] and not art["interrupted"]
    assert art["requests"] == art["scheduled"] == summary["requests"] == len(art["per_request"]) > 300
    assert art["ok"] == art["requests"] and art["within_slo_share"] == 1.0
    dues = [r["due_s"] for r in art["per_request"]]
    assert dues == sorted(dues) and dues[-1] < 6
    # TTFAB is the stand-in's delay plus the loopback: never below it. Above it only a bound that a
    # loaded machine cannot break (a unit slip would): how close the client comes to the delay, and
    # how late it sends, are measured by benchmarks/replay_scale.py, not judged here.
    assert DELAY_MS <= art["ttfab_p50_ms"] < 1000
    assert 0 <= art["send_late_p99_ms"] < 60_000
    # Locust's own files beside ours (--csv DIR, --html FILE); its response times are the same TTFAB.
    assert {"locust-replay-steady_stats.csv", "locust-replay-steady_failures.csv"} <= {p.name for p in (tmp_path / "csv").iterdir()}
    assert (tmp_path / "replay.html").exists() and (tmp_path / "replay-locust.html").exists()
    stats = (tmp_path / "csv" / "locust-replay-steady_stats.csv").read_text().splitlines()
    header, row = stats[0].split(","), next(r for r in stats[1:] if ",ttfab," in r).split(",")
    locust_median = float(row[header.index("Median Response Time")])
    assert int(row[header.index("Request Count")]) == art["requests"]
    # Locust rounds its percentiles: to 1 ms below 100 ms, to 10 ms up to 1000 ms, to 100 ms above.
    assert abs(locust_median - art["ttfab_p50_ms"]) <= max(10, 0.1 * art["ttfab_p50_ms"])


@pytest.mark.slow
def test_replay_on_locust_counts_gate_rejections(tmp_path, capsys):
    # One lane of 20 ms gated at 3: a step to 3x capacity must be turned away in part.
    with SyntheticServer(engine="raw", service_ms=20, queue_max=3) as s:
        rc = main(["replay", "--trace", "step:base=20,factor=6,at=1,duration=3,seed=3", "--url", s.url, "--engine", "locust",
                   "--workers", "2", "--out", str(tmp_path), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["rejected"] > 20 and summary["errors"] == 0
    statuses = {r["status"] for r in json.loads((tmp_path / "replay-step.json").read_text())["per_request"]}
    assert statuses == {"ok", "rejected"}


@pytest.mark.slow
def test_shipped_locustfile_runs_under_plain_locust_headless(tmp_path):
    rows = tmp_path / "rows.jsonl"
    with _stand_in() as s:
        p = subprocess.run([sys.executable, "-m", "locust", "--headless", "-f", str(LOCUSTFILE), "--host", s.url,
                            "--trace", "steady:rps=30,duration=3", "--trace-rows", str(rows), "--csv", str(tmp_path / "l")],
                           cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = [json.loads(line) for line in rows.read_text().splitlines()]
    meta = recs[0]
    sent = sum(len(r["rows"]) for r in recs if r["type"] == "rows")
    assert meta["type"] == "meta" and meta["workers"] == 1 and sent == meta["scheduled"] > 60
    assert recs[-1] == {"type": "end", "done": [0], "dead": []}
    assert "ttfab" in (tmp_path / "l_stats.csv").read_text()


@pytest.mark.slow
def test_remote_workers_and_a_dead_one_is_named(tmp_path):
    """--master-bind with workers started by the documented command; one is killed mid-run."""
    port = free_port()
    out, tmp = tmp_path / "o", tmp_path / "t"
    tmp.mkdir()
    with _stand_in() as s:
        bench = subprocess.Popen([sys.executable, "-m", "bench", "replay", "--trace", "steady:rps=40,duration=12", "--url", s.url,
                                  "--engine", "locust", "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "2",
                                  "--out", str(out)], env={**_env(), "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        workers = [subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker", "--master-host",
                                     "127.0.0.1", "--master-port", str(port)], env=_env(), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for _ in range(2)]
        try:
            art_path = out / "replay-steady.json"
            # Kill one worker once the run is under way, known by its first rows at the master (the workers
            # report every 3 s of a 12 s run), not by a guess of how long start-up takes on this machine.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any('"type":"rows"' in p.read_text() for p in tmp.glob("*/rows.jsonl")):
                time.sleep(0.2)
            workers[0].send_signal(signal.SIGKILL)
            stdout, stderr = bench.communicate(timeout=180)
        finally:
            for w in workers:
                w.kill()
                w.wait()
    assert bench.returncode == 0, stderr[-2000:]
    assert "worker --master-host" in stderr  # the command for remote workers is shown
    art = json.loads(art_path.read_text())
    assert art["workers"] == 2 and len(art["dead_workers"]) == 1
    assert f"pid {workers[0].pid}" in art["dead_workers"][0] and "stopped answering" in art["dead_workers"][0]
    assert f"dead worker: {art['dead_workers'][0]}" in stdout
    assert 0 < art["requests"] < art["scheduled"]


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_and_writes_what_was_measured(tmp_path):
    out, tmp = tmp_path / "o", tmp_path / "t"
    tmp.mkdir()
    with _stand_in() as s:
        bench = subprocess.Popen([sys.executable, "-m", "bench", "replay", "--trace", "steady:rps=40,duration=60", "--url", s.url,
                                  "--engine", "locust", "--workers", "2", "--out", str(out)], env={**_env(), "TMPDIR": str(tmp)},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Interrupt once the workers' periodic reports have brought rows to the master.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any('"type":"rows"' in p.read_text() for p in tmp.glob("*/rows.jsonl")):
            time.sleep(0.5)
        time.sleep(1)
        children = subprocess.run(["pgrep", "-f", f"locust -f {LOCUSTFILE}"], capture_output=True, text=True).stdout.split()
        bench.send_signal(signal.SIGINT)
        stdout, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 130, stderr[-2000:]
    art = json.loads((out / "replay-steady.json").read_text())
    assert art["interrupted"] and 0 < art["requests"] < art["scheduled"]
    assert len(children) >= 3  # master + 2 workers ran...
    time.sleep(1)
    for pid in children:  # ...and none outlives the command
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.slow
def test_replay_sagemaker_through_signed_event_stream(aws_env, monkeypatch, tmp_path, capsys):
    """The control plane is moto (the endpoint must be InService); the runtime API is the
    stand-in on 127.0.0.1, which refuses requests without a SigV4 header for service sagemaker."""
    create_endpoint(aws_env)
    with _stand_in() as s:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", s.url)
        rc = main(["replay", "--trace", "steady:rps=60,duration=2", "--endpoint", ENDPOINT, "--engine", "locust",
                   "--workers", "2", "--out", str(tmp_path), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["target"] == f"sagemaker:{ENDPOINT}"
    assert summary["ok"] == summary["requests"] == summary["scheduled"] > 80 and summary["engine"] == "locust"
    assert DELAY_MS <= summary["ttfab_p50_ms"] < 1000  # the delay, and a bound load cannot break (replay_scale.py measures)


@pytest.mark.slow
def test_validate_live_on_locust_passes_when_the_plan_matches(tmp_path, capsys):
    plan_file = _plan(SERVICE_MS, GATE, tmp_path)
    with SyntheticServer(service_ms=SERVICE_MS, queue_max=GATE) as s:
        capsys.readouterr()
        rc = main(["validate", "--plan", plan_file, "--url", s.url, "--live", "--mix", "short", *WINDOW, "--engine", "locust",
                   "--workers", "2", "--json"])
        out = json.loads(capsys.readouterr().out)
    assert out["issues"] == [] and rc == 0
    ok, gate = out["live"]
    assert ok["concurrency"] == 5 and ok["rejected"] == 0 and ok["errors"] == 0
    assert 4 * SERVICE_MS <= ok["p95_ms"] < SLO_MS
    assert gate["concurrency"] == GATE + 1 and gate["rejected"] > 0
