"""The Locust workers' request path (bench.load.gsocket.exchange, with ghttp's and eventstream's
body readers) on geventhttpclient, in process, against canned responses from a real socket server
on 127.0.0.1: every way a request can end is one Outcome, and a broken connection is not reused.
The end-to-end runs through Locust (test_locust_engine.py) only see healthy streams and the gate."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from bench.load.eventstream import error_code_of, model_stream_error, payload_part, read_events
from bench.load.ghttp import container_error, read_audio
from bench.load.gsocket import exchange


def _response(status: str, body: bytes, *, length: int | None = None, ctype: str = "application/octet-stream") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body) if length is None else length}"
            "\r\n\r\n").encode() + body


GATE = json.dumps({"error": "queue_saturated"}).encode()
SM_GATE = json.dumps({"ErrorCode": "ModelError", "OriginalStatusCode": 503,
                      "OriginalMessage": GATE.decode()}).encode()
CANNED = {
    "/audio": _response("200 OK", b"\x01" * 300),
    "/empty": _response("200 OK", b""),
    "/gate": _response("503 Service Unavailable", GATE, ctype="application/json"),
    "/cut": _response("200 OK", b"\x01" * 10, length=1000),  # then the server closes
    "/stall": _response("200 OK", b"\x01" * 10, length=1000),  # then the server waits, connection open
    "/events": _response("200 OK", payload_part(b"\x02" * 64) + payload_part(b"\x03" * 64)),
    "/events-error": _response("200 OK", payload_part(b"\x02" * 64) + model_stream_error("ModelStreamError", "boom")),
    "/events-garbage": _response("200 OK", b"\x00\x00\x00\x10" + b"\xff" * 60),
    "/sm-gate": _response("424 Failed Dependency", SM_GATE, ctype="application/json"),
}


class Canned:
    """Answers each request by its path from CANNED; keeps connections alive unless the answer is
    cut short. Counts connections, so reuse after a broken exchange would show."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next((int(ln.split(":")[1]) for ln in lines if ln.lower().startswith("content-length")), 0)
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                path = lines[0].split()[1]
                conn.sendall(CANNED[path])
                if path == "/cut":
                    return
                if path == "/stall":
                    conn.recv(65536)  # until the client closes it, or (wrongly) sends it another request
                    return


# A canned server listening on 127.0.0.1: not in the fast tier (make test-fast), which refuses a listen.
pytestmark = pytest.mark.slow


@pytest.fixture
def client() -> Iterator[tuple[object, Canned]]:
    from geventhttpclient import HTTPClient

    server = Canned()
    http = HTTPClient("127.0.0.1", port=server.port, concurrency=4, connection_timeout=5, network_timeout=0.5)
    yield http, server
    http.close()
    server.sock.close()


def _container(http, path: str):
    return exchange(http, path, b"{}", {"Content-Type": "application/json"}, container_error, read_audio)


def _sagemaker(http, path: str):
    return exchange(http, path, b"{}", {"Content-Type": "application/json"}, error_code_of, read_events)


def test_container_stream_outcomes(client):
    http, server = client
    ok = _container(http, "/audio")
    assert ok.ok and ok.error is None and ok.nbytes == 300 and 0 <= ok.ttfab_s <= ok.end - ok.start
    empty = _container(http, "/empty")
    assert not empty.ok and empty.error == "empty_stream" and empty.ttfab_s is None
    gate = _container(http, "/gate")
    assert gate.rejected and gate.error == "queue_saturated" and not gate.ok
    assert server.connections == 1  # answers read whole keep their connection
    cut = _container(http, "/cut")
    # The parser is fed the end of the socket inside the body and names it; the bytes before count.
    assert not cut.ok and cut.error == "HTTPParseError" and cut.nbytes == 10 and not cut.rejected
    assert _container(http, "/audio").ok and server.connections == 2
    stalled = _container(http, "/stall")
    # network_timeout (0.5 s) with the body short by 990 bytes: a TimeoutError, the bytes before counted
    assert not stalled.ok and stalled.error == "TimeoutError" and stalled.nbytes == 10
    after = _container(http, "/audio")  # the stalled socket is not reused
    assert after.ok and after.nbytes == 300 and server.connections == 3


def test_sagemaker_event_stream_outcomes(client):
    http, _ = client
    ok = _sagemaker(http, "/events")
    assert ok.ok and ok.nbytes == 128 and ok.ttfab_s is not None
    failed = _sagemaker(http, "/events-error")
    # audio arrived, then the model failed mid-stream: timed, but not a success
    assert not failed.ok and failed.error == "ModelStreamError" and failed.nbytes == 64 and failed.ttfab_s is not None
    garbage = _sagemaker(http, "/events-garbage")
    assert not garbage.ok and garbage.error.startswith("eventstream_") and garbage.nbytes == 0
    gate = _sagemaker(http, "/sm-gate")
    assert gate.rejected and gate.error == "queue_saturated"
    empty = _sagemaker(http, "/empty")
    assert not empty.ok and empty.error == "empty_stream"
