"""What a plan's simulation promised (``bench tune``): the one :class:`Promise` a plan records and the
program exports, which the tune artifacts' promises extend (speech.sim.artifact.TunePromise). Pure
pydantic."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from speech.schema.base import Frozen


class Promise(Frozen):
    """What the plan's own simulation of a traffic trace promised (``bench tune``): ``bench plan``
    prints it, the program exports it, ``bench observe`` compares the deployed endpoint with it."""

    slo_share: Annotated[float, Field(ge=0.0, le=1.0)]
    """Simulated share of requests answered within the SLO (a refused request counts as missed)."""
    rejected_share: Annotated[float, Field(ge=0.0, le=1.0)]
    """Simulated share of requests refused at the gate (503)."""
    instance_hours: Annotated[float, Field(ge=0.0)]
    """Instance-hours the simulated fleet was billed over the trace."""
    cost_vs_floor: Annotated[float, Field(ge=0.0)]
    """Instance-hours / the floor's (speech.sim.floor: the fewest that keep the share over the trace,
    clairvoyant, no start-up, one change a minute)."""
    trace_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    """sha256 of the trace file simulated."""
    seed: int
    """The simulator's random seed."""
    simulator_version: Annotated[str, Field(min_length=1)]
    """Version of the simulator that made the promise (a new simulator may promise otherwise)."""
    trace_hours: Annotated[float, Field(gt=0.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Length of the trace, hours (to compare instance-hours per day)."""
    slo_share_low: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """Lowest simulated share within the SLO over the draws ``bench tune --draws`` judged the plan on
    (``slo_share`` is their mean); None: a promise without draws."""
    slo_share_high: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    slo_share_bound: Annotated[float, Field(le=1.0)] | None = Field(None, exclude_if=lambda v: v is None)
    """The share predicted for a draw ``bench tune`` did not see, the rule it chose the plan by
    (speech.sim.tune.unseen_share_bound: min(lowest, mean - t * sd * sqrt(1 + 1/n)) over the draws;
    may fall below 0 when the draws spread wide); None: a promise made before the rule."""
    instance_hours_low: Annotated[float, Field(ge=0.0)] | None = Field(None, exclude_if=lambda v: v is None)
    instance_hours_high: Annotated[float, Field(ge=0.0)] | None = Field(None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _retired_oracle(cls, data: Any) -> Any:
        if isinstance(data, dict) and "cost_vs_oracle" in data:
            raise ValueError("cost_vs_oracle was measured against the retired per-minute oracle; re-run bench tune, whose "
                             "promise records cost_vs_floor (instance-hours over the whole-trace floor)")
        return data
