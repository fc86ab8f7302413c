"""GET /metrics: the container's own counters in Prometheus' text format, for a scraper (the same
numbers the EMF lines carry to CloudWatch, with counters that are never reset)."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from .common import state

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def metrics(request: Request) -> Response:
    return PlainTextResponse(state(request).metrics.prometheus_text(), media_type=CONTENT_TYPE)


routes = [Route("/metrics", metrics, methods=["GET"])]
