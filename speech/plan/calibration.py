"""Calibration: what a deployed endpoint did (CloudWatch history) vs what its plan promised.

Pure: plain functions of typed inputs (the plan, the ladder it was built from, metric series and
scaling activities already read), no I/O and no clock. ``bench observe`` reads the history and
writes the :class:`~speech.schema.CalibrationArtifact` these functions describe.

Three comparisons, each a small rule with its threshold named below:

* latency: per occupancy level, the container's observed TTFAB p95 vs the ladder at that
  concurrency (and vs the SLO at or below the scale-out point);
* rejections: the gate's 503s vs what the plan's surge finding leads one to expect;
* scaling: direction reversals (flaps) and actions closer than the planned cooldowns.
"""

from __future__ import annotations

import re
import shlex
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from speech.schema.artifacts import QmaxArtifact
from speech.schema.aws import SUFFIX_SCALE_IN
from speech.schema.plan_artifacts import Finding, OccupancyCheck, PlanArtifact, Recommendation, RejectionCheck, ScalingCheck, ScalingEvent

LATENCY_TOLERANCE = 1.25
"""Observed p95 may exceed the ladder's at the same occupancy by this factor before it drifted."""
LATENCY_SLACK_MS = 5.0
"""... plus this much, so a ladder of a few milliseconds is not judged on scheduling noise."""
MIN_PERIODS = 3
"""Periods an occupancy level needs before it is judged (one slow minute is not a drift)."""
IDLE_OCCUPANCY = 0.5
"""Periods with fewer requests in flight than this per instance are idle: not binned."""
REJECTIONS_OK_SURGE = 0.001
"""With surge_survival ok the gate should (almost) never reject: at most 0.1 % of requests."""
REJECTIONS_WARN_SURGE = 0.01
"""With surge_survival warn the plan expects 503s during surges: at most 1 % over a window."""
DERATE = 0.9
"""Until re-measured, plan with Q_max x this when the SLO broke at or below the scale-out point."""

Sample = tuple[datetime, float]

NONZERO_MS = 1e-9
"""Floor of a ladder p95 used as a divisor (a 0 ms p95 would divide by zero; any real one is larger)."""


@dataclass(frozen=True)
class Activity:
    """One Application Auto Scaling activity (DescribeScalingActivities), as read."""

    at: datetime
    status: str
    description: str
    cause: str


# --- latency ---------------------------------------------------------------------------------


def pair_by_period(occupancy: Sequence[Sample], ttfab_p95: Sequence[Sample]) -> list[tuple[float, float]]:
    """(occupancy, TTFAB p95) for the periods both series have, busy periods only."""
    p95 = dict(ttfab_p95)
    return [(occ, p95[ts]) for ts, occ in occupancy if ts in p95 and occ >= IDLE_OCCUPANCY]


def ladder_p95_at(qmax: QmaxArtifact, concurrency: float) -> float:
    """The ladder's p95 TTFAB at a concurrency, linear between measured levels (flat beyond)."""
    xs = [lv.concurrency for lv in qmax.ladder]
    return float(np.interp(concurrency, xs, [lv.ttfab_p95_ms for lv in qmax.ladder]))


def occupancy_checks(
    pairs: Sequence[tuple[float, float]], qmax: QmaxArtifact, slo_ms: float, c_scale_max: float
) -> list[OccupancyCheck]:
    """Bin periods to the smallest ladder level at or above their occupancy (the top level takes
    the rest); judge a bin with MIN_PERIODS or more: its median period p95 must stay within
    LATENCY_TOLERANCE x the ladder's p95 at the bin's mean occupancy (+ LATENCY_SLACK_MS), and
    within the SLO while the occupancy is at or below C_scale_max."""
    levels = [lv.concurrency for lv in qmax.ladder]
    bins: dict[int, list[tuple[float, float]]] = {}
    for occ, p95 in pairs:
        level = next((c for c in levels if c >= occ), levels[-1])
        bins.setdefault(level, []).append((occ, p95))
    out = []
    for level in sorted(bins):
        rows = bins[level]
        occ_mean = float(np.mean([o for o, _ in rows]))
        expected = ladder_p95_at(qmax, occ_mean)
        judged = len(rows) >= MIN_PERIODS
        observed = statistics.median(p for _, p in rows) if judged else None
        ok = True
        if observed is not None:
            ok = observed <= expected * LATENCY_TOLERANCE + LATENCY_SLACK_MS and not (
                occ_mean <= c_scale_max and observed > slo_ms
            )
        out.append(
            OccupancyCheck(
                concurrency=level,
                occupancy_mean=round(occ_mean, 3),
                periods=len(rows),
                observed_ttfab_p95_ms=round(observed, 3) if observed is not None else None,
                ladder_ttfab_p95_ms=round(expected, 3),
                judged=judged,
                ok=ok,
            )
        )
    return out


def finding_latency(checks: Sequence[OccupancyCheck], slo_ms: float, c_scale_max: float) -> Finding:
    judged = [c for c in checks if c.judged]
    if not judged:
        return Finding(
            name="latency",
            level="ok",
            message=f"no occupancy level had {MIN_PERIODS} busy periods with TTFAB data: latency not judged",
        )
    bad = [c for c in judged if not c.ok]
    if not bad:
        span = ", ".join(f"{c.occupancy_mean:g} in flight: {c.observed_ttfab_p95_ms:g} ms (ladder {c.ladder_ttfab_p95_ms:g})"
                         for c in judged)
        return Finding(name="latency", level="ok", message=f"observed p95 TTFAB matches the ladder at {span}")
    worst = max(bad, key=lambda c: (c.observed_ttfab_p95_ms or 0) / max(c.ladder_ttfab_p95_ms, NONZERO_MS))
    slo_broken = [c for c in bad if c.occupancy_mean <= c_scale_max and (c.observed_ttfab_p95_ms or 0) > slo_ms]
    msg = (
        f"at {worst.occupancy_mean:g} in flight per instance the observed p95 TTFAB is {worst.observed_ttfab_p95_ms:g} ms "
        f"over {worst.periods} periods, the ladder measured {worst.ladder_ttfab_p95_ms:g} ms there"
    )
    if slo_broken:
        msg += f"; at or below C_scale_max {c_scale_max:g} it exceeds the SLO {slo_ms:g} ms"
    return Finding(name="latency", level="stop" if slo_broken else "warn", message=msg)


# --- rejections --------------------------------------------------------------------------------


def expected_rejection_fraction(plan: PlanArtifact) -> float:
    """Share of arrivals (0-1) the plan lets 503 queue_saturated answer: REJECTIONS_OK_SURGE when its
    surge_survival finding is ok, REJECTIONS_WARN_SURGE when it warns (503s expected in surges).
    ``bench validate`` and the stack's rejection alarm use this one limit."""
    return REJECTIONS_OK_SURGE if plan.finding("surge_survival").level == "ok" else REJECTIONS_WARN_SURGE


def rejection_check(admitted: float, rejected: float, plan: PlanArtifact) -> RejectionCheck:
    """Rejected / (admitted + rejected) over the window vs :func:`expected_rejection_fraction`."""
    total = admitted + rejected
    fraction = rejected / total if total > 0 else 0.0
    limit = expected_rejection_fraction(plan)
    return RejectionCheck(
        admitted=int(admitted), rejected=int(rejected), fraction=round(fraction, 6), expected_max_fraction=limit,
        ok=fraction <= limit,
    )


def finding_rejections(r: RejectionCheck, plan: PlanArtifact) -> Finding:
    surge = plan.finding("surge_survival")
    expect = (f"the plan's surge_survival is {surge.level} (P(reach Q_max in T_total) "
              f"{100 * plan.surge.reach_qmax_probability:.1f}%), so at most {100 * r.expected_max_fraction:g}%")
    msg = (f"{r.rejected} of {r.admitted + r.rejected} requests rejected (503 queue_saturated) = "
           f"{100 * r.fraction:.2f}%; {expect}")
    return Finding(name="rejections", level="ok" if r.ok else "warn", message=msg)


PROMISE_SLACK = 0.001
"""Refused share above the promise that still holds: 0.1 % of requests plus half the promised share
(a window is not the simulated trace)."""


def promise_interval(pr) -> str:
    """`` (low-high over the draws)`` when the promise has one, else nothing."""
    if pr.slo_share_low is None or pr.slo_share_high is None:
        return ""
    return f" (lowest {100 * pr.slo_share_low:.2f}%, highest {100 * pr.slo_share_high:.2f}% over its draws)"


def finding_promise(r: RejectionCheck, plan: PlanArtifact) -> Finding:
    """What happened against what the plan's simulation promised (only for a plan with a promise):
    the refused share the gate reported vs ``promise.rejected_share``; and, when the promise has an
    interval over draws, the share production answered (an upper bound on its share within the SLO:
    a refused request never is) against the share it promised for traffic the tuner did not see
    (``slo_share_bound``; before the bound existed: the lowest of its draws)."""
    pr = plan.promise
    if pr is None:
        return Finding(name="promise", level="ok", message="the plan has no promise (advisory): nothing to compare")
    limit = pr.rejected_share * 1.5 + PROMISE_SLACK
    msg = (f"refused {100 * r.fraction:.2f}% observed vs {100 * pr.rejected_share:.2f}% promised (simulated on trace "
           f"{pr.trace_sha256[:12]}, seed {pr.seed}, simulator {pr.simulator_version}; promised "
           f"{100 * pr.slo_share:.2f}% within the SLO{promise_interval(pr)} at {pr.cost_vs_floor:.2f}x the floor)")
    answered = 1.0 - r.fraction
    # what the promise states for traffic the tuner did not see is its bound (slo_share_bound); the
    # lowest of its draws is where an unseen day lands below now and then (one in n + 1), so it is
    # the line only for a promise made before the bound
    bound, what = ((pr.slo_share_bound, "the share it promised for traffic the tuner did not see")
                   if pr.slo_share_bound is not None else (pr.slo_share_low, "the lowest of its draws"))
    if bound is not None and r.admitted + r.rejected > 0 and answered + 1e-12 < bound:
        return Finding(name="promise", level="warn",
                       message=f"{msg}: production answered {100 * answered:.2f}% of its requests, so at most that "
                       f"within the SLO: BELOW the promise's low end {100 * bound:.2f}% ({what}); the traffic is not the "
                       "trace simulated, or the endpoint is not the one measured: re-run bench tune on this window's "
                       "traffic, or re-measure")
    if r.fraction > limit:
        return Finding(name="promise", level="warn",
                       message=f"{msg}: above {100 * limit:.2f}%; the traffic is not the trace simulated, or the endpoint "
                       "is not the one measured: re-run bench tune on this window's traffic, or re-measure")
    return Finding(name="promise", level="ok", message=msg)


# --- scaling -----------------------------------------------------------------------------------

_DESIRED_RE = re.compile(r"desired (?:instance )?count to (\d+)", re.IGNORECASE)


def scaling_events(activities: Iterable[Activity]) -> list[ScalingEvent]:
    """Successful activities in time order, with their direction: from the desired count in the
    description ("Setting desired instance count to 3.") compared with the previous one, else from
    the policy named in the cause (``*-scale-in`` removes, anything else adds)."""
    events: list[ScalingEvent] = []
    prev: int | None = None
    for a in sorted(activities, key=lambda a: a.at):
        if a.status != "Successful":
            continue
        m = _DESIRED_RE.search(a.description)
        desired = int(m.group(1)) if m else None
        if desired is not None and prev is not None and desired != prev:
            direction = "out" if desired > prev else "in"
        else:
            direction = "in" if SUFFIX_SCALE_IN in a.cause else "out"
        events.append(ScalingEvent(at=a.at, direction=direction, desired=desired, cause=a.cause[:300]))
        if desired is not None:
            prev = desired
    return events


def scaling_check(events: Sequence[ScalingEvent], plan: PlanArtifact, read: bool = True) -> ScalingCheck:
    """Flap: a reversal (in then out, or out then in) within the plan's scale-in cooldown, i.e.
    capacity given back that was needed again before T_total could pass three times. Cooldown
    violation: two scale-ins closer than the scale-in cooldown, or two scale-outs closer than the
    scale-out cooldown."""
    flaps = violations = 0
    for a, b in zip(events, events[1:], strict=False):
        gap_s = (b.at - a.at).total_seconds()
        if a.direction != b.direction and gap_s < plan.cooldowns.scale_in_s:
            flaps += 1
        elif a.direction == b.direction == "in" and gap_s < plan.cooldowns.scale_in_s:
            violations += 1
        elif a.direction == b.direction == "out" and gap_s < plan.cooldowns.scale_out_s:
            violations += 1
    return ScalingCheck(read=read, events=list(events), flaps=flaps, cooldown_violations=violations,
                        ok=flaps == 0 and violations == 0)


def finding_scaling(s: ScalingCheck, plan: PlanArtifact, why_unread: str = "") -> Finding:
    if not s.read:
        return Finding(name="scaling", level="ok", message=f"scaling activities not read ({why_unread}): not judged")
    outs = sum(e.direction == "out" for e in s.events)
    ins = len(s.events) - outs
    base = (f"{outs} scale-out and {ins} scale-in actions; cooldowns planned: out {plan.cooldowns.scale_out_s} s, "
            f"in {plan.cooldowns.scale_in_s} s")
    if s.ok:
        return Finding(name="scaling", level="ok", message=f"{base}; no flaps")
    return Finding(
        name="scaling",
        level="warn",
        message=f"{base}; {s.flaps} flap(s) (direction reversed within {plan.cooldowns.scale_in_s} s) and "
        f"{s.cooldown_violations} action(s) closer than their cooldown",
    )


# --- verdict and recommendations ---------------------------------------------------------------


def plan_command(plan: PlanArtifact, qmax_path: str, ttotal_path: str, *, qmax_derate: float | None = None,
                 min_instances: int | None = None, stack: str | None = None) -> str:
    """The exact ``bench plan`` command that re-plans with the plan's own inputs, changed as given."""
    i = plan.inputs
    argv = ["python", "-m", "bench", "plan", "--qmax", qmax_path, "--ttotal", ttotal_path,
            "--peak-rps", f"{i.peak_rps:g}", "--trough-rps", f"{i.trough_rps:g}", "--slo-ms", f"{i.slo_ms:g}",
            "--surge-ratio", f"{i.surge_ratio:g}",
            "--min-instances", str(min_instances if min_instances is not None else i.min_instances)]
    derate = qmax_derate if qmax_derate is not None else i.qmax_derate
    if derate < 1.0:
        argv += ["--qmax-derate", f"{derate:g}"]
    if i.allow_config_mismatch:
        argv.append("--allow-config-mismatch")
    if stack:
        argv += ["--stack", stack]
    return shlex.join(argv)


def recommendations(
    findings: Sequence[Finding], checks: ScalingCheck, plan: PlanArtifact, qmax_path: str, ttotal_path: str,
    endpoint: str, stack: str | None = None,
) -> list[Recommendation]:
    by = {f.name: f for f in findings}
    out: list[Recommendation] = []
    lat = by.get("latency")
    if lat is not None and lat.level == "stop":
        derate = round(plan.inputs.qmax_derate * DERATE, 4)
        out.append(Recommendation(
            message=f"the SLO broke at or below the scale-out point: re-measure (bench qmax, bench ttotal on {endpoint}); "
            f"until then plan with Q_max x {derate:g}",
            command=plan_command(plan, qmax_path, ttotal_path, qmax_derate=derate, stack=stack),
        ))
    elif lat is not None and lat.level == "warn":
        out.append(Recommendation(
            message=f"the endpoint is slower than its ladder (still within the SLO where observed): re-measure with "
            f"python -m bench qmax --endpoint {endpoint} --slo-ms {plan.inputs.slo_ms:g}, then re-plan",
        ))
    rej = by.get("rejections")
    if rej is not None and rej.level != "ok":
        out.append(Recommendation(
            message="more requests were rejected than the surge finding expects: T_total may have grown or traffic "
            f"surges faster than x{plan.inputs.surge_ratio:g}; re-measure T_total (bench ttotal) and re-plan, or plan "
            "with a larger --surge-ratio",
        ))
    if not checks.ok:
        if checks.flaps and plan.fleet.min_instances < plan.fleet.min_safe_instances:
            out.append(Recommendation(
                message=f"scaling flapped: from fewer than {plan.fleet.min_safe_instances} instances a scale-in pushes "
                "the rest past C_scale_max; raise the floor",
                command=plan_command(plan, qmax_path, ttotal_path, min_instances=plan.fleet.min_safe_instances, stack=stack),
            ))
        else:
            out.append(Recommendation(
                message="scaling acted faster than the planned cooldowns or reversed itself: check the deployed policy "
                f"with python -m bench validate --plan <plan> --endpoint {endpoint}",
            ))
    return out
