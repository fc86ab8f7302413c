"""Errors of the speech core. Every message names the value, the limit and the next step."""


class SpeechError(Exception):
    """Base class for every error the speech package raises on purpose.

    Edges (CLI, Pulumi program, policy pack) catch this class only and print ``Name: message``;
    anything else is a bug and keeps its traceback.
    """


class ArtifactError(SpeechError):
    """An artifact file is missing, unreadable or does not match its schema."""


class PlanInputError(SpeechError):
    """A chosen plan input (SLO, surge ratio, traffic, floor) is out of range."""


class FingerprintMismatch(PlanInputError):
    """Artifacts describe different endpoints (instance type or image digest)."""


class ConfigError(SpeechError):
    """Stack configuration is invalid; the message names the config key."""
