"""Model backends behind one interface; heavy frameworks are imported only by the one selected."""
from __future__ import annotations

from .base import Backend, Prepared

__all__ = ["Backend", "Prepared", "create_backend"]


def create_backend(settings) -> Backend:
    if settings.backend == "onnx":
        from .onnx import OnnxBackend
        return OnnxBackend(settings)
    if settings.backend == "torch":
        from .torch_backend import TorchBackend
        return TorchBackend(settings)
    if settings.backend == "sine":
        from .sine import SineBackend
        return SineBackend(settings)
    raise ValueError(f"unknown backend {settings.backend!r}")
