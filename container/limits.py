"""Input bounds checked before input costs memory or stack: body size while reading, JSON depth
before decoding."""
from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from .errors import BadRequest, InvalidJSON, PayloadTooLarge

# A JSON string (escapes included; an unterminated one runs to the end, so no position is scanned
# twice and hostile quoting stays linear) or one bracket. Brackets inside strings never count.
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def too_large(limit_bytes: int, seen: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"request body too large: {seen}; the limit is {limit_bytes} bytes "
                           f"(MAX_BODY_BYTES); send less text per request", extra={"limit_bytes": limit_bytes})


def check_content_length(header: str | None, limit_bytes: int) -> None:
    """Refuse a declared body over the limit before reading a byte of it."""
    if header is None:
        return
    try:
        declared = int(header)
    except ValueError:
        raise BadRequest(f"Content-Length {header[:40]!r} is not a number") from None
    if declared > limit_bytes:
        raise too_large(limit_bytes, f"Content-Length declares {declared} bytes")


async def read_limited(chunks: AsyncIterator[bytes], limit_bytes: int) -> bytes:
    """Collect a body, stopping as soon as it passes the limit (chunked bodies declare no size)."""
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        if len(buf) > limit_bytes:
            raise too_large(limit_bytes, f"{len(buf)} bytes arrived and the body is not done")
    return bytes(buf)


def json_depth_exceeds(text: str, max_depth: int) -> bool:
    """True once arrays/objects nest deeper than max_depth. Linear in the text, no recursion."""
    depth = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif c in "]}":
            depth -= 1
    return False


def loads_bounded(text: str, max_depth: int):
    """json.loads with a nesting limit, so deep input is a 400 instead of a RecursionError."""
    if json_depth_exceeds(text, max_depth):
        raise InvalidJSON(f"JSON nests deeper than {max_depth} levels (MAX_JSON_DEPTH)")
    try:
        return json.loads(text)
    except RecursionError:  # the scanner above should make this unreachable; stay a 400 regardless
        raise InvalidJSON(f"JSON nests too deeply (MAX_JSON_DEPTH={max_depth})") from None
    except ValueError as e:
        raise InvalidJSON(f"body is not valid JSON: {e}") from None
