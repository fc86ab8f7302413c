"""What the steps of a rehearsal share (:mod:`speech.infra.rehearse`): the previewed resources one
rehearsal needs, each step's check, and the rehearsal's record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Check:
    step: str
    ok: bool
    detail: str
    seconds: float = 0.0


@dataclass
class Rehearsal:
    stack: str
    model: str
    checks: list[Check] = field(default_factory=list)
    model_dir: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)


@dataclass(frozen=True)
class Plan:
    """The previewed resources one rehearsal needs."""

    model: str
    buildspec: dict[str, Any]
    environment: dict[str, str]
    startup_timeout_s: int
    archive: bytes = b""
    """The CodeBuild source archive's bytes, as the preview uploads them."""
    archive_sha256: str = ""
    """The sha256 the uploaded object's metadata records."""
