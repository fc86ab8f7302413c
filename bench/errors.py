"""Errors of the bench package."""

from speech.errors import SpeechError


class BenchError(SpeechError):
    """A user-facing failure of a bench command: the message names the value, the limit and the fix.

    Subclasses :class:`speech.errors.SpeechError`, so the CLI catches one base class for both.
    """


class UsageError(BenchError):
    """Bad flags or flag values (exit 2)."""


class TargetError(BenchError):
    """The endpoint or URL to measure cannot be reached or does not exist (exit 2)."""


class AwsSetupError(BenchError):
    """No AWS region or no credentials: one line, exit 2, before any AWS call."""


class WorkerError(BenchError):
    """A worker process of a parallel run (``--jobs``) died, e.g. killed for memory (exit 1; nothing
    written)."""

    exit_code = 1


class CopyNotReady(TargetError):
    """A started copy exited or never answered /ping 200, or an inference component never reached
    InService with the added copy (exit 1: the measurement failed, not the input)."""

    exit_code = 1
