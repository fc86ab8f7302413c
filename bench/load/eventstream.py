"""SageMaker's InvokeEndpointWithResponseStream without boto3's blocking client: a SigV4-signed
HTTP request on geventhttpclient (one greenlet per request instead of one thread), its
``application/vnd.amazon.eventstream`` body parsed with botocore's own decoder.

Why not boto3 under gevent: its client is safe there once the process is monkey-patched, but each
call builds and validates the request through the whole botocore handler chain and reads the
stream through urllib3, several times the CPU per request of a signed request on the fast client
(measured in benchmarks/replay_scale.py). The signature, credentials, region and endpoint URL are
still botocore's (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` and profiles behave as with boto3).

The framing (AWS event stream encoding): each message is a 12-byte prelude (total length, headers
length, CRC32 of those 8 bytes), the headers (name length, name, value type, value), the payload and
a CRC32 of everything before it. A ``PayloadPart`` event's payload is the container's bytes as they
were streamed; ``ModelStreamError`` and ``InternalStreamFailure`` arrive as exception messages.

:func:`encode_event` is the other direction, for local stand-ins of the runtime API
(``bench.load.synthetic --engine raw`` serves ``/endpoints/<name>/invocations-response-stream`` with it).

Nothing here imports gevent or geventhttpclient at module level: the package's other processes
never load them; only a Locust worker (bench/load/locustfile.py) creates a :class:`SageMakerStream`.
"""

from __future__ import annotations

import binascii
import json
import struct
import time
from typing import Any
from urllib.parse import quote, urlsplit

from bench.load.outcome import REJECT_CODES, Outcome

EVENTSTREAM_TYPE = "application/vnd.amazon.eventstream"
PATH = "/endpoints/{name}/invocations-response-stream"
SIGNING_NAME = "sagemaker"
"""The SigV4 service name of the sagemaker-runtime API (botocore's model says so)."""


def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack(">B", len(n)) + n + b"\x07" + struct.pack(">H", len(v)) + v  # 7 = string


def encode_event(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers (all SageMaker's response stream uses)."""
    hdr = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(hdr) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hdr))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + hdr + payload
    return body + struct.pack(">I", binascii.crc32(body) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    return encode_event({":event-type": "PayloadPart", ":content-type": "application/octet-stream",
                         ":message-type": "event"}, data)


def model_stream_error(code: str, message: str) -> bytes:
    return encode_event({":exception-type": "ModelStreamError", ":content-type": "application/json",
                         ":message-type": "exception"}, json.dumps({"Message": message, "ErrorCode": code}).encode())


def error_code_of(status: int, body: bytes) -> tuple[str, bool]:
    """(short error code, rejected by the gate) from a runtime API error response. A container's
    own answer travels in OriginalMessage (ModelError); the gate's 503 body names its code there."""
    try:
        obj = json.loads(body or b"{}")
    except ValueError:
        return f"http_{status}", False
    if not isinstance(obj, dict):
        return f"http_{status}", False
    original = obj.get("OriginalMessage")
    if isinstance(original, str):
        try:
            inner = json.loads(original)
            code = str(inner.get("error", "")) if isinstance(inner, dict) else ""
        except ValueError:
            code = ""
        if code:
            return code, code in REJECT_CODES
    code = str(obj.get("error") or obj.get("ErrorCode") or obj.get("__type") or obj.get("code") or f"http_{status}")
    return code.rsplit("#", 1)[-1], code in REJECT_CODES


class SageMakerStream:
    """InvokeEndpointWithResponseStream, signed per request, on a pooled geventhttpclient.

    ``session``: a boto3 Session (credentials, region, endpoint URL resolution as boto3 would).
    Credentials are read per request from the session's provider, so refreshable ones (SSO, role)
    keep working past their expiry."""

    def __init__(self, endpoint: str, session: Any, inference_component: str | None = None,
                 concurrency: int = 10_000, timeout_s: float = 70.0) -> None:
        from botocore.auth import SigV4Auth  # noqa: F401 - fail here, not at the first request
        from geventhttpclient import HTTPClient

        client = session.client("sagemaker-runtime")
        self.region = client.meta.region_name
        self.base_url = client.meta.endpoint_url.rstrip("/")
        self.endpoint = endpoint
        self.inference_component = inference_component
        self._credentials = session.get_credentials()
        if self._credentials is None:
            raise RuntimeError("no AWS credentials found (environment, profile or role); the workers sign with them")
        u = urlsplit(self.base_url)
        self.host_header = u.netloc
        self.path = (u.path.rstrip("/") + PATH.format(name=quote(endpoint, safe=""))) or "/"
        self.url = f"{u.scheme}://{u.netloc}{self.path}"
        self.http = HTTPClient(u.hostname or "", port=u.port, ssl=u.scheme == "https", concurrency=concurrency,
                               connection_timeout=10.0, network_timeout=timeout_s)
        # Sign once now: botocore's first signature loads modules and resolves the credentials,
        # a stall that would otherwise land on the first requests' send times.
        self.signed_headers(b"{}")
        from botocore.eventstream import EventStreamBuffer

        EventStreamBuffer().add_data(b"")
        from bench.load.gsocket import warm_resolver

        warm_resolver(u.hostname or "", u.port or (443 if u.scheme == "https" else 80))

    def signed_headers(self, body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {"Host": self.host_header, "Content-Type": "application/json", "X-Amzn-SageMaker-Accept": "audio/pcm"}
        if self.inference_component:
            headers["X-Amzn-SageMaker-Inference-Component"] = self.inference_component
        req = AWSRequest(method="POST", url=self.url, data=body, headers=headers)
        SigV4Auth(self._credentials.get_frozen_credentials(), SIGNING_NAME, self.region).add_auth(req)
        return dict(req.headers.items())

    def invoke(self, body: bytes) -> Outcome:
        from bench.load.gsocket import exchange

        return exchange(self.http, self.path, body, self.signed_headers(body), error_code_of, read_events)


def read_events(resp: Any, out: Outcome) -> None:
    """The body is an event stream: the first audio byte arrives in the first PayloadPart with a
    payload; an exception or error event names the error (its ErrorCode when the payload has one).
    A frame that does not parse is ``eventstream_<ParserError class>``."""
    from botocore.eventstream import EventStreamBuffer, ParserError

    from bench.load.gsocket import read_some

    buf = EventStreamBuffer()
    try:
        while data := read_some(resp):
            arrived = time.perf_counter()
            buf.add_data(data)
            for msg in buf:
                kind = msg.headers.get(":message-type")
                if kind == "event" and msg.headers.get(":event-type") == "PayloadPart" and msg.payload:
                    if out.ttfab_s is None:
                        out.ttfab_s = arrived - out.start
                    out.nbytes += len(msg.payload)
                elif kind in ("exception", "error"):
                    name = msg.headers.get(":exception-type") or msg.headers.get(":error-code") or "stream_error"
                    try:
                        code = str(json.loads(msg.payload).get("ErrorCode") or name)
                    except (ValueError, AttributeError):
                        code = str(name)
                    out.error = code
    except ParserError as err:
        out.error = f"eventstream_{err.__class__.__name__}"
