"""The plan's numbers as Kubernetes fields: probes, drain, grace period, the HPA's target and
behavior. Pure; each function states its rule and units, like speech.plan.formulas.

Kubernetes' own behavior these rules rely on (docs/kubernetes.md cites each):
- the HPA's desired count is ceil(current x metric / target); ``behavior`` limits how fast it moves,
  and the scale-down stabilization window scales in to the highest recommendation of the window
  (pkg/controller/podautoscaler/horizontal.go);
- a pod's termination runs the preStop hook, then SIGTERM, and kills it at
  terminationGracePeriodSeconds counted from the start (preStop included).
"""

from __future__ import annotations

import math

from speech.deploy.hosting import startup_health_check_timeout_s
from speech.errors import ConfigError
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.kubernetes import ScaleDown
from speech.schema.plan_artifacts import PlanArtifact, ScaleIn

PROBE_PERIOD_S = 5
"""periodSeconds of the startup and readiness probes (GET /ping)."""
PROBE_TIMEOUT_S = 2
LIVENESS_PERIOD_S = 10
LIVENESS_FAILURES = 3
"""Liveness is a TCP connect to the port: the process is up. Not /ping, which answers 503 while a
terminating pod drains (speech's container contract), and must not get it restarted then."""
DRAIN_SAFETY = 2.0
DRAIN_MARGIN_S = 5
"""The container's drain timeout is 2 x the measured drain + 5 s; the grace period adds the preStop wait
and another 5 s for the process to exit after its drain."""
DRAIN_TIMEOUT_MIN_S = 25
"""Never below the container's own default DRAIN_TIMEOUT_S (container/settings.py)."""
MILLI = 1000


def startup_failure_threshold(ttotal: TtotalArtifact | None) -> int:
    """failureThreshold of the startup probe: the start-up budget (3 x the measured container start to
    /ping 200 + 60 s, within 60..3600 s, speech.deploy.hosting; 600 s unmeasured) over the probe period,
    so a slow model load is never killed while the measured load would still finish."""
    return math.ceil(startup_health_check_timeout_s(ttotal) / PROBE_PERIOD_S)


def throughput_at_rps(qmax: QmaxArtifact, concurrency: int) -> float:
    """Measured throughput of the highest ladder level at or below ``concurrency``, requests/s (the
    lowest level's when none is): the rate a pod's queue of that many requests empties at."""
    levels = sorted(qmax.ladder, key=lambda lv: lv.concurrency)
    below = [lv for lv in levels if lv.concurrency <= concurrency]
    return (below[-1] if below else levels[0]).throughput_rps


def drain_s(qmax: QmaxArtifact, queue_max_depth: int) -> float:
    """Seconds a pod needs to finish what it holds when SIGTERM arrives: at most ``queue_max_depth``
    requests (the container refuses more), answered at the measured throughput of that load:
    queue_max_depth / X(queue_max_depth) (Little's law on the drained queue)."""
    x = throughput_at_rps(qmax, queue_max_depth)
    return queue_max_depth / x if x > 0 else float("inf")


def drain_timeout_s(drain: float) -> int:
    """The container's DRAIN_TIMEOUT_S, seconds: ceil(2 x drain) + 5, at least 25."""
    return max(DRAIN_TIMEOUT_MIN_S, math.ceil(DRAIN_SAFETY * drain) + DRAIN_MARGIN_S)


def termination_grace_period_s(drain: float, endpoint_removal_wait_s: int) -> int:
    """terminationGracePeriodSeconds: the preStop wait, then the container's drain timeout, then 5 s to
    exit: the kubelet's kill never cuts a request the measured drain would finish."""
    return endpoint_removal_wait_s + drain_timeout_s(drain) + DRAIN_MARGIN_S


def min_grace_period_s(drain: float, endpoint_removal_wait_s: int) -> int:
    """The least grace period that lets the measured drain finish: preStop wait + ceil(drain) seconds
    (what the policy pack requires)."""
    return endpoint_removal_wait_s + math.ceil(drain)


def quantity(value: float) -> str:
    """A Kubernetes quantity string of ``value`` rounded down to a thousandth (``16``, ``10.666``):
    a target rendered never exceeds the plan's."""
    milli = math.floor(value * MILLI + 1e-9)
    whole, frac = divmod(milli, MILLI)
    return f"{whole}" if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def quantity_up(value: float) -> str:
    """Same, rounded up to a thousandth (a tolerance: scale in no earlier than the plan)."""
    return quantity(math.ceil(value * MILLI - 1e-9) / MILLI)


def pods_target(plan: PlanArtifact) -> float:
    """Per-pod target of in-flight requests: the plan's C_scale_max in client units (the container's
    own gauge counts what a client sees in flight, so no CloudWatch ratio applies)."""
    return plan.thresholds.c_scale_max


def scale_up_percent(surge_ratio: float) -> int:
    """Percent a scale-up period may add: the surge the fleet must absorb, ceil(100 x (surge - 1))."""
    return max(1, math.ceil(100 * (surge_ratio - 1) - 1e-9))


def scale_up_rules(plan: PlanArtifact) -> dict:
    """behavior.scaleUp: no stabilization (the plan scales out as soon as the target is passed), at
    most the surge share per scale-out cooldown (clamp(T_total / 2, 10, 30) s): within one planning
    T_total the fleet can grow by surge^(T_total / cooldown), at least the surge ratio, and never
    jumps by what pods still loading (invisible to the metric) would make it ask for."""
    return {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": scale_up_percent(plan.inputs.surge_ratio), "periodSeconds": plan.cooldowns.scale_out_s},
    ]}


def _scale_in(plan: PlanArtifact) -> ScaleIn:
    if plan.scale_in is None:  # plans written before the step existed; build_plan always sets it
        raise ConfigError("the plan has no scale-in step (written by an older bench); re-plan with bench plan --stack")
    return plan.scale_in


def scale_down_rules(plan: PlanArtifact) -> dict:
    """behavior.scaleDown: the plan's scale-in window as the stabilization window (every
    recommendation in it must allow the step, as every period must sit at or below C_scale_min), and
    per scale-in cooldown at most the plan's step share of the fleet, or its minimum step in pods,
    whichever is larger (Application Auto Scaling's PercentChangeInCapacity with MinAdjustmentMagnitude)."""
    period, step = plan.cooldowns.scale_in_s, _scale_in(plan)
    policies = []
    percent = abs(step.step_percent)
    if percent > 0:
        policies.append({"type": "Percent", "value": percent, "periodSeconds": period})
    policies.append({"type": "Pods", "value": max(1, step.min_removed), "periodSeconds": period})
    return {"stabilizationWindowSeconds": step.window_s, "selectPolicy": "Max", "policies": policies}


def scale_down_tolerance(plan: PlanArtifact) -> float:
    """The scale-down tolerance that makes the HPA scale in only at or below C_scale_min:
    1 - C_scale_min / C_scale_max (the HPA acts when metric / target < 1 - tolerance)."""
    return max(0.0, 1.0 - plan.thresholds.c_scale_min / plan.thresholds.c_scale_max)


def behavior(plan: PlanArtifact, *, tolerance: bool, scale_down: ScaleDown | None = None) -> dict:
    """The HPA's behavior (also KEDA's advanced.horizontalPodAutoscalerConfig.behavior); with
    ``tolerance`` (minors that have HPAConfigurableTolerance) scale-up at the target itself (0) and
    scale-down at C_scale_min; without, the cluster-wide tolerance (default 0.1) applies.
    ``scale_down`` (the stack's ``kubernetes.scale_down``, the tuned one) replaces the plan's
    window and policies; the tolerance stays the plan's."""
    up = scale_up_rules(plan)
    down = scale_down.rules() if scale_down is not None else scale_down_rules(plan)
    if tolerance:
        up["tolerance"] = "0"
        down["tolerance"] = quantity_up(scale_down_tolerance(plan))
    return {"scaleUp": up, "scaleDown": down}


def pdb_max_unavailable(plan: PlanArtifact | None) -> int:
    """maxUnavailable of the PodDisruptionBudget: what one scale-in step removes at least (the plan's
    minimum step, 1 without a plan): a node drain evicts no faster than the plan scales in."""
    return max(1, plan.scale_in.min_removed) if plan is not None and plan.scale_in is not None else 1
