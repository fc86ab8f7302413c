"""The synthetic server's ``--engine raw``: the same HTTP contract (/ping, streaming /invocations, the
503 gate, stage markers; no WebSocket) on raw asyncio streams, and the SageMaker runtime API's
response-stream stand-in (:mod:`bench.load.synthetic`'s docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

from bench.load.eventstream import EVENTSTREAM_TYPE, payload_part
from bench.load.synthetic_state import ServerState, SyntheticConfig, stamp_bytes, start_up

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _json_response(status: int, obj: dict, close: bool = False) -> bytes:
    body = json.dumps(obj).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{'connection: close' + chr(13) + chr(10) if close else ''}\r\n"
    )
    return head.encode() + body


async def serve_raw(cfg: SyntheticConfig, host: str, port: int) -> None:
    """The HTTP contract on raw asyncio streams: keep-alive HTTP/1.1, requests with a
    Content-Length body, streamed responses in chunked transfer encoding."""
    st = ServerState(cfg)
    chunk_head = b"%x\r\n" % cfg.chunk_bytes
    filler = b"\0" * cfg.chunk_bytes
    later_chunk = chunk_head + filler + b"\r\n"
    stream_head = b"HTTP/1.1 200 OK\r\ncontent-type: audio/pcm\r\ntransfer-encoding: chunked\r\n\r\n"

    async def invocations(body: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            text = str(json.loads(body or b"{}").get("text", ""))
        except (ValueError, AttributeError):
            writer.write(_json_response(400, {"error": "bad_request"}))
            return
        if not text:
            writer.write(_json_response(400, {"error": "bad_request", "detail": "text is empty"}))
            return
        err = await st.first_byte()
        if err:
            writer.write(_json_response(503, {"error": err}))
            return
        st.served += 1
        # Headers and the first chunk go out in one write, stamped just before it.
        head = stamp_bytes() if cfg.stamp else b""
        writer.write(stream_head + chunk_head + head + filler[len(head):] + b"\r\n")
        for _ in range(max(0, cfg.chunks - 1)):
            if cfg.chunk_interval_ms:
                await asyncio.sleep(cfg.chunk_interval_ms / 1000)
            writer.write(later_chunk)
        writer.write(b"0\r\n\r\n")

    event_head = b"HTTP/1.1 200 OK\r\ncontent-type: " + EVENTSTREAM_TYPE.encode() + b"\r\ntransfer-encoding: chunked\r\n\r\n"

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n" % len(data) + data + b"\r\n"

    async def runtime_stream(body: bytes, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
        """SageMaker's InvokeEndpointWithResponseStream as the runtime API answers it: a SigV4
        Authorization header required (its form checked, not its signature), the container's
        chunks as PayloadPart events, a container error as a 424 ModelError carrying the
        container's status and body (OriginalStatusCode, OriginalMessage)."""
        auth = headers.get("authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 Credential=") or "/sagemaker/aws4_request" not in auth:
            writer.write(_json_response(403, {"message": "Missing or malformed SigV4 Authorization (service sagemaker)"}))
            return
        try:
            text = str(json.loads(body or b"{}").get("text", ""))
        except (ValueError, AttributeError):
            text = ""
        err = "bad_request" if not text else await st.first_byte()
        if err:
            status = 400 if err == "bad_request" else 503
            body = json.dumps({"ErrorCode": "CLIENT_ERROR_FROM_MODEL", "OriginalStatusCode": status,
                               "OriginalMessage": json.dumps({"error": err}),
                               "Message": f"Received client error ({status}) from primary with message"}).encode()
            writer.write(b"HTTP/1.1 424 Failed Dependency\r\ncontent-type: application/json\r\n"
                         b"x-amzn-ErrorType: ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/\r\n"
                         b"content-length: %d\r\n\r\n" % len(body) + body)
            return
        st.served += 1
        head = stamp_bytes() if cfg.stamp else b""
        writer.write(event_head + chunk(payload_part(head + filler[len(head):])))
        for _ in range(max(0, cfg.chunks - 1)):
            if cfg.chunk_interval_ms:
                await asyncio.sleep(cfg.chunk_interval_ms / 1000)
            writer.write(chunk(payload_part(filler)))
        writer.write(b"0\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                raw = await reader.readuntil(b"\r\n\r\n")
                lines = raw.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    writer.write(_json_response(400, {"error": "bad_request"}, close=True))
                    break
                method, path = parts[0], parts[1].split("?", 1)[0]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    writer.write(_json_response(400, {"error": "bad_request", "detail": "send a Content-Length body"}, close=True))
                    break
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if path == "/ping" and method == "GET":
                    if st.ready:
                        writer.write(_json_response(200, {"status": "ok", "backend": "synthetic", "engine": "raw",
                                                          "service_ms": cfg.service_ms, "concurrency": cfg.concurrency}))
                    else:
                        writer.write(_json_response(503, {"status": "loading"}))
                elif path == "/invocations" and method == "POST":
                    await invocations(body, writer)
                elif path.startswith("/endpoints/") and path.endswith("/invocations-response-stream") and method == "POST":
                    await runtime_stream(body, headers, writer)
                elif path in ("/ping", "/invocations"):
                    writer.write(_json_response(405, {"error": "method_not_allowed"}))
                else:
                    writer.write(_json_response(404, {"error": "not_found"}))
                await writer.drain()
                if parts[2] == "HTTP/1.0" or "close" in headers.get("connection", "").lower():
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port, backlog=1024)
    async with server:
        await start_up(st)
        await server.serve_forever()
