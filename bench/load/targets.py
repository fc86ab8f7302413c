"""What a ladder sends requests to: a local container (HTTP stream or bidirectional WebSocket) or
a SageMaker endpoint (:mod:`bench.load.sagemaker_target`), behind one small interface so the
ladder never cares which.

Every ``invoke`` measures TTFAB from just before the request is sent to the first audio byte and
keeps the request outstanding until its stream ends (closed loop: a slot is free only then).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any, Protocol

from bench.errors import TargetError, UsageError
from bench.load.http1 import ArrivalReader, Connection, HttpProtocolError, RawHttpClient
from bench.load.outcome import REJECT_CODES, Outcome
from bench.load.request import error_code, payload
from bench.load.sagemaker_target import SageMakerTarget
from speech.schema.artifacts import Fingerprint

if TYPE_CHECKING:
    import ssl


class Target(Protocol):
    name: str
    """``local:<url>`` or ``sagemaker:<endpoint>``: the artifact's provenance.target."""
    transport: str

    async def open(self, concurrency: int) -> None: ...

    async def close(self) -> None: ...

    async def invoke(self, text: str) -> Outcome: ...

    def check(self) -> None:
        """Raise TargetError when the target cannot be measured (unreachable, missing, not ready)."""

    def fingerprint(self, instance_type: str | None = None, image_digest: str | None = None) -> Fingerprint: ...


def local_fingerprint(name: str, identity: dict, instance_type: str | None, image_digest: str | None) -> Fingerprint:
    """A local server has no image digest unless it reports one; hash what identifies it instead
    (its /ping identity), so two runs against the same server build share a fingerprint."""
    digest = image_digest or identity.get("image_digest")
    if not digest:
        # The footprint changes from ping to ping; it describes the copy, not the build.
        ident = {k: v for k, v in identity.items() if k not in ("status", "footprint")}
        digest = "sha256:" + hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    try:
        return Fingerprint.of(instance_type or "local", digest)
    except ValueError as err:
        raise UsageError(f"--instance-type/--image-digest: {str(err).splitlines()[0]}") from None


class HttpTarget:
    """A local container: ``POST /invocations`` streamed, one keep-alive connection per slot.

    ``http://`` URLs go through :class:`RawHttpClient` (raw asyncio streams); ``https://`` ones
    through httpx (TLS is not worth reimplementing, and nothing local needs it to be fast).
    ``/ping`` is always httpx: it is one blocking check, not part of any measurement.
    """

    transport = "stream"

    def __init__(self, url: str, timeout_s: float = 65.0) -> None:
        self.url = url.rstrip("/")
        self.name = f"local:{self.url}"
        self.timeout_s = timeout_s
        self._ssl: ssl.SSLContext | None = None
        self._clients: list = []
        self._idle: list = []
        self._identity: dict = {}
        self._raw: RawHttpClient | None = RawHttpClient(self.url) if self.url.startswith("http://") else None

    def check(self) -> None:
        import httpx

        if not self.url.startswith(("http://", "https://")):
            raise UsageError(f"--url {self.url!r}: must start with http:// or https://")
        try:
            r = httpx.get(self.url + "/ping", timeout=5.0)
        except httpx.HTTPError as err:
            raise TargetError(
                f"{self.url}/ping: cannot connect ({err.__class__.__name__}); start the container "
                "(python -m container serve) or fix --url"
            ) from None
        if r.status_code != 200:
            raise TargetError(f"{self.url}/ping answered {r.status_code}: the server is not ready; wait for it or check its logs")
        try:
            self._identity = r.json() if isinstance(r.json(), dict) else {}
        except ValueError:
            self._identity = {}

    def fingerprint(self, instance_type: str | None = None, image_digest: str | None = None) -> Fingerprint:
        return local_fingerprint(self.name, self._identity, instance_type, image_digest)

    async def open(self, concurrency: int) -> None:
        import ssl

        if self._raw is None and self._ssl is None:
            self._ssl = ssl.create_default_context()

    def _new_client(self):
        import httpx

        # One single-connection client per slot: httpcore's shared pool scans every connection
        # and waiting request on each event, which at hundreds of streams blocks the event loop
        # for longer than the latencies being measured.
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        return httpx.AsyncClient(limits=limits, verify=self._ssl, timeout=httpx.Timeout(self.timeout_s, connect=10.0))

    async def close(self) -> None:
        clients, self._clients, self._idle = self._clients, [], []
        for c in clients:
            if isinstance(c, Connection):
                c.close()
            else:
                await c.aclose()

    async def invoke(self, text: str) -> Outcome:
        if self._raw is not None:
            return await self._invoke_raw(text)
        return await self._invoke_httpx(text)

    async def _invoke_raw(self, text: str) -> Outcome:
        raw = self._raw
        assert raw is not None
        data = raw.request_bytes("/invocations", json.dumps(payload(text)).encode())
        conn: Connection | None = self._idle.pop() if self._idle else None
        start = time.perf_counter()
        out = Outcome(start=start, end=start)
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    reused = conn is not None
                    if conn is not None and not conn.alive():
                        self._drop(conn)
                        conn, reused = None, False
                    if conn is None:
                        conn = await raw.connect()
                        self._clients.append(conn)
                    try:
                        resp = await raw.send(conn, data)
                        break
                    except HttpProtocolError as err:
                        # A kept-alive connection the server closed while it sat idle (uvicorn
                        # drops them after 5 s): nothing was processed, so retry once, fresh.
                        self._drop(conn)
                        conn = None
                        if not (reused and err.no_response):
                            raise
                if resp.status != 200:
                    body = b"".join([part async for part in raw.body_parts(conn, resp)])
                    code = error_code(body)
                    out.rejected = resp.status == 503 and code in REJECT_CODES
                    out.error = code or f"http_{resp.status}"
                else:
                    async for part in raw.body_parts(conn, resp):
                        if out.ttfab_s is None:
                            perf, out.first_at_mono = time.perf_counter(), time.monotonic()
                            if isinstance(conn.reader, ArrivalReader):
                                # When the loop read that byte off the socket, if it was earlier.
                                perf, out.first_at_mono = conn.reader.arrival_of(resp.first_offset) or (perf, out.first_at_mono)
                            out.ttfab_s = perf - start
                        if len(out.first_chunk) < 16:
                            out.first_chunk += part[: 16 - len(out.first_chunk)]
                        out.nbytes += len(part)
                    out.ok = out.ttfab_s is not None
                    if not out.ok:
                        out.error = "empty_stream"
        except HttpProtocolError as err:
            out.error = err.code
            if conn is not None:
                self._drop(conn)
                conn = None
        except TimeoutError:
            out.error = "ReadTimeout" if conn is not None else "ConnectTimeout"
            if conn is not None:
                self._drop(conn)
                conn = None
        out.end = time.perf_counter()
        if conn is not None:
            if conn.alive():
                self._idle.append(conn)
            else:
                self._drop(conn)
        return out

    def _drop(self, conn: Connection) -> None:
        conn.close()
        with contextlib.suppress(ValueError):
            self._clients.remove(conn)

    async def _invoke_httpx(self, text: str) -> Outcome:
        import httpx

        if self._idle:
            client = self._idle.pop()
        else:
            await self.open(1)
            client = self._new_client()
            self._clients.append(client)
        start = time.perf_counter()
        out = Outcome(start=start, end=start)
        try:
            async with client.stream("POST", self.url + "/invocations", json=payload(text)) as r:
                if r.status_code != 200:
                    code = error_code(await r.aread())
                    out.rejected = r.status_code == 503 and code in REJECT_CODES
                    out.error = code or f"http_{r.status_code}"
                else:
                    async for chunk in r.aiter_raw():
                        if not chunk:
                            continue
                        if out.ttfab_s is None:
                            out.first_at_mono = time.monotonic()
                            out.ttfab_s = time.perf_counter() - start
                            out.first_chunk = chunk[:16]
                        out.nbytes += len(chunk)
                    out.ok = out.ttfab_s is not None
                    if not out.ok:
                        out.error = "empty_stream"
        except httpx.HTTPError as err:
            out.error = err.__class__.__name__
        out.end = time.perf_counter()
        self._idle.append(client)
        return out


class WebSocketTarget:
    """A local container's bidirectional stream: one WebSocket per slot, one request at a time
    on each (the server answers a connection's requests in order)."""

    transport = "bidirectional"
    PATH = "/invocations-bidirectional-stream"

    def __init__(self, url: str, timeout_s: float = 65.0) -> None:
        self.http = HttpTarget(url)
        self.url = self.http.url
        self.ws_url = "ws" + self.url.removeprefix("http") + self.PATH
        self.name = f"local:{self.url}"
        self.timeout_s = timeout_s
        self._idle: list = []
        self._all: list = []

    def check(self) -> None:
        self.http.check()

    def fingerprint(self, instance_type: str | None = None, image_digest: str | None = None) -> Fingerprint:
        return self.http.fingerprint(instance_type, image_digest)

    async def open(self, concurrency: int) -> None:
        return None

    async def close(self) -> None:
        conns, self._all, self._idle = self._all, [], []
        for ws in conns:
            try:
                await ws.close()
            except Exception:  # closing a broken socket must not hide the measurement's result
                pass

    async def invoke(self, text: str) -> Outcome:
        import websockets

        start = time.perf_counter()
        out = Outcome(start=start, end=start)
        ws = self._idle.pop() if self._idle else None
        try:
            if ws is None:
                ws = await websockets.connect(self.ws_url, max_size=None, open_timeout=10)
                self._all.append(ws)
                start = out.start = time.perf_counter()  # the handshake is not part of a request
            await ws.send(json.dumps({"text": text}).encode())
            async with asyncio.timeout(self.timeout_s):
                while True:
                    msg = await ws.recv()
                    if isinstance(msg, bytes):
                        if out.ttfab_s is None:
                            out.first_at_mono = time.monotonic()
                            out.ttfab_s = time.perf_counter() - start
                            out.first_chunk = msg[:16]
                        out.nbytes += len(msg)
                        continue
                    obj = json.loads(msg)
                    if obj.get("type") == "done":
                        out.ok = out.ttfab_s is not None
                        out.error = None if out.ok else "empty_stream"
                        break
                    if obj.get("type") == "error" or "error" in obj:
                        code = str(obj.get("error") or obj.get("code") or "error")
                        out.rejected = code in REJECT_CODES
                        out.error = code
                        break
            self._idle.append(ws)
        except (OSError, TimeoutError, websockets.WebSocketException, ValueError) as err:
            out.error = err.__class__.__name__
            if ws is not None and ws in self._all:
                self._all.remove(ws)
        out.end = time.perf_counter()
        return out


def make_target(args: Any, session: Any = None) -> Target:
    """The target named by --url / --endpoint and --transport."""
    url, endpoint = getattr(args, "url", None), getattr(args, "endpoint", None)
    if bool(url) == bool(endpoint):
        raise UsageError("pass exactly one of --url (local container) or --endpoint (SageMaker)")
    transport = getattr(args, "transport", "stream")
    component = getattr(args, "inference_component", None)
    if url:
        if component:
            raise UsageError(f"--inference-component {component!r}: only with --endpoint (a local container is one copy already)")
        return WebSocketTarget(url) if transport == "bidirectional" else HttpTarget(url)
    if component and transport != "stream":
        raise UsageError(f"--inference-component with --transport {transport}: measure a component's copy with --transport stream")
    assert endpoint  # exactly one of --url and --endpoint, and not --url
    return SageMakerTarget(endpoint, session=session, transport=transport, inference_component=component)
