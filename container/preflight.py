"""Checks `serve` runs before anything starts: a MODEL_DIR that lacks what its backend reads is a
deployment mistake no retry fixes, so the process refuses to start with one clear message and a
non-zero exit (SageMaker then fails the endpoint with that line in the log) instead of serving
/ping 503 forever. Files that exist but cannot be loaded are found while loading: /ping 503."""
from __future__ import annotations

from .settings import Settings


def model_dir_problem(settings: Settings) -> str | None:
    """One sentence naming the missing file and the fix, or None when the layout is complete."""
    if settings.backend == "onnx":
        from .backends.onnx import missing_files
        return missing_files(settings.model_dir)
    if settings.backend == "torch":
        from .backends.torch_model import missing_files
        return missing_files(settings.model_dir)
    return None  # sine: no files
