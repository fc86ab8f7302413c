"""What every target sends and reads back: the request body and the error code in a refusal's JSON
body."""

from __future__ import annotations

import json
from typing import Any


def payload(text: str) -> dict[str, Any]:
    # No voice: the server picks its default, so the ladder works with any voice set.
    return {"text": text, "speed": 1.0, "response_format": "pcm", "stream": True}


def error_code(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return ""
