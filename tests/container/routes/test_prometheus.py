"""GET /metrics: the container's own counters in Prometheus' text format."""
from __future__ import annotations

import json

import httpx


def test_metrics_serves_the_containers_counters_as_prometheus_text(server_factory):
    """GET /metrics: Prometheus text of the container's own counters (never reset by the EMF flush),
    for a scraper of the default container metrics path (issue 34)."""
    srv = server_factory({"BACKEND": "sine", "ENDPOINT_NAME": "ep", "METRICS_INTERVAL_S": "0.2"})
    r = httpx.post(f"{srv.url}/invocations", json={"text": "Hello there."}, timeout=30)
    assert r.status_code == 200
    # An EMF flush that counted the request (it resets the flush's own counts): the Prometheus
    # counters must not go back to 0 with it.
    srv.wait_for_stdout(lambda lines: any(json.loads(ln).get("Admitted") for ln in lines if '"_aws"' in ln))
    m = httpx.get(f"{srv.url}/metrics", timeout=5)
    assert m.status_code == 200 and m.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = m.text.splitlines()
    assert "# TYPE speech_requests_total counter" in lines
    admitted = [line for line in lines if line.startswith("speech_requests_total{") and 'outcome="admitted"' in line]
    assert len(admitted) == 1 and admitted[0].endswith(" 1") and 'endpoint="ep"' in admitted[0], lines
    assert any(line.startswith("speech_concurrent_requests{") for line in lines)
