"""Kokoro-82M inference container: SageMaker contract, streaming, admission gate, drain.

:mod:`container.app` assembles the Starlette app from :mod:`container.routes` (one module per
protocol); :mod:`container.engine` is the admission gate, G2P stage and workers;
:mod:`container.backends` the models (onnx, torch, sine); :mod:`container.server` runs uvicorn
with SageMaker's SIGTERM drain. It imports nothing of ``speech``, ``bench`` or ``policy``."""
