"""Numeric bounds of the fields a team sets, each stated once: the pydantic models declare their
fields with them (``Field(**SLO_SHARE.field())``), and whoever else must know a bound (a bench
flag's range, the tuner's candidates) reads the same object instead of restating it.

Why a table here rather than reading the models' metadata everywhere: building the models costs
0.2-0.45 s of imports on this machine (measured with ``python -X importtime -m bench plan
--help``), which a command's ``--help`` must not pay (its target is 0.5 s in all); this module
imports nothing but the standard library. :func:`field_bound` reads a model's metadata back, so a
test holds every model field equal to its bound here.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from speech.schema.units import MAX_SURGE_RATIO


@dataclass(frozen=True)
class FieldBound:
    """The interval a field's numbers must lie in; ``None`` for a side left open."""

    lo: float | None
    hi: float | None
    lo_open: bool = False
    """``lo`` itself is refused (pydantic's ``gt``; else ``ge``)."""
    hi_open: bool = False
    """``hi`` itself is refused (pydantic's ``lt``; else ``le``)."""

    def holds(self, x: float) -> bool:
        """``x`` is finite and inside the interval."""
        if not math.isfinite(x):
            return False
        if self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo):
            return False
        return not (self.hi is not None and (x >= self.hi if self.hi_open else x > self.hi))

    def text(self, var: str = "X") -> str:
        """``0.5 <= X < 1``, ``X > 0``: the bound as a fix message states it."""
        lo = "" if self.lo is None else f"{self.lo:g} {'<' if self.lo_open else '<='} "
        hi = "" if self.hi is None else f" {'<' if self.hi_open else '<='} {self.hi:g}"
        if self.hi is None and self.lo is not None:
            return f"{var} {'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{lo}{var}{hi}"

    def field(self) -> dict[str, float]:
        """The bound as pydantic ``Field`` keyword arguments (``gt``/``ge``, ``lt``/``le``)."""
        out: dict[str, float] = {}
        if self.lo is not None:
            out["gt" if self.lo_open else "ge"] = self.lo
        if self.hi is not None:
            out["lt" if self.hi_open else "le"] = self.hi
        return out


# --- plan inputs (speech.schema.plan_inputs.PlanInputs) ----------------------------------------

SLO_MS = FieldBound(0.0, None, lo_open=True)
"""p95 TTFAB objective, milliseconds."""
SURGE_RATIO = FieldBound(1.0, MAX_SURGE_RATIO, hi_open=True)
"""Traffic growth absorbed within one scale-out (:data:`speech.schema.units.MAX_SURGE_RATIO`)."""
RATE_RPS = FieldBound(0.0, None, lo_open=True)
"""Peak and trough request rates, requests per second."""
MIN_INSTANCES = FieldBound(1, None)
"""A real-time variant's floor: at least one instance."""
QMAX_DERATE = FieldBound(0.0, 1.0, lo_open=True)
"""Share of the measured Q_max planned with; 1.0 = as measured."""
MAX_DELAY_S = FieldBound(0.0, None, lo_open=True)
"""A batch request's acceptable completion delay, seconds."""
SLO_SHARE = FieldBound(0.5, 1.0, hi_open=True)
"""Share of requests within the SLO the fleet is sized for: at least half, never all."""
TARGET_SHARE = FieldBound(0.0, 1.0, lo_open=True, hi_open=True)
"""Scale-out target as a share of Q_max (the plan then holds it to at most 1 - h)."""
SURGE_AVERAGE_SHARE = FieldBound(0.0, 1.0, lo_open=True, hi_open=True)
"""The surge alarm's threshold on the Average of ConcurrentRequestsPerModel, as a share of Q_max."""
SCALE_IN_STEP_SHARE = FieldBound(0.0, 1.0, lo_open=True, hi_open=True)
"""Share of the fleet one scale-in removes (the plan then holds it to 1 - C_scale_min / C_scale_max)."""
SCALE_IN_WINDOW_S = FieldBound(30, 86_400)
"""How long the fleet must stay below the scale-in threshold, seconds."""
SCALE_IN_COOLDOWN_S = FieldBound(0, 86_400)
"""Seconds between scale-in steps (the plan then checks it against the window and T_total)."""
SCALE_OUT_COOLDOWN_S = FieldBound(0, 3_600)
"""Seconds between scale-out steps (the plan then checks it against the metric period and T_total)."""

# --- stack config (speech.schema.config) --------------------------------------------------------

MAX_INSTANCES = FieldBound(1, None)
"""A model's instance cap."""
MIN_COPIES = FieldBound(0, None)
"""A component's copy floor; 0 scales to zero copies."""
FOOTPRINT_MARGIN = FieldBound(0.0, 1.0, hi_open=True)
"""Share added to a copy's measured memory footprint."""


def _constraints(info: Any) -> list[Any]:
    from pydantic.fields import FieldInfo  # only a reader of models needs pydantic

    found = list(info.metadata)
    annotation = info.annotation
    if get_origin(annotation) in (typing.Union, types.UnionType):
        # ``Annotated[float, Field(gt=0)] | None``: the constraints sit on the union's member.
        for member in get_args(annotation):
            if get_origin(member) is Annotated:
                for extra in member.__metadata__:
                    found.extend(extra.metadata if isinstance(extra, FieldInfo) else [extra])
    return found


def field_bound(model: Any, name: str) -> FieldBound:
    """The bound a pydantic model validates ``name`` against, read from the field's metadata
    (``KeyError`` for a field the model lacks)."""
    from annotated_types import Ge, Gt, Le, Lt

    lo: float | None = None
    hi: float | None = None
    lo_open = hi_open = False
    for c in _constraints(model.model_fields[name]):
        if isinstance(c, Ge):
            lo, lo_open = c.ge, False  # type: ignore[assignment]
        elif isinstance(c, Gt):
            lo, lo_open = c.gt, True  # type: ignore[assignment]
        elif isinstance(c, Le):
            hi, hi_open = c.le, False  # type: ignore[assignment]
        elif isinstance(c, Lt):
            hi, hi_open = c.lt, True  # type: ignore[assignment]
    return FieldBound(lo, hi, lo_open, hi_open)
