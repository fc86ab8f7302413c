"""bench tcopy: a second model copy's start time and footprint, on the real local container."""
from __future__ import annotations

from bench.targets import _local_fingerprint


def test_local_fingerprint_ignores_the_footprint():
    """/ping's footprint moves from ping to ping; the fingerprint names the build, not the moment."""
    base = {"status": "ok", "backend": "onnx", "weights_sha256": "sha256:" + "a" * 64}
    a = _local_fingerprint("local:x", {**base, "footprint": {"rss_bytes": 1}}, None, None)
    b = _local_fingerprint("local:x", {**base, "footprint": {"rss_bytes": 2}}, None, None)
    c = _local_fingerprint("local:x", {**base, "backend": "torch"}, None, None)
    assert a == b != c
