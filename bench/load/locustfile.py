"""The shipped locustfile: a traffic trace replayed open loop (or a closed-loop level) on Locust.

``bench replay --engine locust`` and ``bench validate --live --engine locust`` run it through
bench/load/locust_engine.py; it also runs unchanged under plain Locust, standalone or distributed
(a user's own master, their Helm chart on Kubernetes):

    locust --headless -f bench/load/locustfile.py --host http://127.0.0.1:8080 --trace steady:rps=50,duration=30
    locust -f bench/load/locustfile.py --headless --master --expect-workers 4 --trace azure-conv:peak=2000 \\
        --sagemaker-endpoint my-endpoint --trace-rows rows.jsonl
    locust -f bench/load/locustfile.py --worker --master-host MASTER    # on each worker machine

Every option can also come from the environment (LOCUST_TRACE, LOCUST_SAGEMAKER_ENDPOINT, ...).

How it works. The master (or the single local process) builds the schedule: every request's due
time and body, from ``--trace`` or a file ``bench replay`` wrote (``--trace-schedule``). At the
start it splits the requests across the connected workers, each request to a worker drawn at random
(seeded): every worker's share is an independent thinning of the same traffic. It sends each
worker its share; each builds its client and says it is ready; then the master sends them all a
common start time on the wall clock, 1 s ahead (workers on other machines need their clocks in
sync, as NTP keeps them, to a few ms). A worker sends each request at its due time from
its own greenlet, whatever earlier requests are doing (open loop; the Locust users only keep the
run alive), and records per request when it was due, how late it left, TTFAB and the outcome.
TTFAB (the first audio byte) is what Locust records as the response time, so its statistics,
``--csv`` and ``--html`` mean what the replay artifact means. Rows reach the master with Locust's
periodic worker reports and a final ``trace_done`` message; the master appends them to
``--trace-rows`` (JSON lines) as they arrive, so an interrupted or crashed run keeps what it measured.
It quits when every share is done, or its worker is gone (a missed heartbeat, a quit) and named
in the rows file as dead.

``--trace-mode closed`` is one closed-loop level for ``validate --live``: each Locust user keeps
one request in flight from the start for ``--level-settle-s`` + ``--level-measure-s``.

Importing this module imports Locust, which monkey-patches the process for gevent: only Locust
processes import it, never the rest of the package.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

try:  # run from a checkout with plain `locust -f bench/load/locustfile.py`: the package is beside it
    import bench.load.schedule  # noqa: F401
except ImportError:  # pragma: no cover - depends on how locust was started
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gevent
import gevent.event
import gevent.pool
from locust import User, events, task
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from bench.load.locust_worker import (
    DRAIN_S,
    W,
    fire_request,
    prepare_part,
    row_status,
    start_part,
    target_of,
)
from bench.load.schedule import Schedule, schedule_from_spec

GO_LEAD_S = 1.0
"""How far ahead of now the master sets the common start, once every worker is ready (the go
message must reach them all first)."""
READY_WAIT_S = 60.0
"""How long the master waits for the workers to prepare (build their client) before naming the late ones."""


@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    g = parser.add_argument_group("speech-endpoints trace replay")
    g.add_argument("--trace", default="", env_var="LOCUST_TRACE", help="traffic spec (as bench simulate/replay)")
    g.add_argument("--trace-seed", type=int, default=0, env_var="LOCUST_TRACE_SEED", help="timestamps and the worker split")
    g.add_argument("--trace-duration", type=float, default=0.0, env_var="LOCUST_TRACE_DURATION",
                   help="replay only the first S seconds (0: all)")
    g.add_argument("--trace-mix", default="mixed", env_var="LOCUST_TRACE_MIX", help="request texts: short, mixed, long")
    g.add_argument("--trace-schedule", default="", env_var="LOCUST_TRACE_SCHEDULE", help="schedule file from bench replay")
    g.add_argument("--trace-rows", default="", env_var="LOCUST_TRACE_ROWS", help="master: per-request rows (JSON lines)")
    g.add_argument("--trace-mode", default="open", choices=["open", "closed"], env_var="LOCUST_TRACE_MODE")
    g.add_argument("--level-settle-s", type=float, default=0.0, env_var="LOCUST_LEVEL_SETTLE_S")
    g.add_argument("--level-measure-s", type=float, default=0.0, env_var="LOCUST_LEVEL_MEASURE_S")
    g.add_argument("--sagemaker-endpoint", default="", env_var="LOCUST_SAGEMAKER_ENDPOINT",
                   help="send to this SageMaker endpoint (credentials and region as boto3 finds them)")
    g.add_argument("--inference-component", default="", env_var="LOCUST_INFERENCE_COMPONENT")
    g.add_argument("--aws-region", default="", env_var="LOCUST_AWS_REGION")


class TraceUser(User):
    """Open mode: only keeps the run alive (the schedule runs in its own greenlets). Closed mode:
    one request in flight at a time, back to back, for the level's settle + measure."""

    def wait_time(self) -> float:
        return 0.0

    @task
    def work(self) -> None:
        if W.mode != "closed":
            gevent.sleep(1.0)
            return
        W.go.wait()
        env = self.environment
        gevent.sleep(max(0.0, W.t0 - time.perf_counter()))
        client = W.client
        while W.running and time.perf_counter() < W.t0 + W.end_s:
            body = W.bodies[W.next_body % len(W.bodies)]
            W.next_body += 1
            W.active += 1
            try:
                r = client.invoke(body)
            finally:
                W.active -= 1
            W.rows.append([None, None, r.ttfab_s * 1000 if r.ok else None, row_status(r), r.start - W.t0, r.end - W.t0])
            fire_request(env, r)
            if not r.ok:
                gevent.sleep(0.005)  # a rejection answers at once: without a pause the slot would spin
        gevent.sleep(3600)


# --- the master (or the single local process) ------------------------------------------------------


class _Sink:
    """The rows file: JSON lines appended and flushed as they arrive."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 - open for the whole run

    def write(self, obj: dict) -> None:
        if self.f is not None:
            self.f.write(json.dumps(obj, separators=(",", ":")) + "\n")
            self.f.flush()


class _Master:
    def __init__(self) -> None:
        self.sink: _Sink | None = None
        self.expected: list[int] = []
        self.done: set[int] = set()
        self.dead: set[int] = set()
        self.who: dict[str, dict] = {}
        self.cids: dict[int, str] = {}
        """Share index -> Locust client id of the worker that has it."""
        self.start_at = 0.0
        self.deadline = 0.0
        self.finished = False
        self.schedule: Schedule | None = None
        self.ready: set[int] = set()
        self.started = False
        self.span_s = 0.0
        """Last due time (open) or settle + measure (closed), after the start."""
        """Built when the process starts (a trace can take seconds to read), not at the start of the run."""


M = _Master()


def _sink() -> _Sink:
    """The master's rows file, opened at init (:func:`_on_init`) before any worker can report."""
    assert M.sink is not None
    return M.sink


def _schedule(opts: Any) -> Schedule:
    if opts.trace_schedule:
        return Schedule.load(Path(opts.trace_schedule))
    if not opts.trace:
        raise RuntimeError("no traffic: pass --trace SPEC (or LOCUST_TRACE)")
    return schedule_from_spec(opts.trace, opts.trace_seed, opts.trace_duration or None, opts.trace_mix)


def _shares(environment: Any, workers: int) -> tuple[list[dict], dict]:
    opts = environment.parsed_options
    target = target_of(environment)
    if opts.trace_mode == "closed":
        from bench.load.ladder import MIXES
        from bench.load.schedule import request_body

        bodies = [request_body(t) for t in MIXES[opts.trace_mix]] if opts.trace_mix in MIXES else [request_body("Hello.")]
        end_s = opts.level_settle_s + opts.level_measure_s
        meta = {"mode": "closed", "settle_s": opts.level_settle_s, "measure_s": opts.level_measure_s}
        M.span_s = end_s
        return [{"mode": "closed", "target": target, "index": i, "end_s": end_s, "bodies": bodies}
                for i in range(workers)], meta
    s = M.schedule or _schedule(opts)
    parts = s.split(workers, s.seed)
    meta = {"mode": "open", "spec": s.spec, "seed": s.seed, "duration_s": s.duration_s, "scheduled": int(s.times_s.size)}
    M.span_s = float(s.times_s[-1]) if s.times_s.size else 0.0
    return [{"mode": "open", "target": target, "index": i, "bodies": s.bodies,
             "times": s.times_s[idx].tobytes(), "ids": s.body_ids[idx].tobytes()} for i, idx in enumerate(parts)], meta


def _go_when_ready(environment: Any) -> None:
    """Once every share's worker is ready (or named dead), tell them all the common start."""
    if M.started or not all(i in M.ready or i in M.dead for i in M.expected):
        return
    M.started = True
    M.start_at = time.time() + GO_LEAD_S
    M.deadline = M.start_at + M.span_s + DRAIN_S + 10
    _sink().write({"type": "go", "start_at": M.start_at, "ready": sorted(M.ready)})
    for i in sorted(M.ready):
        environment.runner.send_message("trace_go", {"start_at": M.start_at}, client_id=M.cids[i])


def _record_done(data: dict, cid: str = "local") -> None:
    i = int(data["index"])
    _sink().write({"type": "rows", "worker": i, "rows": data.get("rows", [])})
    if data.get("error"):
        info = M.who.get(cid, {})
        M.dead.add(i)
        _sink().write({"type": "dead", "worker": i, "client": cid, "pid": info.get("pid"), "host": info.get("host"),
                      "reason": f"could not start: {data['error']}", "at_s": round(time.time() - M.start_at, 3)})
        return
    _sink().write({"type": "done", "worker": i, "sent": data.get("sent", 0), "cpu_s": data.get("cpu_s")})
    M.done.add(i)


def _quit_when_done(environment: Any) -> None:
    """Every share done, or its worker gone: write the end and quit (the process then writes
    Locust's own summary, CSV and HTML)."""
    runner = environment.runner
    while not M.finished:
        gevent.sleep(0.25)
        if not isinstance(runner, MasterRunner) and (rows := W.take_rows()):
            _sink().write({"type": "rows", "worker": 0, "rows": rows})
        for i in M.expected:
            if i in M.done or i in M.dead:
                continue
            cid = M.cids.get(i)
            client = runner.clients.get(cid) if isinstance(runner, MasterRunner) and cid else None
            gone = isinstance(runner, MasterRunner) and (client is None or client.state == STATE_MISSING)
            late = time.time() > M.deadline
            if gone or late:
                info = M.who.get(cid or "", {})
                why = ("stopped answering (no heartbeat, or it quit)" if gone else "did not finish by the deadline" if M.started
                       else f"was not ready within {READY_WAIT_S:g} s")
                M.dead.add(i)
                _sink().write({"type": "dead", "worker": i, "client": cid, "pid": info.get("pid"), "host": info.get("host"),
                              "reason": why, "at_s": round(time.time() - M.start_at, 3)})
        if isinstance(runner, MasterRunner):
            _go_when_ready(environment)
        if all(i in M.done or i in M.dead for i in M.expected):
            M.finished = True
            _sink().write({"type": "end", "done": sorted(M.done), "dead": sorted(M.dead)})
            runner.quit()


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        def report(data: dict) -> None:
            environment.runner.send_message("trace_done", data)

        def on_share(environment: Any, msg: Any, **_: Any) -> None:
            environment.runner.send_message("trace_hello", {"pid": os.getpid(), "host": socket.gethostname()})

            def prepare() -> None:
                if prepare_part(environment, msg.data, report):
                    W.share = msg.data
                    environment.runner.send_message("trace_ready", {"index": msg.data["index"]})

            gevent.spawn(prepare)

        def on_go(environment: Any, msg: Any, **_: Any) -> None:
            start_part(environment, W.share, msg.data["start_at"], report)

        runner.register_message("trace_share", on_share)
        runner.register_message("trace_go", on_go)
    else:
        if environment.parsed_options is not None and environment.parsed_options.trace_mode == "open":
            M.schedule = _schedule(environment.parsed_options)
    if isinstance(runner, MasterRunner):
        def on_done(environment: Any, msg: Any, **_: Any) -> None:
            _record_done(msg.data, msg.node_id)

        def on_hello(environment: Any, msg: Any, **_: Any) -> None:
            M.who[msg.node_id] = msg.data

        def on_ready(environment: Any, msg: Any, **_: Any) -> None:
            M.ready.add(int(msg.data["index"]))
            _go_when_ready(environment)

        runner.register_message("trace_done", on_done)
        runner.register_message("trace_hello", on_hello)
        runner.register_message("trace_ready", on_ready)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return
    if M.sink is not None:
        return
    M.sink = _Sink(environment.parsed_options.trace_rows)
    M.start_at = time.time()
    M.deadline = M.start_at + READY_WAIT_S
    if isinstance(runner, MasterRunner):
        indexes = sorted(runner.worker_indexes[c.id] for c in runner.clients.all if c.state != STATE_MISSING)
        shares, meta = _shares(environment, len(indexes))
        M.expected = list(range(len(indexes)))
        by_index = {v: k for k, v in runner.worker_indexes.items()}
        clients = {}
        for share, idx in zip(shares, indexes, strict=True):
            cid = by_index[idx]
            clients[share["index"]] = M.cids[share["index"]] = cid
            runner.send_message("trace_share", share, client_id=cid)
        _sink().write({"type": "meta", **meta, "workers": len(indexes), "clients": clients})
    else:
        shares, meta = _shares(environment, 1)
        M.expected = [0]
        _sink().write({"type": "meta", **meta, "workers": 1, "clients": {0: "local"}})
        M.who["local"] = {"pid": os.getpid(), "host": socket.gethostname()}
        if prepare_part(environment, shares[0], _record_done):
            M.ready.add(0)
            M.started = True
            M.start_at = time.time() + GO_LEAD_S
            M.deadline = M.start_at + M.span_s + DRAIN_S + 10
            _sink().write({"type": "go", "start_at": M.start_at, "ready": [0]})
            start_part(environment, shares[0], M.start_at, _record_done)
    gevent.spawn(_quit_when_done, environment)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    """Ctrl-C in a single local process: what it measured so far goes to the rows file."""
    if M.sink is not None and not isinstance(environment.runner, (MasterRunner, WorkerRunner)):
        if rows := W.take_rows():
            _sink().write({"type": "rows", "worker": 0, "rows": rows})


@events.report_to_master.add_listener
def _on_report(client_id: str, data: dict, **_: Any) -> None:
    rows = W.take_rows()
    if rows:
        data["trace_rows"] = rows


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict, **_: Any) -> None:
    rows = data.get("trace_rows")
    if rows and M.sink is not None:
        _sink().write({"type": "rows", "client": client_id, "rows": rows})


__all__ = ["TraceUser"]
