"""Measurement CLI: ``python -m bench plan|qmax|ttotal|drift|validate|thaw``."""

from importlib.metadata import PackageNotFoundError, version


def tool_version() -> str:
    """The version a measurement records as ``provenance.tool_version`` (the package's)."""
    try:
        return version("speech-endpoints")
    except PackageNotFoundError:  # a source checkout run without `make setup`
        return "0+unknown"


def target_region(target: object) -> str | None:
    """AWS region of a SageMaker target's session; None for a local target."""
    session = getattr(target, "session", None) if str(getattr(target, "name", "")).startswith("sagemaker:") else None
    return getattr(session, "region_name", None) if session is not None else None
