"""The copy artifact (``bench tcopy``): one inference-component copy's measured start-ups and memory
footprint, with the figures the copy plan reads. Pure pydantic."""

from __future__ import annotations

import math
import statistics
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    PositiveFloat,
    model_validator,
)

from speech.schema.base import (
    Fingerprint,
    Frozen,
    Provenance,
    evidence_error,
    missing_evidence,
)
from speech.schema.units import EPS

COPY_SCHEMA_VERSION: Final = 1
Device = Literal["cpu", "cuda"]
TcopyStatistic = Literal["max", "p95"]
TCOPY_TOLERANCE_S = 0.0015
"""Rounding slack when a copy artifact's summary figures are checked against its starts."""


def nearest_rank(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the ceil(fraction x n)-th smallest value (p95 of fewer than 20
    samples is their maximum: no interpolation invents a start that never happened)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered) - EPS)) - 1]


class CopyFootprint(Frozen):
    """What one copy of the model holds while serving: the figures copies are packed by."""

    device: Device
    """Where the copy runs: ``cuda`` (an NVIDIA GPU) or ``cpu``."""
    accelerator_memory_mib: PositiveFloat | None = None
    """Peak accelerator memory the copy's process held (weights, activations, allocator cache),
    MiB; required on ``cuda``, absent on ``cpu``."""
    accelerator_memory_source: str | None = None
    """How it was read, e.g. ``torch.cuda.max_memory_reserved`` or ``nvml process used memory``."""
    accelerator_name: str | None = None
    """The device it was measured on, e.g. ``NVIDIA A10G``."""
    accelerator_memory_total_mib: PositiveFloat | None = None
    """That device's total memory as the driver reports it, MiB."""
    host_memory_mib: PositiveFloat
    """Peak resident set size (RSS) of the copy's process, MiB: what the copy needs of the
    instance's host memory (on ``cpu`` this is also what copies are packed by)."""
    cpu_cores: PositiveFloat | None = None
    """CPU cores the copy kept busy at its Q_max (process CPU time / wall time); None when not measured."""

    @model_validator(mode="after")
    def _device_fields(self) -> CopyFootprint:
        if self.device == "cuda" and self.accelerator_memory_mib is None:
            raise ValueError("a cuda copy needs accelerator_memory_mib (its peak accelerator memory, MiB)")
        if self.device == "cpu" and (self.accelerator_memory_mib is not None or self.accelerator_memory_total_mib is not None):
            raise ValueError("a cpu copy has no accelerator memory; remove accelerator_memory_mib / _total_mib")
        if (
            self.accelerator_memory_mib is not None
            and self.accelerator_memory_total_mib is not None
            and self.accelerator_memory_mib > self.accelerator_memory_total_mib
        ):
            raise ValueError(
                f"accelerator_memory_mib {self.accelerator_memory_mib} exceeds the device's total "
                f"{self.accelerator_memory_total_mib} MiB"
            )
        return self

    @property
    def packing_memory_mib(self) -> float:
        """The memory copies are packed by, MiB: accelerator memory on ``cuda``, RSS on ``cpu``."""
        return self.accelerator_memory_mib if self.accelerator_memory_mib is not None else self.host_memory_mib


class CopyStart(Frozen):
    """One measured start of a copy on an instance that is already running: offsets, seconds,
    from the moment the copy was asked to start (process spawned or load requested). No instance
    provisioning and no image pull are in it; that is the point of a copy."""

    started_at: datetime | None = None
    """When the start was requested (UTC); required for a measured artifact."""
    framework_init_s: NonNegativeFloat | None = None
    """Offset of the ``framework_init`` stage marker (interpreter and framework imported)."""
    weights_ready_s: NonNegativeFloat
    """Offset of ``weights_ready``: the weights are on the device."""
    ready_s: PositiveFloat
    """Offset of ``ready`` (warm-up done, ``/ping`` 200): this start's T_copy sample."""
    source: str = "stage markers"
    """What observed the offsets (stage markers on stdout, ``/ping`` polling)."""

    @model_validator(mode="after")
    def _ordered(self) -> CopyStart:
        if self.framework_init_s is not None and self.framework_init_s > self.weights_ready_s:
            raise ValueError(f"framework_init_s {self.framework_init_s} is after weights_ready_s {self.weights_ready_s}")
        if self.weights_ready_s > self.ready_s:
            raise ValueError(f"weights_ready_s {self.weights_ready_s} is after ready_s {self.ready_s}")
        return self

    @property
    def weights_load_s(self) -> float:
        """weights_ready - framework_init (- 0 when framework_init was not seen), seconds."""
        return self.weights_ready_s - (self.framework_init_s or 0.0)

    @property
    def warmup_s(self) -> float:
        """ready - weights_ready, seconds."""
        return self.ready_s - self.weights_ready_s


class CopyArtifact(Frozen):
    """Result of ``bench tcopy``: one copy's footprint and how long a new copy takes to serve.

    Q_max per copy is not here: it is an ordinary :class:`QmaxArtifact` whose ladder ran against
    one copy. ``t_copy_s`` is the planning figure, the statistic named by ``planning_statistic``
    over ``starts`` (``max`` by default; ``p95`` by nearest rank, which equals the max below 20
    starts)."""

    schema_version: Literal[1] = COPY_SCHEMA_VERSION
    kind: Literal["copy"] = "copy"
    model: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    fingerprint: Fingerprint
    footprint: CopyFootprint
    starts: Annotated[list[CopyStart], Field(min_length=1)]
    t_copy_p50_s: PositiveFloat
    """Median of the starts' ``ready_s``, seconds."""
    t_copy_p95_s: PositiveFloat
    """Nearest-rank p95 of the starts' ``ready_s``, seconds."""
    t_copy_max_s: PositiveFloat
    """Slowest start, seconds."""
    planning_statistic: TcopyStatistic = "max"
    """Which statistic ``t_copy_s`` is."""
    t_copy_s: PositiveFloat
    """T_copy to plan with: weights load + warm-up (+ process start), no instance provisioning, seconds."""
    provenance: Provenance

    @model_validator(mode="after")
    def _summary_matches_starts(self) -> CopyArtifact:
        samples = [s.ready_s for s in self.starts]
        expected = {
            "t_copy_p50_s": statistics.median(samples),
            "t_copy_p95_s": nearest_rank(samples, 0.95),
            "t_copy_max_s": max(samples),
        }
        for name, value in expected.items():
            if abs(getattr(self, name) - value) > TCOPY_TOLERANCE_S:
                raise ValueError(f"{name} {getattr(self, name)} does not match the starts ({value:.3f} s)")
        chosen = expected[f"t_copy_{self.planning_statistic}_s"]
        if abs(self.t_copy_s - chosen) > TCOPY_TOLERANCE_S:
            raise ValueError(
                f"t_copy_s {self.t_copy_s} is not the starts' {self.planning_statistic} ({chosen:.3f} s)"
            )
        if self.provenance.origin == "measured":
            missing = missing_evidence("copy", self.provenance, self.fingerprint)
            undated = [i for i, s in enumerate(self.starts) if s.started_at is None]
            if undated:
                missing.append(f"starts[].started_at (starts {undated})")
            if missing:
                raise evidence_error("copy", missing)
        return self

    @classmethod
    def summarize(cls, starts: list[CopyStart], statistic: TcopyStatistic = "max") -> dict[str, float]:
        """The summary fields for ``starts`` (what ``bench tcopy`` stores next to them), seconds, rounded to ms."""
        samples = [s.ready_s for s in starts]
        figures = {
            "t_copy_p50_s": round(statistics.median(samples), 3),
            "t_copy_p95_s": round(nearest_rank(samples, 0.95), 3),
            "t_copy_max_s": round(max(samples), 3),
        }
        return {**figures, "t_copy_s": figures[f"t_copy_{statistic}_s"]}


def copy_filename(a: CopyArtifact) -> str:
    return f"copy-{a.model}-{a.fingerprint.slug}.json"
