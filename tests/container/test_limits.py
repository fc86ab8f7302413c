"""JSON depth and body-size limits (container/limits.py)."""
import asyncio

import pytest

from container.errors import BadRequest, InvalidJSON, PayloadTooLarge
from container.limits import check_content_length, json_depth_exceeds, loads_bounded, read_limited


def test_json_depth():
    assert not json_depth_exceeds('{"a": [1, {"b": "[[[[[[[["}]}', 3)
    assert json_depth_exceeds("[" * 4, 3)
    assert not json_depth_exceeds('"\\"[[[[[["', 1)  # escaped quote keeps the string open
    with pytest.raises(InvalidJSON, match="MAX_JSON_DEPTH"):
        loads_bounded("[" * 10000 + "]" * 10000, 32)
    with pytest.raises(InvalidJSON):
        loads_bounded('{"a": ', 32)
    assert loads_bounded('{"a": [[1]]}', 3) == {"a": [[1]]}


def test_body_limits():
    check_content_length("100", 100)
    check_content_length(None, 100)
    with pytest.raises(PayloadTooLarge, match="100 bytes"):
        check_content_length("101", 100)
    with pytest.raises(BadRequest):
        check_content_length("ten", 100)

    seen = []

    async def chunks():
        for _ in range(1000):
            seen.append(1)
            yield b"x" * 40

    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_limited(chunks(), 100))
    assert len(seen) == 3  # stopped reading at the chunk that passed the limit
