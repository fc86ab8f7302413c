"""Domain errors; each carries the HTTP status and the stable error code clients see."""
from __future__ import annotations


class ContainerError(Exception):
    status: int = 500
    code: str = "internal_error"

    def __init__(self, detail: str = "", *, extra: dict | None = None):
        super().__init__(detail or self.code)
        self.detail = detail
        self.extra = extra or {}

    def body(self) -> dict:
        out = {"error": self.code}
        if self.detail:
            out["detail"] = self.detail
        out.update(self.extra)
        return out


class BadRequest(ContainerError):
    status, code = 400, "bad_request"


class EmptyText(BadRequest):
    code = "empty_text"


class UnknownVoice(BadRequest):
    code = "unknown_voice"


class InvalidJSON(BadRequest):
    code = "invalid_json"


class TextTooLong(ContainerError):
    status, code = 413, "text_too_long"


class UnsupportedMediaType(ContainerError):
    status, code = 415, "unsupported_media_type"


class QueueSaturated(ContainerError):
    status, code = 503, "queue_saturated"


class ShedDeadline(ContainerError):
    status, code = 503, "shed_deadline"


class Draining(ContainerError):
    status, code = 503, "draining"


class ModelUnavailable(ContainerError):
    status, code = 503, "model_unavailable"


class ModelLoadError(ContainerError):
    """Raised while loading; the server stays up with /ping 503 instead of crash-looping."""

    status, code = 503, "model_unavailable"
