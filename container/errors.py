"""Domain errors; each carries the HTTP status and the stable error code clients see."""
from __future__ import annotations


class ContainerError(Exception):
    status: int = 500
    code: str = "internal_error"

    def __init__(self, detail: str = "", *, extra: dict | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(detail or self.code)
        self.detail = detail
        self.extra = extra or {}
        self.param = param  # the request field at fault, for OpenAI's error shape
        self.headers = headers or {}

    def body(self) -> dict:
        out = {"error": self.code}
        if self.detail:
            out["detail"] = self.detail
        out.update(self.extra)
        return out

    def openai_body(self) -> dict:
        """OpenAI's error shape, so its clients raise their usual exception for the status."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.detail or self.code, "type": kind,
                          "param": self.param, "code": self.code}}


class BadRequest(ContainerError):
    status, code = 400, "bad_request"


class EmptyText(BadRequest):
    code = "empty_text"


class UnknownVoice(BadRequest):
    code = "unknown_voice"


class InvalidJSON(BadRequest):
    code = "invalid_json"


class ClientGone(BadRequest):
    """The client closed the connection before its body was complete: nobody reads the answer,
    so it is a plain 4xx (logged at info), not an unhandled error with a traceback."""

    code = "client_disconnected"


class NotFound(ContainerError):
    status, code = 404, "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class MethodNotAllowed(ContainerError):
    status, code = 405, "method_not_allowed"


class PayloadTooLarge(ContainerError):
    status, code = 413, "payload_too_large"


class TextTooLong(ContainerError):
    status, code = 413, "text_too_long"


class NotAcceptable(ContainerError):
    status, code = 406, "not_acceptable"


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
