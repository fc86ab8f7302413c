"""Metrics in CloudWatch embedded metric format (EMF): published through the logs, no API calls."""
from __future__ import annotations

import collections
import json
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from . import telemetry
from .telemetry import NAMESPACE, UNITS  # noqa: F401  (re-exported: the one definition is telemetry)


def pressure_index(request_rate: float, capacity_rps: float, queue_depth: float,
                   queue_max_depth: float, rejection_rate: float,
                   weights: Sequence[float] = (0.4, 0.4, 0.2)) -> float:
    """0-100: weighted mean of three signals, each normalised and clipped to [0, 1].

    request_rate / capacity_rps says how close arrivals are to what the instance sustains,
    queue_depth / queue_max_depth how close the gate is to refusing, rejection_rate (0-1 share
    of refused requests over the window) that it already does. Weights are normalised so a
    user can give any non-negative triple.
    """
    if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("weights must be three non-negative numbers, not all zero")

    def clip(x: float) -> float:
        return 0.0 if x != x else min(1.0, max(0.0, x))  # NaN counts as no pressure

    parts = (
        clip(request_rate / capacity_rps) if capacity_rps > 0 else 1.0,
        clip(queue_depth / queue_max_depth) if queue_max_depth > 0 else 1.0,
        clip(rejection_rate),
    )
    total = sum(weights)
    return round(100.0 * sum(w * p for w, p in zip(weights, parts, strict=True)) / total, 3)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no data (EMF must not get a made-up zero)."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def emf_record(dims: Mapping[str, str], values: dict[str, float], units: dict[str, str],
               ts: float | None = None) -> dict:
    """One EMF line: ``values`` under :data:`telemetry.NAMESPACE` with one dimension set, ``dims``
    (:func:`telemetry.dimensions`: EndpointName, VariantName, Model)."""
    ts = time.time() if ts is None else ts
    metrics = [{"Name": k, "Unit": units.get(k, "None")} for k in values]
    rec: dict[str, Any] = {"_aws": {"Timestamp": int(ts * 1000),
                    "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [list(dims)],
                                           "Metrics": metrics}]}}
    rec.update(dims)
    rec.update(values)
    return rec


class MetricsRecorder:
    """Counters per flush interval plus a sliding window for rates and the pressure index."""

    def __init__(self, model: str, *, capacity_rps: float, queue_max_depth: int,
                 weights: Sequence[float], window_s: float = 60.0, stream=None,
                 endpoint_name: str = telemetry.LOCAL_ENDPOINT,
                 variant_name: str = telemetry.DEFAULT_VARIANT):
        self.model = model
        self.dimensions = telemetry.dimensions(endpoint_name, variant_name, model)
        self.capacity_rps = capacity_rps
        self.queue_max_depth = queue_max_depth
        self.weights = tuple(weights)
        self.window_s = window_s
        self.stream = stream
        self._lock = threading.Lock()
        self._events: collections.deque[tuple[float, str]] = collections.deque()
        self._ttfab: list[float] = []
        self._service: list[float] = []
        self._counts: collections.Counter[str] = collections.Counter()
        self._totals: collections.Counter[str] = collections.Counter()
        """Counts since start (never reset): what GET /metrics serves as Prometheus counters."""
        self.concurrent = 0
        self.queued = 0

    def record(self, kind: str, now: float | None = None) -> None:
        """kind: admitted | rejected | shed."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._counts[kind] += 1
            self._totals[kind] += 1
            self._events.append((now, kind))

    def record_ttfab(self, ms: float) -> None:
        with self._lock:
            self._ttfab.append(ms)

    def record_service(self, ms: float) -> None:
        """Service time of one request (first segment's inference start -> first audio byte)."""
        with self._lock:
            self._service.append(ms)

    def snapshot(self, now: float | None = None) -> dict[str, float]:
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._events and self._events[0][0] < now - self.window_s:
                self._events.popleft()
            arrivals = sum(1 for _, k in self._events if k in ("admitted", "rejected"))
            rejected = sum(1 for _, k in self._events if k == "rejected")
            rate = arrivals / self.window_s
            rej_rate = rejected / arrivals if arrivals else 0.0
            values: dict[str, float] = {
                telemetry.CONCURRENT: self.concurrent,
                telemetry.QUEUE_DEPTH: self.queued,
                telemetry.ADMITTED: self._counts["admitted"],
                telemetry.REJECTED: self._counts["rejected"],
                telemetry.SHED: self._counts["shed"],
            }
            p95 = percentile(self._ttfab, 95)
            if p95 is not None:
                values[telemetry.TTFAB_P95] = round(p95, 2)
            service = percentile(self._service, 95)
            if service is not None:
                values[telemetry.SERVICE_P95] = round(service, 2)
            values[telemetry.PRESSURE] = pressure_index(rate, self.capacity_rps, self.concurrent,
                                                     self.queue_max_depth, rej_rate, self.weights)
            return values

    def prometheus_text(self) -> str:
        """The container's own counters and gauges in Prometheus' text exposition format (0.0.4), for a
        scraper of GET /metrics: requests by outcome since start (counters, never reset by the EMF
        flush), and the current in-flight count, queue depth, pressure index and this flush interval's
        TTFAB and service-time p95 (gauges), labelled with the EMF dimensions."""
        values = self.snapshot()
        with self._lock:
            totals = dict(self._totals)
        labels = ",".join(f'{k.lower()}="{v}"' for k, v in
                          (("endpoint", self.dimensions.get("EndpointName", "")),
                           ("variant", self.dimensions.get("VariantName", "")), ("model", self.model)))
        lines = ["# HELP speech_requests_total Requests by outcome since the container started.",
                 "# TYPE speech_requests_total counter"]
        for outcome in ("admitted", "rejected", "shed", "cancelled"):
            lines.append(f'speech_requests_total{{{labels},outcome="{outcome}"}} {totals.get(outcome, 0)}')
        lines += ["# HELP speech_runs_aborted_total Model runs stopped because their request was cancelled.",
                  "# TYPE speech_runs_aborted_total counter",
                  f"speech_runs_aborted_total{{{labels}}} {totals.get('run_aborted', 0)}"]
        gauges = ((telemetry.CONCURRENT, "speech_concurrent_requests", "Requests in flight (admitted, not yet answered)."),
                  (telemetry.QUEUE_DEPTH, "speech_queue_depth", "Requests waiting for an inference slot."),
                  (telemetry.PRESSURE, "speech_pressure_index", "0-100 pressure index over the last window."),
                  (telemetry.TTFAB_P95, "speech_ttfab_p95_ms", "TTFAB p95 of this flush interval, milliseconds."),
                  (telemetry.SERVICE_P95, "speech_service_time_p95_ms", "Service time p95 of this flush interval, ms."))
        for key, name, help_ in gauges:
            if key in values:
                lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {values[key]:g}"]
        return "\n".join(lines) + "\n"

    def flush(self) -> dict:
        values = self.snapshot()
        with self._lock:
            self._counts.clear()
            self._ttfab.clear()
            self._service.clear()
        rec = emf_record(self.dimensions, values, UNITS)
        out = self.stream or sys.stdout
        out.write(json.dumps(rec) + "\n")
        out.flush()
        return rec
