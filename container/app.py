"""Starlette app assembly: the routes of each protocol (container/routes/), the lifespan that
loads the model in the background (so /ping answers 503 until it is ready) and the error handlers.
Request and response models: container/protocol.py; shared route helpers: routes/common.py."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from starlette.applications import Starlette

from . import markers
from .backends import create_backend
from .engine import Engine
from .errors import ContainerError
from .footprint import FootprintCache
from .routes import bidi, docs, openai, prometheus, sagemaker
from .routes.common import EXCEPTION_HANDLERS, format_for_accept, validate_request
from .settings import Settings
from .state import State

__all__ = ["State", "build_app", "format_for_accept", "validate_request"]

log = logging.getLogger("container.app")


async def load_model(st: State) -> None:
    """framework_init -> weights_ready -> warmup_done -> footprint -> ready; a failure leaves the
    server up with /ping 503 naming it instead of crash-looping the instance."""
    settings, engine, backend = st.settings, st.engine, st.backend
    assert engine is not None and backend is not None  # the lifespan creates both before it starts this task
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, backend.init_framework)
        markers.emit_stage("framework_init")
        await loop.run_in_executor(None, backend.load_weights)
        markers.emit_stage("weights_ready")
        if settings.warmup:
            t0 = time.monotonic()
            await loop.run_in_executor(None, backend.warmup)
            await engine.warm_text()
            log.info("warmup took %.2f s", time.monotonic() - t0)
        markers.emit_stage("warmup_done")
        # After warm-up so the peak resident set includes it; before ready, so a tool that
        # waits for /ping 200 already has this line.
        st.footprint = FootprintCache(str(getattr(backend, "device", "cpu")))
        markers.emit_footprint(await loop.run_in_executor(None, st.footprint.get))
        if settings.default_voice and settings.default_voice not in backend.voices:
            log.warning("DEFAULT_VOICE %r is not one of %s", settings.default_voice, backend.voices)
        engine.ready = True
        markers.emit_stage("ready")
    except ContainerError as e:
        engine.load_error = e.detail or str(e)
        log.error("model not loaded: %s (/ping answers 503)", engine.load_error)
    except Exception as e:  # keep serving 503 rather than crash-looping the instance
        engine.load_error = f"{type(e).__name__}: {e}"
        log.exception("model not loaded (/ping answers 503)")


async def flush_metrics(st: State) -> None:
    while True:
        await asyncio.sleep(st.settings.metrics_interval_s)
        st.metrics.flush()


def build_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()
    st = State(settings)
    c = settings.cores_info()
    log.info("cores: %d usable (%s; affinity %s, cgroup quota %s), INFER_CORES=%d",
             c["cores"], c["source"], c["affinity"], c["quota"], c["infer_cores"])

    @contextlib.asynccontextmanager
    async def lifespan(app):
        st.backend = create_backend(settings)
        st.engine = Engine(settings, st.backend, st.metrics)
        st.engine.start()
        loader = asyncio.create_task(load_model(st))
        flusher = asyncio.create_task(flush_metrics(st))
        try:
            yield
        finally:
            loader.cancel()
            flusher.cancel()
            await st.engine.stop()
            # After the drain: worker processes (TORCH_WORKERS) stop only once nothing needs them.
            await asyncio.get_running_loop().run_in_executor(None, st.backend.close)
            st.downloads.close()
            st.metrics.flush()

    app = Starlette(routes=[*sagemaker.routes, *openai.routes, *bidi.routes, *docs.routes, *prometheus.routes],
                    lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS)
    app.state.container = st
    return app
