"""Where a copy goes: the resources a copy requests and the placement rule (docs/design.md §3.9).

A copy requests up to three resources, the ones an inference component declares in its
ComputeResourceRequirements: accelerator memory (``NumberOfAcceleratorDevicesRequired`` whole
devices x the device memory), CPU cores (``NumberOfCpuCoresRequired``) and host memory
(``MinMemoryRequiredInMb``). A copy fits an instance only if every resource it requests fits what
is free there. A resource a copy does not request (0) never stops it; a resource an instance does
not track (``math.inf``) is no limit there.

Placement is best-fit decreasing. Copies are placed largest first: by the largest share of any
one resource they take (need / the most of it any instance has free); one model's copies are all
one size, so the order matters only when the existing copies of several models are placed. Each
copy goes to the instance where, after it, the fewest copies of its size would still fit on its
*binding* resource, the one it leaves scarcest: ``min over the resources it requests of (free -
need) / need``. Ties go to the instance listed first, so a result is the same on every machine.
With accelerator memory as the only resource this is the instance with the least memory left,
the rule of the accelerator-only evaluation, so old fleet files give the same placements.

Pure: numbers in, numbers out (:mod:`speech.plan.capacity` evaluates a fleet with it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from speech.schema.units import EPS

MEMORY_EPS_MIB = 1e-6
"""Float slack when comparing what is free with what a copy needs (MiB, cores): a copy that fits
exactly fits."""

Resource = Literal["accelerator_memory_mib", "cpu_cores", "host_memory_mib"]
RESOURCES: Final[tuple[Resource, ...]] = ("accelerator_memory_mib", "cpu_cores", "host_memory_mib")
"""The resources a copy requests, in the order of :class:`Amounts` (and of tie-breaking)."""
RESOURCE_LABELS: Final[dict[str, tuple[str, str]]] = {
    "accelerator_memory_mib": ("MiB", "accelerator memory"),
    "cpu_cores": ("", "CPU cores"),
    "host_memory_mib": ("MiB", "host memory"),
}


class Amounts(NamedTuple):
    """One amount per resource: what a copy requests (0: not requested) or what an instance has
    free (``math.inf``: not tracked, no limit). Units in the names."""

    accelerator_memory_mib: float = 0.0
    cpu_cores: float = 0.0
    host_memory_mib: float = 0.0

    def minus(self, other: Amounts) -> Amounts:
        return Amounts(*(a - b for a, b in zip(self, other, strict=True)))


def as_amounts(x: Amounts | float) -> Amounts:
    """A bare number is accelerator memory in MiB (the fleet file's original single resource)."""
    return x if isinstance(x, Amounts) else Amounts(accelerator_memory_mib=float(x))


# --- the placement rule -----------------------------------------------------------------------


def fits(free: Amounts | float, need: Amounts | float) -> bool:
    """True when every resource the copy requests is free: need <= free (+ slack), resource by resource."""
    free, need = as_amounts(free), as_amounts(need)
    return all(n <= f + MEMORY_EPS_MIB for f, n in zip(free, need, strict=True) if n > 0)


def binding_resource(free: Amounts | float, need: Amounts | float) -> tuple[float, Resource]:
    """The copy's headroom after placement, in copies of its size, on the resource it leaves
    scarcest: ``min over requested r of (free_r - need_r) / need_r``, and that resource (the first
    in :data:`RESOURCES` on ties). ``math.inf`` when it requests only what is not tracked."""
    free, need = as_amounts(free), as_amounts(need)
    best: tuple[float, Resource] = (math.inf, RESOURCES[0])
    for r, f, n in zip(RESOURCES, free, need, strict=True):
        if n > 0 and (h := (f - n) / n) < best[0]:
            best = (h, r)
    return best


def best_fit(free: Sequence[Amounts | float], need: Amounts | float) -> int | None:
    """Index of the instance where the copy fits and leaves the least headroom on its binding
    resource (:func:`binding_resource`); the first listed on ties; None when it fits nowhere."""
    return _best_fit([as_amounts(f) for f in free], as_amounts(need))


def _best_fit(free: list[Amounts], need: Amounts) -> int | None:
    """:func:`best_fit` on :class:`Amounts`, :func:`fits` and :func:`binding_resource` inlined: it
    runs once per copy over every instance (the simulator's hot-load policy calls it per scale-out)."""
    req = [(k, n) for k, n in enumerate(need) if n > 0]
    tol = MEMORY_EPS_MIB / max(max(need), MEMORY_EPS_MIB)  # the slack, in copies of this size
    best: int | None = None
    best_h = math.inf
    for i, f in enumerate(free):
        h = math.inf
        for k, n in req:
            fk = f[k]
            if n > fk + MEMORY_EPS_MIB:
                break
            if (x := (fk - n) / n) < h:
                h = x
        else:
            if best is None or h < best_h - tol:
                best, best_h = i, h
    return best


def placement_order(free: Sequence[Amounts], sizes: Sequence[Amounts]) -> list[int]:
    """Largest first: by the largest share of any one resource an item takes (need / the most of
    that resource any instance has free; untracked resources do not count); input order on ties."""
    if len(set(sizes)) <= 1:
        return list(range(len(sizes)))  # one size (one model's copies): input order
    most = [max((f[k] for f in free if not math.isinf(f[k])), default=0.0) for k in range(len(RESOURCES))]

    def share(s: Amounts) -> float:
        return max((n / most[k] if most[k] > 0 else math.inf for k, n in enumerate(s) if n > 0), default=0.0)

    return sorted(range(len(sizes)), key=lambda k: -share(sizes[k]))


def place_best_fit_decreasing(
    free: Sequence[Amounts | float], sizes: Sequence[Amounts | float]
) -> tuple[list[int | None], list[Amounts]]:
    """Place items largest first (:func:`placement_order`), each by :func:`best_fit`. Returns each
    item's instance index (None: did not fit), in the order of ``sizes``, and what is left free per
    instance. Bare numbers are accelerator memory in MiB."""
    left = [as_amounts(f) for f in free]
    items = [as_amounts(s) for s in sizes]
    where: list[int | None] = [None] * len(items)
    for item in placement_order(left, items):
        i = _best_fit(left, items[item])
        if i is not None:
            left[i] = left[i].minus(items[item])
            where[item] = i
        # an item that fits nowhere now fits nowhere later either: free room only shrinks
    return where, left


def copies_that_fit(free: Amounts, need: Amounts, limit: int) -> int:
    """How many copies of ``need`` fit into ``free`` together: min over requested resources of
    floor((free + slack) / need), at most ``limit``."""
    n = min((math.floor((f + MEMORY_EPS_MIB) / q) for f, q in zip(free, need, strict=True) if q > 0 and not math.isinf(f)),
            default=limit)
    return max(0, min(limit, n))


def copies_per_new_instance(capacity: Amounts, need: Amounts) -> tuple[int, Resource]:
    """floor(capacity / need) on each resource the copy requests, the smallest of them, and the
    resource that sets it (the first in :data:`RESOURCES` on ties); 0: a copy does not fit at all."""
    best: tuple[float, Resource] = (math.inf, RESOURCES[0])
    for r, c, n in zip(RESOURCES, capacity, need, strict=True):
        if n > 0 and not math.isinf(c) and (k := math.floor(c / n + EPS)) < best[0]:
            best = (k, r)
    return (0 if math.isinf(best[0]) else int(best[0])), best[1]


def describe(a: Amounts) -> str:
    """``24576 MiB accelerator memory``, ``2 CPU cores + 2530 MiB host memory``: the requested part."""
    parts = []
    for r, v in zip(RESOURCES, a, strict=True):
        if v > 0 and not math.isinf(v):
            unit, label = RESOURCE_LABELS[r]
            parts.append(f"{v:g} {unit + ' ' if unit else ''}{label}")
    return " + ".join(parts) or "nothing"
