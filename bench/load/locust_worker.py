"""One Locust worker's part of a trace replay (the shipped locustfile's module docstring): the client,
its share of the requests sent each at its due time from its own greenlet (open loop) or one
request in flight per user (closed), the rows kept for the master, Locust's statistics fired.
Imported only by bench/load/locustfile.py, in Locust's processes (gevent)."""

from __future__ import annotations

import gc
import time
from typing import Any

import gevent
import gevent.event
import gevent.pool

DRAIN_S = 75.0
"""After the last due time, how long a worker waits for answers (the clients time out at 70 s)."""
REQUEST_NAME = "ttfab"


class Worker:
    """This process's part: the client, its share, the rows not yet sent to the master."""

    def __init__(self) -> None:
        self.client: Any = None
        self.rows: list[list] = []
        self.active = 0
        self.mode = "open"
        self.t0 = 0.0
        self.end_s = 0.0
        self.bodies: list[bytes] = []
        self.next_body = 0
        self.running = False
        self.share: dict = {}
        self.go = gevent.event.Event()

    def take_rows(self) -> list[list]:
        rows, self.rows = self.rows, []
        return rows


W = Worker()
"""This process's part (one per Locust process)."""


def target_of(environment: Any) -> dict:
    """What the master tells its workers to load (they need nothing on their own command line)."""
    opts = environment.parsed_options
    if opts.sagemaker_endpoint:
        return {"sagemaker_endpoint": opts.sagemaker_endpoint, "aws_region": opts.aws_region,
                "inference_component": opts.inference_component}
    if not environment.host:
        raise RuntimeError("no target: pass --host http://HOST:PORT (a container) or --sagemaker-endpoint NAME")
    return {"host": environment.host}


def make_client(target: dict) -> Any:
    if W.client is None:
        if target.get("sagemaker_endpoint"):
            import boto3

            from bench.load.eventstream import SageMakerStream

            session = boto3.Session(region_name=target.get("aws_region") or None)
            W.client = SageMakerStream(target["sagemaker_endpoint"], session, target.get("inference_component") or None)
        else:
            from bench.load.ghttp import HttpStream

            W.client = HttpStream(target["host"])
    return W.client


def fire_request(environment: Any, r: Any) -> None:
    """Locust's statistics: TTFAB as the response time of an answered request; the time to the
    error for a failed one (a gate rejection is a failure named by its code)."""
    if r.ok:
        environment.events.request.fire(request_type="POST", name=REQUEST_NAME, response_time=r.ttfab_s * 1000,
                                        response_length=r.nbytes, exception=None, context={})
    else:
        environment.events.request.fire(request_type="POST", name=REQUEST_NAME, response_time=(r.end - r.start) * 1000,
                                        response_length=r.nbytes, exception=RuntimeError(r.error or "error"), context={})


def row_status(r: Any) -> str:
    return "ok" if r.ok else "rejected" if r.rejected else (r.error or "error")


def run_open(environment: Any, times: Any, ids: Any) -> int:
    """Each request from its own greenlet at its due time; returns how many were sent."""
    client = W.client
    group = gevent.pool.Group()
    perf = time.perf_counter
    t0 = W.t0

    def one(due: float, body: bytes) -> None:
        late_ms = (perf() - t0 - due) * 1000
        r = client.invoke(body)
        W.rows.append([due, late_ms, r.ttfab_s * 1000 if r.ok else None, row_status(r), r.start - t0, r.end - t0])
        fire_request(environment, r)

    sent = 0
    bodies = W.bodies
    for due, bid in zip(times.tolist(), ids.tolist(), strict=True):
        delay = t0 + due - perf()
        if delay > 0:
            gevent.sleep(delay)
        group.spawn(one, due, bodies[bid])
        sent += 1
    group.join(timeout=DRAIN_S)
    group.kill(block=False)
    return sent


def wait_closed_end() -> None:
    """Closed mode: until the level's end, then until this worker's users have their answers."""
    gevent.sleep(max(0.0, W.t0 + W.end_s - time.perf_counter()))
    deadline = time.perf_counter() + DRAIN_S
    while W.active and time.perf_counter() < deadline:
        gevent.sleep(0.05)


def prepare_part(environment: Any, share: dict, report) -> bool:
    """Everything before the start that costs time (the client: botocore loads its models; a full
    garbage collection), so that none of it lands on the first requests' send times."""
    W.mode = share["mode"]
    W.bodies = [bytes(b) for b in share.get("bodies", [])]
    W.end_s = share.get("end_s", 0.0)
    try:
        make_client(share["target"])
    except Exception as err:  # noqa: BLE001 - the master names this worker and why; the others go on
        report({"index": share["index"], "sent": 0, "rows": [], "error": f"{err.__class__.__name__}: {err}"})
        return False
    # What the process imported (Locust, botocore's models) moves out of the collector's sight: a
    # full collection during the run walks all of it, tens of ms in which no request leaves.
    gc.collect()
    gc.freeze()
    return True


def start_part(environment: Any, share: dict, start_at: float, report) -> None:
    """Start this process's part at ``start_at`` (wall clock, the same for every worker)."""
    W.t0 = time.perf_counter() + (start_at - time.time())
    W.running = True
    W.go.set()

    def part() -> None:
        import numpy as np

        cpu0 = time.process_time()
        sent = 0
        if W.mode == "open":
            times = np.frombuffer(share["times"], dtype=np.float64)
            ids = np.frombuffer(share["ids"], dtype=np.int32)
            sent = run_open(environment, times, ids)
        else:
            wait_closed_end()
        W.running = False
        report({"index": share["index"], "sent": sent, "rows": W.take_rows(), "cpu_s": time.process_time() - cpu0})

    gevent.spawn(part)
