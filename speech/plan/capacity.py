"""Capacity evaluation: where an increase in concurrency goes, copies into the spare room of
running instances first, new instances for the rest (docs/design.md §3.9).

Pure: a typed fleet state in, a typed evaluation out; no I/O, no clock, no boto3. ``bench
capacity`` reads the fleet file and prints the result; the simulator's hot-load policy may call
:func:`evaluate_capacity` on its own fleet.

A copy requests up to three resources, the ones an inference component declares in its
ComputeResourceRequirements: accelerator memory (``NumberOfAcceleratorDevicesRequired`` whole
devices x the device memory), CPU cores (``NumberOfCpuCoresRequired``) and host memory
(``MinMemoryRequiredInMb``). A copy fits an instance only if every resource it requests fits what
is free there. A resource a copy does not request (0) never stops it; a resource an instance does
not track (``None`` in the fleet file) is no limit there.

Placement is best-fit decreasing. Copies are placed largest first: by the largest share of any
one resource they take (need / the most of it any instance has free); one model's copies are all
one size, so the order matters only when the existing copies of several models are placed. Each
copy goes to the instance where, after it, the fewest copies of its size would still fit on its
*binding* resource, the one it leaves scarcest: ``min over the resources it requests of (free -
need) / need``. Ties go to the instance listed first, so a result is the same on every machine.
With accelerator memory as the only resource this is the instance with the least memory left,
the rule of the accelerator-only evaluation, so old fleet files give the same placements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Final, Literal, NamedTuple

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from speech.schema.units import EPS
from speech.schema.plan_artifacts import Finding
from speech.schema.artifacts import Frozen, Level
from speech.schema.copy_plan import CopyPlan
from speech.errors import PlanInputError

FLEET_SCHEMA_VERSION: Final = 1
MEMORY_EPS_MIB = 1e-6
"""Float slack when comparing what is free with what a copy needs (MiB, cores): a copy that fits
exactly fits."""

Resource = Literal["accelerator_memory_mib", "cpu_cores", "host_memory_mib"]
RESOURCES: Final[tuple[Resource, ...]] = ("accelerator_memory_mib", "cpu_cores", "host_memory_mib")
"""The resources a copy requests, in the order of :class:`Amounts` (and of tie-breaking)."""
_LABEL: Final[dict[str, tuple[str, str]]] = {
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


def _finite_or_none(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else round(v, 3)


# --- the fleet file -----------------------------------------------------------------------------


class FleetInstance(Frozen):
    """One running instance and what is taken on it. An instance tracks the resources it has a
    figure for: accelerator memory (0 on a CPU instance), and optionally CPU cores and host memory
    (required where a model's copies request them)."""

    name: Annotated[str, Field(min_length=1)]
    """A label unique in the fleet (an instance id, or ``<variant>-<n>`` when the id is not known)."""
    instance_type: str
    variant: str | None = None
    """The production variant it belongs to; a model with a ``variant`` is placed only on its own
    variant's instances. None: any model may use it."""
    accelerator_memory_mib: NonNegativeFloat = 0.0
    """Total accelerator memory of the instance (all devices), MiB; 0 on a CPU instance."""
    used_accelerator_memory_mib: NonNegativeFloat = 0.0
    """Held by what already runs there (every model's copies), MiB."""
    cpu_cores: PositiveFloat | None = None
    """CPU cores copies may request (a SageMaker vCPU counts as one core); None: not tracked."""
    used_cpu_cores: NonNegativeFloat = 0.0
    """Cores requested by the copies already there."""
    host_memory_mib: PositiveFloat | None = None
    """Host memory copies may request, MiB; None: not tracked."""
    used_host_memory_mib: NonNegativeFloat = 0.0
    """Host memory requested by the copies already there, MiB."""
    copies: dict[str, Annotated[int, Field(ge=0)]] = {}
    """Copies per model on this instance (for the reader; the ``used_*`` fields are what count)."""

    @model_validator(mode="after")
    def _used_within_total(self) -> FleetInstance:
        if not (self.accelerator_memory_mib > 0 or self.cpu_cores is not None or self.host_memory_mib is not None):
            raise ValueError(
                f"instance {self.name!r} declares no capacity: set accelerator_memory_mib (GPU instances) and/or "
                "cpu_cores and host_memory_mib (the vCPUs and memory of its instance type)"
            )
        for used, total in (("used_accelerator_memory_mib", "accelerator_memory_mib"), ("used_cpu_cores", "cpu_cores"),
                            ("used_host_memory_mib", "host_memory_mib")):
            u, t = getattr(self, used), getattr(self, total)
            if t is None and u > 0:
                raise ValueError(f"instance {self.name!r}: {used} {u:g} is set but {total} is not; add {total}")
            if t is not None and u > t + MEMORY_EPS_MIB:
                raise ValueError(f"instance {self.name!r}: {used} {u:g} exceeds its {total} {t:g}")
        return self

    @property
    def free_mib(self) -> float:
        """Free accelerator memory, MiB."""
        return self.accelerator_memory_mib - self.used_accelerator_memory_mib

    @property
    def free(self) -> Amounts:
        """What is free per resource; ``math.inf`` for a resource not tracked."""
        return Amounts(
            self.free_mib,
            math.inf if self.cpu_cores is None else self.cpu_cores - self.used_cpu_cores,
            math.inf if self.host_memory_mib is None else self.host_memory_mib - self.used_host_memory_mib,
        )


class FleetModel(Frozen):
    """What the evaluation needs to know of one model hosted as copies: what one copy requests, how
    much it carries, how soon it serves, and the instance managed instance scaling adds for it."""

    copy_memory_mib: NonNegativeFloat = 0.0
    """Accelerator memory one copy reserves, MiB: whole devices x device memory on SageMaker (a
    copy takes whole devices there), or the measured footprint plus margin where copies share a
    device; 0 for a CPU-only copy."""
    copy_cpu_cores: PositiveFloat | None = None
    """CPU cores one copy requests (NumberOfCpuCoresRequired); None: not requested."""
    copy_host_memory_mib: PositiveFloat | None = None
    """Host memory one copy requests, MiB (MinMemoryRequiredInMb); None: not requested."""
    concurrency_per_copy: PositiveFloat
    """Requests in flight one copy carries at its scale-out target: the copy plan's C_scale_max."""
    t_copy_s: PositiveFloat
    """Planning T_copy: a copy added on a running instance serves after this long, seconds."""
    t_total_s: PositiveFloat
    """Planning T_total: a new instance (and the copies on it) serves after this long, seconds."""
    new_instance_type: str
    """The type managed instance scaling adds."""
    new_instance_accelerator_memory_mib: NonNegativeFloat = 0.0
    """Its total accelerator memory, MiB (0: a CPU instance)."""
    new_instance_cpu_cores: PositiveFloat | None = None
    """Its vCPUs; required when copies request cores."""
    new_instance_host_memory_mib: PositiveFloat | None = None
    """Its memory, MiB; required when copies request host memory."""
    variant: str | None = None
    """The production variant the model's component runs on: its copies go only onto instances of
    that variant. None: onto any instance of the fleet."""

    @model_validator(mode="after")
    def _requests_something(self) -> FleetModel:
        if self.copy_memory_mib <= 0 and self.copy_cpu_cores is None and self.copy_host_memory_mib is None:
            raise ValueError(
                "a copy must request a resource: set copy_memory_mib (accelerator memory, GPU copies) and/or "
                "copy_cpu_cores and copy_host_memory_mib (NumberOfCpuCoresRequired, MinMemoryRequiredInMb)"
            )
        for copy_field, new_field, what in (("copy_cpu_cores", "new_instance_cpu_cores", "the vCPUs"),
                                            ("copy_host_memory_mib", "new_instance_host_memory_mib", "the memory in MiB")):
            if getattr(self, copy_field) is not None and getattr(self, new_field) is None:
                raise ValueError(f"{copy_field} is set but {new_field} is not; add {new_field} ({what} of "
                                 f"{self.new_instance_type})")
        return self

    @property
    def request(self) -> Amounts:
        """What one copy requests, per resource (0: not requested)."""
        return Amounts(self.copy_memory_mib, self.copy_cpu_cores or 0.0, self.copy_host_memory_mib or 0.0)

    @property
    def new_instance(self) -> Amounts:
        """What a new instance has, per resource (``math.inf``: not tracked)."""
        return Amounts(
            self.new_instance_accelerator_memory_mib,
            math.inf if self.new_instance_cpu_cores is None else self.new_instance_cpu_cores,
            math.inf if self.new_instance_host_memory_mib is None else self.new_instance_host_memory_mib,
        )


class FleetState(Frozen):
    """A fleet file: the instances running now and the models hosted on them as copies."""

    schema_version: Literal[1] = FLEET_SCHEMA_VERSION
    kind: Literal["fleet"] = "fleet"
    source: str = "hand"
    """``hand`` or ``sagemaker:<endpoint>`` (``bench capacity --from-endpoint``)."""
    placement: Literal["observed", "inferred"] = "observed"
    """``inferred`` when the copies' instances were not observed but placed by this module's own
    best-fit (SageMaker does not say which instance holds which copy)."""
    instances: list[FleetInstance] = []
    models: Annotated[dict[str, FleetModel], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_names(self) -> FleetState:
        names = [i.name for i in self.instances]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"instance names must be unique; repeated: {', '.join(dupes)}")
        for name, m in self.models.items():
            for copy_field, inst_field in (("copy_cpu_cores", "cpu_cores"), ("copy_host_memory_mib", "host_memory_mib")):
                if getattr(m, copy_field) is None:
                    continue
                for inst in self.candidates(name):
                    if getattr(inst, inst_field) is None:
                        raise ValueError(
                            f"model {name!r} requests {copy_field} {getattr(m, copy_field):g} but instance {inst.name!r} "
                            f"has no {inst_field}: add {inst_field} to it (from its instance type), or drop {copy_field}"
                        )
        return self

    def candidates(self, model: str) -> list[FleetInstance]:
        """The instances ``model``'s copies may go to: its variant's, or all when it names none."""
        variant = self.models[model].variant
        return [i for i in self.instances if variant is None or i.variant == variant]


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
            unit, label = _LABEL[r]
            parts.append(f"{v:g} {unit + ' ' if unit else ''}{label}")
    return " + ".join(parts) or "nothing"


# --- the evaluation ---------------------------------------------------------------------------


class ResourceAmounts(Frozen):
    """Free room per resource, for the reader; None: not tracked on that instance."""

    accelerator_memory_mib: float | None = None
    cpu_cores: float | None = None
    host_memory_mib: float | None = None

    @classmethod
    def of(cls, a: Amounts) -> ResourceAmounts:
        return cls(accelerator_memory_mib=_finite_or_none(a[0]), cpu_cores=_finite_or_none(a[1]),
                   host_memory_mib=_finite_or_none(a[2]))


class PlacementStep(Frozen):
    """One copy placed: where, what was left there, and which resource bound the choice."""

    instance: str
    free_before_mib: float
    """Free accelerator memory before, MiB (0 on a CPU instance)."""
    free_after_mib: float
    free_before: ResourceAmounts
    free_after: ResourceAmounts
    binding: Resource
    """The resource the copy left scarcest there (the one best-fit compared)."""


class Placement(Frozen):
    """Copies placed on one instance in total."""

    instance: str
    copies: int
    free_before_mib: float
    """Free accelerator memory before, MiB."""
    free_after_mib: float
    free_before: ResourceAmounts
    free_after: ResourceAmounts


class ServingPart(Frozen):
    part: Literal["hot-load", "new-instances"]
    copies: int
    concurrency: float
    """Requests in flight these copies carry at the scale-out target."""
    serving_after_s: float
    """T_copy for copies on running instances, T_total for copies on new instances."""


class Fragmentation(Frozen):
    """Free room that would hold copies if it were on one instance, but is split."""

    free_total_mib: float
    """Free accelerator memory across the candidate instances after placement, MiB."""
    largest_free_mib: float
    """The most accelerator memory any one instance has free, MiB."""
    free_total: ResourceAmounts
    """Free room across the candidate instances, per resource the copy requests."""
    copies_if_contiguous: int
    """min over requested resources of floor(total free / request): what the split room would hold together."""


class CapacityEvaluation(Frozen):
    model: str
    delta_concurrency: float
    copy_memory_mib: float
    """Accelerator memory per copy, MiB (0: a CPU-only copy)."""
    copy_cpu_cores: float | None = None
    copy_host_memory_mib: float | None = None
    concurrency_per_copy: float
    copies_needed: int
    """ceil(delta / concurrency per copy)."""
    hot_loadable: int
    """Copies placed into spare room of running instances."""
    steps: list[PlacementStep]
    placements: list[Placement]
    copies_on_new_instances: int
    copies_per_new_instance: int
    """min over requested resources of floor(new instance's / copy's); 0: a copy fits no new instance either."""
    new_instance_limited_by: Resource
    """The resource that sets copies_per_new_instance."""
    new_instances: int
    """ceil(copies_on_new_instances / copies_per_new_instance); 0 when nothing is left."""
    unplaceable_copies: int
    """Copies that fit neither a running nor a new instance."""
    serving: list[ServingPart]
    fragmentation: Fragmentation | None
    placement_source: Literal["observed", "inferred"]
    findings: list[Finding]
    verdict: Level

    def finding(self, name: str) -> Finding:
        for f in self.findings:
            if f.name == name:
                return f
        raise KeyError(name)


def copies_for(delta_concurrency: float, concurrency_per_copy: float) -> int:
    """ceil(delta / concurrency per copy): copies that carry the increase at the scale-out target."""
    return max(0, math.ceil(delta_concurrency / concurrency_per_copy - EPS))


def fragmentation(free: Sequence[Amounts | float], copy: Amounts | float) -> Fragmentation | None:
    """When the free room together would hold a copy but no single instance's does: per resource
    the copy requests, the fleet's free room summed; copies it would hold = min over those of
    floor(total / request)."""
    left = [as_amounts(f) for f in free]
    need = as_amounts(copy)
    if any(fits(f, need) for f in left):
        return None
    total = Amounts(*(sum(f[k] for f in left) for k in range(len(RESOURCES))))
    together = min((math.floor(t / n + EPS) for t, n in zip(total, need, strict=True) if n > 0 and not math.isinf(t)),
                   default=0)
    if together < 1:
        return None
    requested = Amounts(*(t if n > 0 else math.inf for t, n in zip(total, need, strict=True)))
    return Fragmentation(
        free_total_mib=round(total.accelerator_memory_mib, 3),
        largest_free_mib=round(max((f.accelerator_memory_mib for f in left), default=0.0), 3),
        free_total=ResourceAmounts.of(requested),
        copies_if_contiguous=int(together),
    )


def evaluate_capacity(fleet: FleetState, model: str, delta_concurrency: float) -> CapacityEvaluation:
    """Where ``delta_concurrency`` more requests in flight of ``model`` go: copies into the spare
    room of its candidate instances (best-fit decreasing on every resource a copy requests), the
    rest on new instances, and when each part serves.

    Raises :class:`PlanInputError` for a model the fleet file does not describe or a delta that is
    not positive.
    """
    if model not in fleet.models:
        known = ", ".join(sorted(fleet.models)) or "none"
        raise PlanInputError(f"model {model!r} is not in the fleet file's models ({known}); add it under models or pick one of those")
    if not (delta_concurrency > 0 and math.isfinite(delta_concurrency)):
        raise PlanInputError(f"delta concurrency {delta_concurrency:g} must be a finite number > 0 (requests in flight to add)")
    m = fleet.models[model]
    copy = m.request
    need = copies_for(delta_concurrency, m.concurrency_per_copy)
    candidates = fleet.candidates(model)
    free0 = [i.free for i in candidates]
    # Copies of one size: no more than the copies each instance holds can be placed, so a huge
    # delta costs no more to place than the fleet holds; the rest goes to new instances by arithmetic.
    room = sum(copies_that_fit(f, copy, need) for f in free0)
    where, free = place_best_fit_decreasing(free0, [copy] * min(need, room))

    steps: list[PlacementStep] = []
    running = list(free0)
    for idx in where:
        if idx is None:
            continue
        before = running[idx]
        running[idx] = before.minus(copy)
        steps.append(PlacementStep(
            instance=candidates[idx].name,
            free_before_mib=round(before.accelerator_memory_mib, 3), free_after_mib=round(running[idx].accelerator_memory_mib, 3),
            free_before=ResourceAmounts.of(before), free_after=ResourceAmounts.of(running[idx]),
            binding=binding_resource(before, copy)[1],
        ))
    placements = [
        Placement(
            instance=inst.name,
            copies=sum(1 for w in where if w == i),
            free_before_mib=round(free0[i].accelerator_memory_mib, 3),
            free_after_mib=round(free[i].accelerator_memory_mib, 3),
            free_before=ResourceAmounts.of(free0[i]),
            free_after=ResourceAmounts.of(free[i]),
        )
        for i, inst in enumerate(candidates)
        if any(w == i for w in where)
    ]
    hot = len(steps)
    rest = need - hot
    per_new, limited_by = copies_per_new_instance(m.new_instance, copy)
    new_instances = math.ceil(rest / per_new) if rest and per_new else 0
    unplaceable = rest if per_new == 0 else 0
    on_new = rest - unplaceable
    frag = fragmentation(free, copy) if rest else None

    serving = []
    if hot:
        serving.append(ServingPart(part="hot-load", copies=hot, concurrency=hot * m.concurrency_per_copy, serving_after_s=m.t_copy_s))
    if on_new:
        serving.append(
            ServingPart(part="new-instances", copies=on_new, concurrency=on_new * m.concurrency_per_copy, serving_after_s=m.t_total_s)
        )

    findings = _findings(fleet, m, len(candidates), need, hot, on_new, new_instances, per_new, limited_by, unplaceable, frag)
    levels = {f.level for f in findings}
    return CapacityEvaluation(
        model=model,
        delta_concurrency=delta_concurrency,
        copy_memory_mib=m.copy_memory_mib,
        copy_cpu_cores=m.copy_cpu_cores,
        copy_host_memory_mib=m.copy_host_memory_mib,
        concurrency_per_copy=m.concurrency_per_copy,
        copies_needed=need,
        hot_loadable=hot,
        steps=steps,
        placements=placements,
        copies_on_new_instances=on_new,
        copies_per_new_instance=per_new,
        new_instance_limited_by=limited_by,
        new_instances=new_instances,
        unplaceable_copies=unplaceable,
        serving=serving,
        fragmentation=frag,
        placement_source=fleet.placement,
        findings=findings,
        verdict="stop" if "stop" in levels else "warn" if "warn" in levels else "ok",
    )


def _plural(n: int) -> str:
    return "y" if n == 1 else "ies"


def _findings(
    fleet: FleetState,
    m: FleetModel,
    n_candidates: int,
    need: int,
    hot: int,
    on_new: int,
    new_instances: int,
    per_new: int,
    limited_by: Resource,
    unplaceable: int,
    frag: Fragmentation | None,
) -> list[Finding]:
    out: list[Finding] = []
    copy = m.request
    what = describe(copy)
    if unplaceable:
        k = RESOURCES.index(limited_by)
        unit, label = _LABEL[limited_by]
        has = m.new_instance[k]
        out.append(
            Finding(
                name="copy_fits",
                level="stop",
                message=f"{unplaceable} cop{_plural(unplaceable)} of {what} fit no running instance and no new "
                f"{m.new_instance_type} (a copy requests {copy[k]:g}{' ' + unit if unit else ''} of {label}, it has "
                f"{has:g}): choose an instance type with more {label}, or a smaller copy",
            )
        )
    if hot == need:
        out.append(
            Finding(
                name="hot_load",
                level="ok",
                message=f"all {need} copies fit into spare capacity: serving after T_copy {m.t_copy_s:g} s, no new instance",
            )
        )
    elif on_new:
        out.append(
            Finding(
                name="hot_load",
                level="warn",
                message=f"{hot} of {need} copies fit into spare capacity (serving after {m.t_copy_s:g} s); the other {on_new} "
                f"need {new_instances} new {m.new_instance_type} instance{'s' if new_instances != 1 else ''} ({per_new} "
                f"copies each, limited by {_LABEL[limited_by][1]}), serving after T_total {m.t_total_s:g} s",
            )
        )
    if frag is not None:
        if copy.cpu_cores == 0 and copy.host_memory_mib == 0:
            message = (f"{frag.free_total_mib:g} MiB are free across the fleet, enough for {frag.copies_if_contiguous} "
                       f"cop{_plural(frag.copies_if_contiguous)} of {m.copy_memory_mib:g} MiB, but no instance has more "
                       f"than {frag.largest_free_mib:g} MiB free: the memory is split so that no copy fits")
        else:
            pooled = Amounts(*(v if v is not None else 0.0 for v in frag.free_total.model_dump().values()))
            message = (f"{describe(pooled)} are free across the fleet, enough for {frag.copies_if_contiguous} "
                       f"cop{_plural(frag.copies_if_contiguous)} of {what}, but no instance has all of a copy's request "
                       "free: the room is split so that no copy fits")
        out.append(Finding(name="fragmentation", level="warn", message=message))
    if fleet.placement == "inferred":
        out.append(
            Finding(
                name="placement_source",
                level="warn",
                message="which instance holds which copy was inferred (SageMaker does not report it); the real "
                "placement may leave the room split differently",
            )
        )
    if not n_candidates and need:
        where = f" of variant {m.variant}" if m.variant else ""
        out.append(Finding(name="fleet_empty", level="ok", message=f"no running instance{where}: every copy waits for a new one"))
    return out


def fleet_model(plan: CopyPlan, *, shared_devices: bool = False) -> FleetModel:
    """The fleet file's model entry from a copy plan: every resource a copy requests (its
    ComputeResourceRequirements) and the size of the plan's instance type. On SageMaker (the
    default) a GPU copy reserves whole devices: devices per copy x device memory;
    ``shared_devices`` uses the footprint plus margin instead (a fleet whose copies share a GPU).
    A CPU copy requests cores and host memory only. Needs the plan's T_total (a ttotal artifact)."""
    p = plan.packing
    if plan.t_total is None:
        raise PlanInputError(
            f"the copy plan of {plan.model!r} has no T_total (planned without a ttotal artifact); plan with --ttotal"
        )
    spec = p.instance
    if p.reserved_accelerator_memory_mib is None or p.accelerator_devices_per_copy is None:
        copy_mib = 0.0
    elif shared_devices:
        copy_mib = p.reserved_accelerator_memory_mib
    else:
        copy_mib = float(p.accelerator_devices_per_copy * spec.accelerator_memory_mib)
    return FleetModel(
        copy_memory_mib=copy_mib,
        copy_cpu_cores=p.reserved_cpu_cores,
        copy_host_memory_mib=float(p.reserved_host_memory_mib),
        concurrency_per_copy=plan.thresholds.c_scale_max,
        t_copy_s=plan.t_copy.planning_s,
        t_total_s=plan.t_total.planning_s,
        new_instance_type=spec.instance_type,
        new_instance_accelerator_memory_mib=spec.total_accelerator_memory_mib,
        new_instance_cpu_cores=float(spec.vcpus),
        new_instance_host_memory_mib=float(spec.memory_mib),
    )
