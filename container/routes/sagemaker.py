"""SageMaker's container contract: GET /ping (503 until the model is loaded and warmed, and while
draining) and POST /invocations (streamed audio; one whole file on asynchronous endpoints)."""
from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol import SpeechRequest
from .common import engine_of, format_for_accept, read_json_body, respond, speak, state, submit, validate_request


async def ping(request: Request) -> Response:
    st = state(request)
    engine = st.engine
    cores = st.settings.cores_info()
    if engine is None or not engine.ready or engine.draining:
        status = "draining" if engine is not None and engine.draining else (
            "error" if engine is not None and engine.load_error else "loading")
        body = {"status": status, "cores": cores}
        if engine is not None and engine.load_error:
            body["detail"] = engine.load_error
        return JSONResponse(body, status_code=503)
    assert st.backend is not None  # a ready engine has its backend
    body = {"status": "ok", **st.backend.identity(), "cores": cores}
    if st.settings.mps is not None:
        body["mps"] = st.settings.mps  # what `serve` found for NVIDIA MPS (GPU images)
    if st.settings.image_digest:
        body["image_digest"] = st.settings.image_digest
    if st.footprint is not None:
        body["footprint"] = await asyncio.to_thread(st.footprint.get)
    return JSONResponse(body)


async def invocations(request: Request) -> Response:
    st = state(request)
    if not st.settings.async_inference:
        return await speak(request, SpeechRequest)
    # An asynchronous endpoint: SageMaker stores whatever body comes back, so send one whole
    # file with its real sizes in the header, in the format the request or Accept names.
    req = validate_request(await read_json_body(request), SpeechRequest, st)
    if "response_format" not in req.model_fields_set:
        req.response_format = format_for_accept(request.headers.get("accept"))
    req.stream = False
    engine = engine_of(st)
    job = submit(engine, req, stream=False)
    return await respond(job, req, engine, request)


routes = [
    Route("/ping", ping, methods=["GET"]),
    Route("/invocations", invocations, methods=["POST"]),
]
