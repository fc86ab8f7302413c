"""Hot loading in the fleet simulator: copies into spare memory first, instances second.

The serving unit is a model copy (the qmax ladder measured against one copy, so the instance
model of :mod:`speech.sim` is a copy's). A scaling policy decides the number of copies, as
copy scaling on ``ConcurrentRequestsPerCopy`` does on SageMaker inference components. Where the
added copies go is the difference between the two fleets compared here:

- ``instance-only``: every new instance brings ``copies_per_instance`` copies (1: a plain variant,
  one model server per instance). Adding copies means adding instances, which serve after the
  instance start-up (T_total's in_service phase); scaling in removes copies as below.
- ``hot-load``: added copies go into spare memory of instances already running or starting,
  placed by :func:`speech.plan.capacity.evaluate_capacity` (best-fit decreasing); a copy on a running
  instance serves after T_copy, one on a starting instance when that instance serves (or after
  T_copy, whichever is later). Copies that fit nowhere get new instances (managed instance
  scaling), which serve after the start-up. On scale-in, copies still starting go first, then
  serving copies from the instance holding the fewest, and an instance left with no copies is
  released (above ``min_instances``).

Both fleets run the same policy on the same copy model and the same trace, so the difference in
the table is where the copies go. Instance-hours count instances (billed from the moment asked
for until released and drained), not copies.

Not modelled (docs/design.md §10.6): copies on one instance are independent servers, each with
the measured per-copy throughput. That holds when the per-copy ladder was measured with the
instance's other copies busy, or when the accelerator has headroom a single copy does not use;
copies sharing a saturated CPU or GPU serve less than that.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from speech.errors import SimulationInputError
from speech.plan.capacity import evaluate_capacity
from speech.plan.fleet import FleetInstance, FleetModel, FleetState
from speech.schema.artifacts import CopyArtifact
from speech.schema.units import EPS
from speech.sim.fleet import WARM_WINDOW_S, Action, Run, Summary, fluid_step, summarize
from speech.sim.instance import InstanceModel
from speech.sim.scaler import History, Policy, Scaler, ScalingNumbers

HOT_LOAD_POLICIES = ("instance-only", "hot-load")
_MODEL = "model"


@dataclass(frozen=True)
class CopyFleet:
    """The fleet copies live in: memory per instance and per copy, start-up times, the floor."""

    instance_memory_mib: float
    """Memory copies are packed into, per instance (accelerator memory; host memory for CPU copies), MiB."""
    copy_memory_mib: float
    """What one copy reserves of it, MiB (the measured footprint plus margin)."""
    t_copy_s: float
    """A copy added on a running instance serves after this long (the copy artifact's T_copy)."""
    initial_instances: int = 1
    """Instances running at the start; the copies the policy starts with are spread over them."""
    min_instances: int = 1
    """Instances never released below this many (managed instance scaling's minimum)."""
    copies_per_instance: int = 1
    """``instance-only``: copies every new instance brings."""
    headroom_copies: int = 0
    """``hot-load``: copies' worth of spare memory kept free on running or starting instances.
    After a scale-out leaves less, empty instances are started for the next one; a scale-in does
    not release an empty instance the headroom needs. 0: instances only when copies do not fit."""
    instance_type: str = "instance"

    def __post_init__(self) -> None:
        if not self.copy_memory_mib > 0 or not self.instance_memory_mib > 0:
            raise SimulationInputError("instance_memory_mib and copy_memory_mib must be > 0 MiB")
        if self.copy_memory_mib > self.instance_memory_mib:
            raise SimulationInputError(f"a copy ({self.copy_memory_mib:g} MiB) does not fit an instance ({self.instance_memory_mib:g} MiB)")
        if self.copies_per_instance * self.copy_memory_mib > self.instance_memory_mib + 1e-6:
            raise SimulationInputError(f"{self.copies_per_instance} copies per instance need "
                             f"{self.copies_per_instance * self.copy_memory_mib:g} MiB; an instance has {self.instance_memory_mib:g}")
        if self.initial_instances < 1 or self.min_instances < 1 or self.copies_per_instance < 1 or self.t_copy_s < 0:
            raise SimulationInputError("initial_instances, min_instances and copies_per_instance must be >= 1, t_copy_s >= 0")
        if self.headroom_copies < 0:
            raise SimulationInputError(f"headroom_copies {self.headroom_copies} must be >= 0")

    @property
    def copies_fit(self) -> int:
        """floor(instance memory / copy memory): copies one instance can hold."""
        return int(math.floor(self.instance_memory_mib / self.copy_memory_mib + EPS))


@dataclass
class _Instance:
    name: str
    ready_at: float
    copies: list[float] = field(default_factory=list)
    """Ready time of each copy on it (serving once <= now)."""
    drained_at: float = 0.0
    """When the serving copies removed from it have finished what they held."""


@dataclass
class CopyRun:
    """One fleet's run: the per-copy arrays in ``run`` (``serving`` counts copies, ``billed``
    instances), instance counts per second, and when the first added copy served."""

    policy: str
    run: Run
    instances: np.ndarray
    """Instances alive (running or starting) in each second."""
    copies_serving: np.ndarray
    first_scale_out_s: int | None
    first_added_serving_s: float | None
    """Seconds from the first scale-out until the serving copy count first rose."""
    hot_loaded: int
    """Copies placed into spare memory over the run."""
    new_instances: int
    """Instances added over the run."""


def _fleet_state(instances: list[_Instance], fleet: CopyFleet, t_total_s: float) -> FleetState:
    return FleetState(
        instances=[FleetInstance(name=i.name, instance_type=fleet.instance_type, accelerator_memory_mib=fleet.instance_memory_mib,
                                 used_accelerator_memory_mib=len(i.copies) * fleet.copy_memory_mib,
                                 copies={_MODEL: len(i.copies)}) for i in instances],
        models={_MODEL: FleetModel(copy_memory_mib=fleet.copy_memory_mib, concurrency_per_copy=1.0, t_copy_s=max(fleet.t_copy_s, 1e-3),
                                   t_total_s=max(t_total_s, 1e-3), new_instance_type=fleet.instance_type,
                                   new_instance_accelerator_memory_mib=fleet.instance_memory_mib)},
    )


def run_copies(model: InstanceModel, arrivals: np.ndarray, policy: Policy, fleet: CopyFleet,
               mode: Literal["instance-only", "hot-load"], warm_x_rps: float | None = None) -> CopyRun:
    """Step the copies through the trace one second at a time; ``policy`` decides the copy count.

    ``warm_x_rps``: the fleet opens with the copies the trace's opening minute needs at this
    throughput per copy, within the policy's bounds (as :func:`speech.sim.fleet.run_policy` does:
    a trace's first second is not a cold endpoint); None: the policy's own initial count."""
    if mode not in HOT_LOAD_POLICIES:
        raise SimulationInputError(f"mode {mode!r}: choose from {', '.join(HOT_LOAD_POLICIES)}")
    occ_grid, dep, blk = model.occupancy.tolist(), model.depart_rps.tolist(), model.block.tolist()
    arr = np.asarray(arrivals, dtype=float).tolist()
    T = len(arr)
    startup = model.startup_s
    per = fleet.copies_per_instance if mode == "instance-only" else fleet.copies_fit
    names = (f"i{k}" for k in range(10**9))
    instances: list[_Instance] = []
    scaler = Scaler(policy)
    start_copies = scaler.initial()
    if warm_x_rps and T:
        opening = sum(arr[:WARM_WINDOW_S]) / min(T, WARM_WINDOW_S)
        start_copies = max(start_copies, scaler.bound(math.ceil(opening / warm_x_rps - EPS)))
    n_start = max(fleet.initial_instances, math.ceil(start_copies / per))
    for _ in range(n_start):
        instances.append(_Instance(next(names), 0.0))
    for c in range(start_copies):  # round-robin: the floor's copies spread as SageMaker spreads them
        instances[c % n_start].copies.append(0.0)
    if mode == "hot-load" and fleet.headroom_copies:  # the headroom is kept from the start, as after every scale-out
        spare = n_start * per - start_copies
        instances.extend(_Instance(next(names), 0.0) for _ in range(math.ceil(max(0, fleet.headroom_copies - spare) / per)))
    pending: list[float] = []  # heap of ready times of copies not yet serving
    n = start_copies
    desired = start_copies
    hist = History(occupancy=[0.0] * T, arrivals=arr, rejected=[0.0] * T, serving=[0] * T)
    pos, adm, billed, alive = [0.0] * T, [0.0] * T, [0] * T, [0] * T
    draining: list[float] = []
    actions: list[Action] = []
    first_out: int | None = None
    first_serving: float | None = None
    hot_loaded = added_instances = 0
    m = 0.0
    k = 0
    for t in range(T):
        while pending and pending[0] <= t:
            heapq.heappop(pending)
            m = m * n / (n + 1)
            n += 1
            if first_out is not None and first_serving is None:
                first_serving = t - first_out
        a = arr[t]
        m, pb, k, w = fluid_step(occ_grid, dep, blk, m, a / n)
        rej = a * pb
        hist.occupancy[t], hist.rejected[t], hist.serving[t] = m, rej, n
        pos[t], adm[t] = k + w, a - rej
        draining = [e for e in draining if e > t]
        alive[t] = len(instances)
        billed[t] = len(instances) + len(draining)
        if not scaler.due(t, T):
            continue
        decision = scaler.step(t, desired, hist)
        if decision is None:
            continue
        new, why = decision.new, decision.reason
        now = t + 1
        if new > desired:
            if mode == "instance-only":  # whole instances of `per` copies each
                new = desired + math.ceil((new - desired) / per) * per
            add = new - desired
            if first_out is None:
                first_out = now
            if mode == "hot-load":
                ev = evaluate_capacity(_fleet_state(instances, fleet, startup), _MODEL, float(add))
                by_name = {i.name: i for i in instances}
                for p in ev.placements:
                    inst = by_name[p.instance]
                    for _ in range(p.copies):
                        ready = max(now + fleet.t_copy_s, inst.ready_at)
                        inst.copies.append(ready)
                        heapq.heappush(pending, ready)
                hot_loaded += ev.hot_loadable
                left, fresh = ev.copies_on_new_instances, ev.new_instances
            else:
                left, fresh = add, add // per
            for _ in range(fresh):
                inst = _Instance(next(names), now + startup)
                for _ in range(min(per, left)):
                    inst.copies.append(inst.ready_at)
                    heapq.heappush(pending, inst.ready_at)
                left -= len(inst.copies)
                instances.append(inst)
            added_instances += fresh
            if mode == "hot-load" and fleet.headroom_copies:
                spare = sum(per - len(i.copies) for i in instances)
                extra = math.ceil(max(0, fleet.headroom_copies - spare) / per)
                instances.extend(_Instance(next(names), now + startup) for _ in range(extra))
                added_instances += extra
        else:
            remove = desired - new
            while remove > 0:
                # A copy still starting first (the one that would serve last), else a serving copy on
                # the instance holding the fewest, so that instances empty out and can go.
                starting = [(c, i) for i in instances for c in i.copies if c > t]
                if starting:
                    start_at, inst = max(starting, key=lambda ci: ci[0])
                    inst.copies.remove(start_at)
                    pending.remove(start_at)
                    heapq.heapify(pending)
                elif n > 1:
                    inst = min((i for i in instances if i.copies), key=lambda i: (len(i.copies), i.ready_at))
                    inst.copies.remove(min(inst.copies))
                    n -= 1
                    rate = dep[k] if dep[k] > 0 else model.saturation_rps
                    inst.drained_at = max(inst.drained_at, now + math.ceil(m / rate) if m > 0 else now)
                else:
                    break
                remove -= 1
            keep: list[_Instance] = []
            spare = 0
            for inst in sorted(instances, key=lambda i: -len(i.copies)):
                needed = mode == "hot-load" and spare < fleet.headroom_copies
                if inst.copies or len(keep) < fleet.min_instances or needed:
                    keep.append(inst)
                    spare += per - len(inst.copies)
                elif inst.drained_at > now:
                    draining.append(inst.drained_at)  # released, billed until its last copy drained
            instances = keep
        actions.append(Action(t_s=now, before=desired, after=new, reason=why))
        desired = new
    run = Run(policy=mode, occupancy=np.array(hist.occupancy), grid_pos=np.array(pos), arrivals=np.asarray(arrivals, dtype=float),
              admitted=np.array(adm), rejected=np.array(hist.rejected), serving=np.array(hist.serving), billed=np.array(billed),
              actions=actions)
    return CopyRun(policy=mode, run=run, instances=np.array(alive), copies_serving=np.array(hist.serving),
                   first_scale_out_s=first_out, first_added_serving_s=first_serving, hot_loaded=hot_loaded,
                   new_instances=added_instances)


def tuner_copy_fleet(copy: CopyArtifact, instance_type: str) -> CopyFleet | None:
    """The copy fleet the tuner's hot-load knob runs on (``speech.sim.tune``, docs/design.md §10.10):
    the copies one ``instance_type`` holds as SageMaker places them (:func:`speech.plan.copies.packing`:
    whole accelerator devices per copy, host memory, CPU cores), one slot each, and the copy's T_copy.
    None where one copy fills an instance (every added copy waits for a new instance, as on a plain
    variant: hot loading has nothing to offer there). :class:`speech.errors.PlanInputError` for an
    instance type the packing does not know."""
    from speech.plan.copies import packing
    from speech.schema.instances import instance_spec

    fit = packing(copy, instance_spec(instance_type)).copies_per_instance
    if fit < 2:
        return None
    return CopyFleet(instance_memory_mib=float(fit), copy_memory_mib=1.0, t_copy_s=copy.t_copy_s, instance_type=instance_type)


def hot_load_day(task: tuple[InstanceModel, ScalingNumbers, float, np.ndarray, CopyFleet]) -> Summary:
    """One day of ``arrivals`` under the plan policy of ``numbers`` on the copy count, hot-loaded
    into ``fleet`` (its ``headroom_copies`` kept spare): the tuner's unit of work for a candidate
    with the hot-load knob (speech.sim.knobs.simulate_day). The numbers' floor and cap count copies;
    the fleet's instance floor holds the copy floor. ``instance_hours`` counts copy slots
    (instance-hours x copies per instance: device-hours where a copy takes one device), so a
    candidate compares with the one-copy-per-instance plan and the floor in the same unit."""
    from speech.sim.policies import AwsPolicy

    model, numbers, slo_ms, arrivals, fleet = task
    per = fleet.copies_fit
    floor = max(1, math.ceil(numbers.min_instances / per))
    fleet = replace(fleet, initial_instances=floor, min_instances=floor)
    r = run_copies(model, arrivals, AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max), fleet, "hot-load",
                   warm_x_rps=numbers.x_target_rps)
    s = summarize(r.run, model, slo_ms, numbers.planning_total_s)
    return replace(s, policy=f"hot-load +{fleet.headroom_copies}", instance_hours=s.instance_hours * per,
                   peak_instances=int(r.instances.max()) * per if r.instances.size else 0)


@dataclass(frozen=True)
class HotLoadSummary:
    summary: Summary
    """SLO share, rejected share, instance-hours (``peak_instances`` counts instances)."""
    peak_copies: int
    first_added_serving_s: float | None
    hot_loaded: int
    new_instances: int


def compare(model: InstanceModel, arrivals: np.ndarray, make_policy, fleet: CopyFleet, *, slo_ms: float,
            planning_total_s: float) -> list[HotLoadSummary]:
    """The fleets on the same trace; ``make_policy()`` returns a fresh policy for each run.

    Rows: ``instance-only`` (one copy per instance: a plain variant), ``instance-only xN`` (N =
    the copies that fit, every new instance brings N: the packing without hot loading, so the
    two effects can be told apart; only when N > 1), ``hot-load``."""
    runs: list[tuple[str, CopyFleet, Literal["instance-only", "hot-load"]]] = [
        ("instance-only", replace(fleet, copies_per_instance=1), "instance-only")]
    if fleet.copies_fit > 1:
        runs.append((f"instance-only x{fleet.copies_fit}", replace(fleet, copies_per_instance=fleet.copies_fit), "instance-only"))
    runs.append(("hot-load", fleet, "hot-load"))
    out = []
    for label, f, mode in runs:
        r = run_copies(model, arrivals, make_policy(), f, mode)
        s = summarize(r.run, model, slo_ms, planning_total_s)
        out.append(HotLoadSummary(
            summary=replace(s, policy=label, peak_instances=int(r.instances.max()) if r.instances.size else 0),
            peak_copies=int(r.copies_serving.max()) if r.copies_serving.size else 0,
            first_added_serving_s=r.first_added_serving_s, hot_loaded=r.hot_loaded, new_instances=r.new_instances,
        ))
    return out


def render_table(rows: list[HotLoadSummary]) -> str:
    """SLO attainment, rejected share, instance-hours and how the added copies came, one row per fleet."""
    head = ("fleet", "in SLO", "rejected", "viol min", "inst-h", "peak inst", "peak copies", "hot-loaded", "new inst",
            "1st copy serving")
    body = []
    for r in rows:
        s = r.summary
        first = f"{r.first_added_serving_s:.0f} s" if r.first_added_serving_s is not None else "-"
        body.append((s.policy, f"{100 * s.within_slo_share:.2f}%", f"{100 * s.rejected_share:.2f}%", str(s.violation_minutes),
                     f"{s.instance_hours:.2f}", str(s.peak_instances), str(r.peak_copies), str(r.hot_loaded),
                     str(r.new_instances), first))
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(b) for b in body)])
