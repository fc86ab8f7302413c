"""The fleet file (``bench capacity --fleet``, or read from an endpoint by ``--from-endpoint``): the
instances running now, what is taken on each, and the models hosted on them as copies, with each
resource in the units of its name (docs/design.md §3.9). :mod:`speech.plan.capacity` evaluates it."""

from __future__ import annotations

import math
from typing import Annotated, Final, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from speech.plan.placement import MEMORY_EPS_MIB, Amounts
from speech.schema.artifacts import Frozen

FLEET_SCHEMA_VERSION: Final = 1


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
