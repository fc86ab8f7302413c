"""Capacity evaluation: where an increase in concurrency goes, copies into spare accelerator
memory first, new instances for the rest (docs/design.md §3.9).

Pure: a typed fleet state in, a typed evaluation out; no I/O, no clock, no boto3. ``bench
capacity`` reads the fleet file and prints the result; the simulator's hot-load policy may call
:func:`evaluate_capacity` on its own fleet.

Placement is best-fit decreasing by accelerator memory: copies are placed largest first (one
model's copies are all one size, so the order is moot today) and each goes to the instance where
the least memory would be left after it. Ties go to the instance listed first, so a result is the
same on every machine.
"""

from __future__ import annotations

import math
from typing import Annotated, Final, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from speech.schema.units import EPS
from speech.schema.plan_artifacts import Finding
from speech.schema.artifacts import Frozen, Level
from speech.schema.copy_plan import CopyPlan
from speech.errors import PlanInputError

FLEET_SCHEMA_VERSION: Final = 1
MEMORY_EPS_MIB = 1e-6
"""Float slack when comparing memory (MiB): a copy that fits exactly fits."""


# --- the fleet file -----------------------------------------------------------------------------


class FleetInstance(Frozen):
    """One running instance."""

    name: Annotated[str, Field(min_length=1)]
    """A label unique in the fleet (an instance id, or ``<type>-<n>`` when the id is not known)."""
    instance_type: str
    accelerator_memory_mib: PositiveFloat
    """Total accelerator memory of the instance (all devices), MiB."""
    used_accelerator_memory_mib: NonNegativeFloat = 0.0
    """Held by what already runs there (every model's copies), MiB."""
    copies: dict[str, Annotated[int, Field(ge=0)]] = {}
    """Copies per model on this instance (for the reader; ``used_accelerator_memory_mib`` is what counts)."""

    @model_validator(mode="after")
    def _used_within_total(self) -> FleetInstance:
        if self.used_accelerator_memory_mib > self.accelerator_memory_mib + MEMORY_EPS_MIB:
            raise ValueError(
                f"instance {self.name!r}: used_accelerator_memory_mib {self.used_accelerator_memory_mib:g} exceeds its "
                f"accelerator_memory_mib {self.accelerator_memory_mib:g}"
            )
        return self

    @property
    def free_mib(self) -> float:
        return self.accelerator_memory_mib - self.used_accelerator_memory_mib


class FleetModel(Frozen):
    """What the evaluation needs to know of one model hosted as copies."""

    copy_memory_mib: PositiveFloat
    """Accelerator memory one copy reserves, MiB: the measured footprint plus margin where copies
    share a device; whole devices x device memory on SageMaker (a copy takes whole devices there)."""
    concurrency_per_copy: PositiveFloat
    """Requests in flight one copy carries at its scale-out target: the copy plan's C_scale_max."""
    t_copy_s: PositiveFloat
    """Planning T_copy: a copy added on a running instance serves after this long, seconds."""
    t_total_s: PositiveFloat
    """Planning T_total: a new instance (and the copies on it) serves after this long, seconds."""
    new_instance_type: str
    """The type managed instance scaling adds."""
    new_instance_accelerator_memory_mib: PositiveFloat
    """Its total accelerator memory, MiB."""


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
        return self


# --- the evaluation ---------------------------------------------------------------------------


class PlacementStep(Frozen):
    """One copy placed: where, and what was left there."""

    instance: str
    free_before_mib: float
    free_after_mib: float


class Placement(Frozen):
    """Copies placed on one instance in total."""

    instance: str
    copies: int
    free_before_mib: float
    free_after_mib: float


class ServingPart(Frozen):
    part: Literal["hot-load", "new-instances"]
    copies: int
    concurrency: float
    """Requests in flight these copies carry at the scale-out target."""
    serving_after_s: float
    """T_copy for copies in spare memory, T_total for copies on new instances."""


class Fragmentation(Frozen):
    """Free memory that would hold copies if it were on one instance, but is split."""

    free_total_mib: float
    """Free accelerator memory across the fleet after placement, MiB."""
    largest_free_mib: float
    """The most any one instance has free, MiB: less than a copy."""
    copies_if_contiguous: int
    """floor(free_total / copy memory): what the split memory would hold together."""


class CapacityEvaluation(Frozen):
    model: str
    delta_concurrency: float
    copy_memory_mib: float
    concurrency_per_copy: float
    copies_needed: int
    """ceil(delta / concurrency per copy)."""
    hot_loadable: int
    """Copies placed into spare memory of running instances."""
    steps: list[PlacementStep]
    placements: list[Placement]
    copies_on_new_instances: int
    copies_per_new_instance: int
    """floor(new instance memory / copy memory); 0: a copy fits no new instance either."""
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


def best_fit(free_mib: list[float], need_mib: float) -> int | None:
    """Index of the instance where ``need_mib`` leaves the least memory (first on ties); None when
    it fits nowhere."""
    best: int | None = None
    for i, free in enumerate(free_mib):
        if free + MEMORY_EPS_MIB >= need_mib and (best is None or free < free_mib[best] - MEMORY_EPS_MIB):
            best = i
    return best


def place_best_fit_decreasing(
    free_mib: list[float], sizes_mib: list[float]
) -> tuple[list[int | None], list[float]]:
    """Place items largest first, each by :func:`best_fit`. Returns each item's instance index
    (None: did not fit), in the order of ``sizes_mib``, and the free memory left per instance."""
    free = list(free_mib)
    where: list[int | None] = [None] * len(sizes_mib)
    for item in sorted(range(len(sizes_mib)), key=lambda k: -sizes_mib[k]):
        i = best_fit(free, sizes_mib[item])
        if i is not None:
            free[i] -= sizes_mib[item]
            where[item] = i
        # an item that fits nowhere now fits nowhere later either: free memory only shrinks
    return where, free


def fragmentation(free_mib: list[float], copy_mib: float) -> Fragmentation | None:
    """When the free memory together would hold a copy but no single instance's does."""
    total = sum(free_mib)
    largest = max(free_mib, default=0.0)
    if largest + MEMORY_EPS_MIB >= copy_mib or total + MEMORY_EPS_MIB < copy_mib:
        return None
    return Fragmentation(
        free_total_mib=round(total, 3),
        largest_free_mib=round(largest, 3),
        copies_if_contiguous=int(math.floor(total / copy_mib + EPS)),
    )


def evaluate_capacity(fleet: FleetState, model: str, delta_concurrency: float) -> CapacityEvaluation:
    """Where ``delta_concurrency`` more requests in flight of ``model`` go: copies into spare memory
    (best-fit decreasing), the rest on new instances, and when each part serves.

    Raises :class:`PlanInputError` for a model the fleet file does not describe or a delta that is
    not positive.
    """
    if model not in fleet.models:
        known = ", ".join(sorted(fleet.models)) or "none"
        raise PlanInputError(f"model {model!r} is not in the fleet file's models ({known}); add it under models or pick one of those")
    if not (delta_concurrency > 0 and math.isfinite(delta_concurrency)):
        raise PlanInputError(f"delta concurrency {delta_concurrency:g} must be a finite number > 0 (requests in flight to add)")
    m = fleet.models[model]
    need = copies_for(delta_concurrency, m.concurrency_per_copy)
    free0 = [i.free_mib for i in fleet.instances]
    # Copies of one size: no more than sum(floor(free / size)) can be placed, so a huge delta
    # costs no more to place than the fleet holds; the rest goes to new instances by arithmetic.
    room = sum(int(math.floor((f + MEMORY_EPS_MIB) / m.copy_memory_mib)) for f in free0)
    where, free = place_best_fit_decreasing(free0, [m.copy_memory_mib] * min(need, room))

    steps: list[PlacementStep] = []
    running = list(free0)
    for idx in where:
        if idx is None:
            continue
        before = running[idx]
        running[idx] -= m.copy_memory_mib
        steps.append(
            PlacementStep(instance=fleet.instances[idx].name, free_before_mib=round(before, 3), free_after_mib=round(running[idx], 3))
        )
    placements = [
        Placement(
            instance=inst.name,
            copies=sum(1 for w in where if w == i),
            free_before_mib=round(free0[i], 3),
            free_after_mib=round(free[i], 3),
        )
        for i, inst in enumerate(fleet.instances)
        if any(w == i for w in where)
    ]
    hot = len(steps)
    rest = need - hot
    per_new = int(math.floor(m.new_instance_accelerator_memory_mib / m.copy_memory_mib + EPS))
    new_instances = math.ceil(rest / per_new) if rest and per_new else 0
    unplaceable = rest if per_new == 0 else 0
    on_new = rest - unplaceable
    frag = fragmentation(free, m.copy_memory_mib) if rest else None

    serving = []
    if hot:
        serving.append(ServingPart(part="hot-load", copies=hot, concurrency=hot * m.concurrency_per_copy, serving_after_s=m.t_copy_s))
    if on_new:
        serving.append(
            ServingPart(part="new-instances", copies=on_new, concurrency=on_new * m.concurrency_per_copy, serving_after_s=m.t_total_s)
        )

    findings = _findings(fleet, m, need, hot, on_new, new_instances, per_new, unplaceable, frag)
    levels = {f.level for f in findings}
    return CapacityEvaluation(
        model=model,
        delta_concurrency=delta_concurrency,
        copy_memory_mib=m.copy_memory_mib,
        concurrency_per_copy=m.concurrency_per_copy,
        copies_needed=need,
        hot_loadable=hot,
        steps=steps,
        placements=placements,
        copies_on_new_instances=on_new,
        copies_per_new_instance=per_new,
        new_instances=new_instances,
        unplaceable_copies=unplaceable,
        serving=serving,
        fragmentation=frag,
        placement_source=fleet.placement,
        findings=findings,
        verdict="stop" if "stop" in levels else "warn" if "warn" in levels else "ok",
    )


def _findings(
    fleet: FleetState,
    m: FleetModel,
    need: int,
    hot: int,
    on_new: int,
    new_instances: int,
    per_new: int,
    unplaceable: int,
    frag: Fragmentation | None,
) -> list[Finding]:
    out: list[Finding] = []
    if unplaceable:
        out.append(
            Finding(
                name="copy_fits",
                level="stop",
                message=f"{unplaceable} cop{'y' if unplaceable == 1 else 'ies'} of {m.copy_memory_mib:g} MiB fit no running "
                f"instance and no new {m.new_instance_type} ({m.new_instance_accelerator_memory_mib:g} MiB): choose an "
                "instance type with more accelerator memory, or a smaller copy",
            )
        )
    if hot == need:
        out.append(
            Finding(
                name="hot_load",
                level="ok",
                message=f"all {need} copies fit into spare memory: serving after T_copy {m.t_copy_s:g} s, no new instance",
            )
        )
    elif on_new:
        out.append(
            Finding(
                name="hot_load",
                level="warn",
                message=f"{hot} of {need} copies fit into spare memory (serving after {m.t_copy_s:g} s); the other {on_new} "
                f"need {new_instances} new {m.new_instance_type} instance{'s' if new_instances != 1 else ''} ({per_new} "
                f"copies each), serving after T_total {m.t_total_s:g} s",
            )
        )
    if frag is not None:
        out.append(
            Finding(
                name="fragmentation",
                level="warn",
                message=f"{frag.free_total_mib:g} MiB are free across the fleet, enough for {frag.copies_if_contiguous} "
                f"cop{'y' if frag.copies_if_contiguous == 1 else 'ies'} of {m.copy_memory_mib:g} MiB, but no instance has "
                f"more than {frag.largest_free_mib:g} MiB free: the memory is split so that no copy fits",
            )
        )
    if fleet.placement == "inferred":
        out.append(
            Finding(
                name="placement_source",
                level="warn",
                message="which instance holds which copy was inferred (SageMaker does not report it); the real "
                "placement may leave memory split differently",
            )
        )
    if not fleet.instances and need:
        out.append(Finding(name="fleet_empty", level="ok", message="no running instance: every copy waits for a new one"))
    return out


def fleet_model(plan: CopyPlan, *, shared_devices: bool = False) -> FleetModel:
    """The fleet file's model entry from a copy plan. On SageMaker (the default) a copy reserves
    whole devices: devices per copy x device memory; ``shared_devices`` uses the footprint plus
    margin instead (a fleet whose copies share a GPU). Needs the plan's T_total (a ttotal artifact)."""
    p = plan.packing
    if p.reserved_accelerator_memory_mib is None or p.accelerator_devices_per_copy is None:
        raise PlanInputError(
            f"the copy plan of {plan.model!r} is for a CPU copy: the capacity evaluation places by accelerator memory"
        )
    if plan.t_total is None:
        raise PlanInputError(
            f"the copy plan of {plan.model!r} has no T_total (planned without a ttotal artifact); plan with --ttotal"
        )
    spec = p.instance
    copy_mib = (
        p.reserved_accelerator_memory_mib if shared_devices else p.accelerator_devices_per_copy * spec.accelerator_memory_mib
    )
    return FleetModel(
        copy_memory_mib=copy_mib,
        concurrency_per_copy=plan.thresholds.c_scale_max,
        t_copy_s=plan.t_copy.planning_s,
        t_total_s=plan.t_total.planning_s,
        new_instance_type=spec.instance_type,
        new_instance_accelerator_memory_mib=spec.total_accelerator_memory_mib,
    )
