"""uvicorn runner with SageMaker's shutdown contract: on SIGTERM stop admitting (503 draining),
let in-flight requests finish within DRAIN_TIMEOUT_S, then exit 0."""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import cast

import uvicorn

from .app import build_app
from .settings import Settings

log = logging.getLogger("container.server")


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app):
        super().__init__(config)
        self._app = app
        self._drain_task: asyncio.Task | None = None

    def handle_exit(self, sig: int, frame) -> None:
        engine = self._app.state.container.engine
        if self._drain_task is not None or engine is None or sig != signal.SIGTERM:
            # Second signal, Ctrl-C, or nothing to drain: uvicorn's own (faster) path.
            return super().handle_exit(sig, frame)
        engine.begin_drain()
        self._drain_task = asyncio.get_event_loop().create_task(self._drain(engine))

    async def _drain(self, engine) -> None:
        timeout = self._app.state.container.settings.drain_timeout_s
        n = len(engine.active)
        log.info("SIGTERM: draining %d in-flight request(s), up to %.1f s", n, timeout)
        done = await engine.wait_idle(timeout)
        if done:
            log.info("drain complete: active requests = 0")
        else:
            log.warning("drain timeout after %.1f s: %d request(s) still active", timeout, len(engine.active))
        # Let the last response bodies leave the socket before uvicorn closes connections.
        await asyncio.sleep(0.05)
        self.should_exit = True


def configure_logging(level: str = "info") -> None:
    # Logs go to stderr; stdout carries only stage markers and EMF lines, one JSON per line.
    logging.basicConfig(stream=sys.stderr, level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def serve(settings: Settings, log_level: str = "info") -> int:
    configure_logging(log_level)
    app = build_app(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            log_config=None, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2, ws_ping_interval=20, ws_ping_timeout=20,
                            # A WebSocket message is bounded like an HTTP body (close 1009 beyond).
                            # Settings fills MAX_BODY_BYTES from MAX_TEXT_CHARS when it is not set.
                            ws_max_size=cast(int, settings.max_body_bytes))
    server = DrainingServer(config, app)
    try:
        server.run()
    except KeyboardInterrupt:  # second Ctrl-C: uvicorn re-raises it after a forced exit
        return 130
    return 0
