"""Capacity evaluation: where an increase in concurrency goes, copies into the spare room of
running instances first, new instances for the rest (docs/design.md §3.9).

Pure: a typed fleet state in, a typed evaluation out; no I/O, no clock, no boto3. ``bench
capacity`` reads the fleet file and prints the result; the simulator's hot-load policy may call
:func:`evaluate_capacity` on its own fleet.

The fleet file's types are in :mod:`speech.plan.fleet`, the resources a copy requests and the
placement rule (best-fit decreasing on the binding resource) in :mod:`speech.plan.placement`; this
module puts them together for one model and an increase in concurrency, and judges the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from speech.errors import PlanInputError
from speech.plan.fleet import FleetModel, FleetState
from speech.plan.placement import (
    RESOURCE_LABELS,
    RESOURCES,
    Amounts,
    Resource,
    as_amounts,
    binding_resource,
    copies_per_new_instance,
    copies_that_fit,
    describe,
    fits,
    place_best_fit_decreasing,
)
from speech.schema.artifacts import Frozen, Level
from speech.schema.copy_plan import CopyPlan
from speech.schema.plan_artifacts import Finding
from speech.schema.units import EPS


def _finite_or_none(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else round(v, 3)


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
        unit, label = RESOURCE_LABELS[limited_by]
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
                f"copies each, limited by {RESOURCE_LABELS[limited_by][1]}), serving after T_total {m.t_total_s:g} s",
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
