"""Kubernetes' autoscalers as simulator policies: ``hpa-v2`` (a HorizontalPodAutoscaler on the
pods' in-flight requests) and ``keda`` (a KEDA ScaledObject, whose HPA reads an External metric).

Every sync (:data:`speech.sim.hpa.SYNC_PERIOD_S`, 15 s) the controller reads the metric, computes a
recommendation with the replica calculator (:func:`speech.sim.hpa.desired_replicas`, or
:func:`~speech.sim.hpa.external_replicas` for KEDA), stabilizes it over the windows and limits it by
the behavior policies (:func:`~speech.sim.hpa.stabilized`, :func:`~speech.sim.hpa.rate_limited`).

The pods as the controller sees them: a pod asked for is Pending until its container starts (the
ttotal artifact's ``container_started`` offset, :attr:`speech.sim.instance.InstanceModel.running_s`;
without one, until it serves), then Running with no metric until it is ready (a model loading serves
nothing and reports nothing), then reports its in-flight requests (the container's
``speech_concurrent_requests`` gauge: the simulator's mean occupancy over ``metric_window_s``).
Unlike a SageMaker endpoint, a Deployment takes a new replica count at any time (no one change at a
time). The pure arithmetic is :mod:`speech.sim.hpa`; this module keeps the pods' ages and the
controller's memory (recommendations, scale events) in the policy's state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from speech.errors import SimulationInputError
from speech.schema.kubernetes import ScaleDown
from speech.schema.plan_artifacts import PlanArtifact
from speech.sim.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    DEFAULT_TOLERANCE,
    SYNC_PERIOD_S,
    ScalingPolicy,
    ScalingRules,
    desired_replicas,
    external_replicas,
    rate_limited,
    stabilized,
)
from speech.sim.instance import InstanceModel
from speech.sim.scaler import Ctx, Decision, Policy, ScalingNumbers, floor_entries

Kind = Literal["hpa", "keda"]


@dataclass(frozen=True)
class HpaSpec:
    """Every knob of one HorizontalPodAutoscaler (or the HPA a KEDA ScaledObject makes), in the
    units Kubernetes takes them; metric and target in requests in flight per pod."""

    target_per_pod: float
    """The AverageValue target of the in-flight metric."""
    min_replicas: int = 1
    max_replicas: int = 100
    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN
    tolerance: float = DEFAULT_TOLERANCE
    sync_s: int = SYNC_PERIOD_S
    metric_window_s: int = SYNC_PERIOD_S
    """Seconds the pod metric averages (a Prometheus scrape each sync)."""
    floors: tuple[tuple[int, int], ...] = ()
    """Scheduled minReplicas (minute of the day, or of the week from Monday 00:00 when
    ``floors_period_min`` is a week, replicas): a CronJob (or KEDA's cron trigger) raising the floor;
    the latest at or before the time of day (week) holds (the period's last before the first)."""
    floors_period_min: int = 1440
    """Minutes the floors repeat after: a day, or a week (10080) for per-weekday floors."""
    kind: Kind = "hpa"

    def __post_init__(self) -> None:
        if not self.target_per_pod > 0:
            raise SimulationInputError(f"HPA target {self.target_per_pod!r} must be > 0 requests per pod")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise SimulationInputError(f"HPA replicas {self.min_replicas}..{self.max_replicas}: need 1 <= min <= max "
                                       "(the simulator keeps one pod; KEDA's scale to zero is not simulated)")

    def floor_at(self, t_s: float) -> int:
        """minReplicas at ``t_s`` seconds into the trace (the trace starts at 00:00; on Monday for
        weekly floors)."""
        if not self.floors:
            return self.min_replicas
        minute = int(t_s // 60) % self.floors_period_min
        entries = sorted(self.floors)
        past = [n for at, n in entries if at <= minute]
        return max(self.min_replicas, min(self.max_replicas, past[-1] if past else entries[-1][1]))


def rules_of(rendered: dict) -> ScalingRules:
    """One direction of an autoscaling/v2 behavior, as speech.deploy.kubernetes renders it, as ScalingRules."""
    tol = rendered.get("tolerance")
    return ScalingRules(int(rendered.get("stabilizationWindowSeconds", 0)),
                        tuple(ScalingPolicy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in rendered["policies"]),
                        rendered.get("selectPolicy", "Max"), None if tol is None else float(tol))


def floors_of(numbers: ScalingNumbers) -> tuple[tuple[int, int], ...]:
    """The plan's scheduled floors as (minute of the day or week, replicas); their period is
    :func:`floors_period_of`'s."""
    return floor_entries(numbers.floors)[0] if numbers.floors else ()


def floors_period_of(numbers: ScalingNumbers) -> int:
    """Minutes the plan's scheduled floors repeat after: 1440, or 10080 for a weekly schedule."""
    return floor_entries(numbers.floors)[1] if numbers.floors else 1440


def plan_hpa_spec(plan: PlanArtifact, numbers: ScalingNumbers, kind: Kind = "hpa", *, tolerance: bool = True,
                  scale_down: ScaleDown | None = None) -> HpaSpec:
    """The measured plan as speech.deploy.kubernetes renders it: target C_scale_max in flight per pod
    (rounded down to a thousandth, as rendered), the plan's floor, cap and scheduled floors, and the
    rendered behavior: scale-up by the surge share per scale-out cooldown, the plan's scale-in window,
    step and cooldown as scaleDown, and with ``tolerance`` (Kubernetes 1.33+) scale-up at the target
    itself and scale-down only at C_scale_min (the per-direction tolerances). ``scale_down``: the
    stack's ``kubernetes.scale_down`` (a tuned one), rendered in place of the plan's."""
    from speech.deploy.kubernetes import sizing

    behavior = sizing.behavior(plan, tolerance=tolerance, scale_down=scale_down)
    return HpaSpec(target_per_pod=float(sizing.quantity(sizing.pods_target(plan))), min_replicas=numbers.min_instances,
                   max_replicas=numbers.max_instances, scale_up=rules_of(behavior["scaleUp"]),
                   scale_down=rules_of(behavior["scaleDown"]), floors=floors_of(numbers),
                   floors_period_min=floors_period_of(numbers), kind=kind)


def spec_signature(s: HpaSpec) -> str:
    """One line of the knobs, for tables and the tune artifact."""
    def rules(r: ScalingRules) -> str:
        pol = "+".join(f"{p.value}{'%' if p.type == 'Percent' else ' pods'}/{p.period_s}s" for p in r.policies)
        return f"window {r.stabilization_window_s}s {pol} ({r.select_policy})"
    return (f"{s.kind} target {s.target_per_pod:g}/pod, replicas {s.min_replicas}..{s.max_replicas}, up {rules(s.scale_up)}, "
            f"down {rules(s.scale_down)}" + (f", {len(s.floors)} floors" if s.floors else ""))


@dataclass(frozen=True)
class KubeState:
    recommendations: tuple[tuple[float, int], ...] = ()
    """(seconds, unstabilized recommendation) within the longer stabilization window."""
    events: tuple[tuple[float, int], ...] = ()
    """(seconds, replicas changed) within the longest behavior period."""
    asked: tuple[float, ...] = field(default=())
    """When each pod not yet serving was asked for, oldest first."""


class KubePolicy(Policy):
    """A HorizontalPodAutoscaler (``kind="hpa"``: a Pods metric) or a KEDA ScaledObject's HPA
    (``kind="keda"``: an External metric, the sum of the pods' in-flight requests, judged against
    status.replicas, which counts pods still starting)."""

    one_change_at_a_time = False

    def __init__(self, spec: HpaSpec, model: InstanceModel, *, name: str | None = None) -> None:
        self.spec = spec
        self.name = name or ("hpa-v2" if spec.kind == "hpa" else "keda")
        self.tick_s = spec.sync_s
        self.min_instances, self.max_instances = spec.min_replicas, spec.max_replicas
        self.startup_s = model.startup_s
        self.running_s = model.startup_s if model.running_s is None else min(model.running_s, model.startup_s)
        self._keep_recs_s = max(spec.scale_up.stabilization_window_s, spec.scale_down.stabilization_window_s)
        self._keep_events_s = max((p.period_s for r in (spec.scale_up, spec.scale_down) for p in r.policies), default=0)

    def initial(self) -> int:
        return self.spec.min_replicas

    def pods(self, ctx: Ctx, st: KubeState) -> tuple[int, int, int, tuple[float, ...]]:
        """(ready, running without a metric, pending, the ask times of the pods still starting)."""
        ready = int(ctx.history.serving[ctx.t])
        starting = max(0, ctx.desired - ready)
        asked = st.asked[len(st.asked) - starting:] if starting else ()
        asked = (ctx.now - self.startup_s,) * (starting - len(asked)) + asked  # warm-start pods: count as nearly ready
        pending = sum(1 for a in asked if ctx.now - a < self.running_s)
        return ready, starting - pending, pending, asked

    def recommend(self, ctx: Ctx, ready: int, loading: int, pending: int) -> tuple[int, str]:
        occupancy = sum(ctx.window(ctx.history.occupancy, self.spec.metric_window_s)) / max(1, min(ctx.t + 1, self.spec.metric_window_s))
        s = self.spec
        up, down = s.scale_up.tolerance, s.scale_down.tolerance
        if s.kind == "keda":
            r = external_replicas(occupancy * ready, s.target_per_pod, status_replicas=max(1, ctx.desired),
                                  tolerance=s.tolerance, up_tolerance=up, down_tolerance=down)
            return r.replicas, r.reason
        if ready == 0:
            return ctx.desired, "no pod reports the metric"
        got = desired_replicas([occupancy] * ready + [None] * loading, s.target_per_pod, pending=pending,
                               current=ctx.desired, tolerance=s.tolerance, up_tolerance=up, down_tolerance=down)
        return got.replicas, got.reason

    def decide(self, ctx: Ctx) -> Decision:
        now, current = float(ctx.now), ctx.desired
        # the controller's first sync seeds the scale-down window with the current count
        # (horizontal.go, maybeInitScaleDownStabilizationWindow): no scale-down on what it has not yet seen
        st: KubeState = ctx.state or KubeState(recommendations=((now, current),))
        ready, loading, pending, asked = self.pods(ctx, st)
        floor = self.spec.floor_at(now)
        if current < floor:  # minReplicas raised: the controller scales to it before any metric
            want, why = floor, "minReplicas"
        else:
            rec, why = self.recommend(ctx, ready, loading, pending)
            s = self.spec
            want = stabilized(st.recommendations, now, rec, current, s.scale_up, s.scale_down)
            want = rate_limited(want, current, st.events, now, min_replicas=floor, max_replicas=s.max_replicas,
                                up=s.scale_up, down=s.scale_down)
            recs = tuple(r for r in st.recommendations if r[0] > now - self._keep_recs_s) + ((now, rec),)
            st = replace(st, recommendations=recs)
        events = tuple(e for e in st.events if e[0] > now - self._keep_events_s)
        if want > current:
            asked = asked + (now,) * (want - current)
            events += ((now, want - current),)
        elif want < current:
            asked = asked[: max(0, len(asked) - (current - want))]  # the newest pods go first
            events += ((now, want - current),)
        return want, why if want != current else "", replace(st, events=events, asked=asked)


def guessed_target(model: InstanceModel, share: float = 1.0) -> float:
    """A target a user guesses without the plan: ``share`` of Q_max in flight per pod (whole requests)."""
    return float(max(1, math.floor(model.q_max * share + 1e-9)))
