"""Fleet simulator: a traffic trace against a fleet of the measured instance, under a scaling policy.

Pure and vectorized where it can be: numpy tables built once per instance, one scalar loop over
1 s steps per policy (no per-request work), no I/O, no clock. docs/design.md §10 says what is
modelled and what is not.

**Instance model (from the measurement only).** The qmax ladder gives X(n), completions per second
with n requests in the instance (``speech.plan.survival.service_rates``, the plan's own interpolation),
and TTFAB p50/p95/p99 at each concurrency. An instance is the plan's birth-death chain with the
admission gate at Q_max (an arrival finding Q_max in the instance is refused with 503). Over time,
the fleet's mean occupancy per in-service instance m follows the pointwise-stationary fluid
approximation: dm/dt = lambda (1 - P_block(m)) - D(m), where P_block and D (completions/s) are those
of the stationary gated chain whose mean occupancy is m. It is integrated with an implicit 1 s
step (stable for any rate). Routing is least-outstanding, so in-service instances share the load
evenly (m is one number); a new instance takes its share at once. A request admitted while the
mean is m finds n requests ahead with the chain's probability at that mean (arrivals see time
averages) and then has the ladder's TTFAB distribution at concurrency n + 1.

**Fleet.** A new instance serves after the ttotal artifact's measured provisioning phases
(:func:`startup_s`); it is billed from the moment it is asked for. A removed instance stops
receiving requests, finishes the ones it holds and is billed until then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speech.errors import SimulationInputError
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.plan.survival import service_rates

TARGET_TRACKING_HIGH_DATAPOINTS = 3
"""Datapoints (of one metric period each, all breaching) of the scale-out alarm Application Auto
Scaling creates for a target-tracking policy. With the high-resolution SageMaker metric the period
is 10 s, so the hidden alarm fires after 30 s above target (docs/design.md §10.3)."""
PRESSURE_WINDOW_S = 60
"""The container's pressure-index window (PRESSURE_WINDOW_S default), one evaluation per window."""
OCCUPANCY_GRID = 320
TTFAB_BINS = 480
SLO_SHARE = 0.95
"""A minute violates the SLO when fewer than 95 % of its requests got their first audio byte within
the SLO (its p95 TTFAB, counting a rejected request as never answered, is above the SLO)."""

MIN_SATURATION_RPS = 1e-9
"""Scale of the rate grid when the saturation throughput is 0 (a grid of zeros would have no shape)."""


# --- instance ----------------------------------------------------------------------------------


def startup_s(ttotal: TtotalArtifact) -> float:
    """Seconds from "more capacity asked for" to the new instance taking traffic: the ``in_service``
    phase when it applies (SageMaker), else ``ready`` (local process), else the measured total.
    What follows in_service (the queue draining to normal latency) is simulated, not added."""
    offsets = {p.name: p.offset_s for p in ttotal.phases if p.applicable and p.offset_s is not None}
    for name in ("in_service", "ready"):
        offset = offsets.get(name)
        if offset is not None:
            return float(offset)
    return float(ttotal.measured_total_s)


def gated_chain(arrival_rps: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Stationary distributions (rows) on 0..Q of the chain with departures X(n) and Poisson
    arrivals refused at Q = len(rates): pi(n) proportional to prod_{k<=n} lambda / X(k)."""
    lam = np.asarray(arrival_rps, dtype=float)[:, None]
    n = np.arange(rates.size + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = n[None, :] * np.log(lam) - np.concatenate([[0.0], np.cumsum(np.log(rates))])[None, :]
    logw[:, 0] = 0.0
    logw = np.where(np.isnan(logw), -np.inf, logw)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _ttfab_cdf(p50: np.ndarray, p95: np.ndarray, p99: np.ndarray, bins_ms: np.ndarray) -> np.ndarray:
    """Per concurrency (rows), a piecewise-linear CDF through the ladder's p50, p95 and p99, with
    the tails extended linearly at the slopes of the nearest segment (bounded below by 0)."""
    out = np.empty((p50.size, bins_ms.size))
    for i, (a, b, c) in enumerate(zip(p50, p95, p99, strict=True)):
        b = max(b, a + 1e-6)
        c = max(c, b + 1e-6)
        lo = max(0.0, a - (b - a) * 0.5 / 0.45)
        hi = c + (c - b) * 0.01 / 0.04
        out[i] = np.interp(bins_ms, [lo, a, b, c, hi], [0.0, 0.5, 0.95, 0.99, 1.0])
    return out


@dataclass(frozen=True)
class InstanceModel:
    """Everything the simulator knows about one instance, each table indexed by an occupancy grid."""

    q_max: int
    startup_s: float
    cloudwatch_ratio: float
    saturation_rps: float
    occupancy: np.ndarray
    """Mean occupancy m_k of the grid's stationary chains (increasing, from 0 to just below Q_max)."""
    block: np.ndarray
    """P(an arrival finds the gate full) at m_k."""
    depart_rps: np.ndarray
    """Completions per second at m_k (= admitted arrivals in the stationary chain)."""
    bins_ms: np.ndarray
    cdf: np.ndarray
    """TTFAB CDF of admitted requests at m_k (rows) over ``bins_ms``."""

    def ttfab_cdf_at(self, slo_ms: float) -> np.ndarray:
        return np.array([np.interp(slo_ms, self.bins_ms, row) for row in self.cdf])


def build_instance(qmax: QmaxArtifact, ttotal: TtotalArtifact | None, *, grid: int = OCCUPANCY_GRID,
                   bins: int = TTFAB_BINS, slo_ms: float | None = None) -> InstanceModel:
    """The instance model from the two artifacts alone (nothing assumed beyond the chain).
    Without a ttotal artifact new instances serve at once (for fixed fleets)."""
    q = qmax.q_max
    if q < 1:
        raise SimulationInputError("Q_max is 0: no concurrency met the SLO, there is nothing to simulate")
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    rates = service_rates(levels, q)
    sat = float(rates[-1])
    # Dense sweep of arrival rates, then a grid even in occupancy (plus fine steps near idle).
    dense = np.concatenate([[0.0], np.geomspace(1e-5, 40.0, 4000)]) * max(sat, MIN_SATURATION_RPS)
    dense_mean = gated_chain(dense, rates) @ np.arange(q + 1)
    targets = np.unique(np.concatenate([np.geomspace(1e-4, 1.0, 24), np.linspace(0.0, dense_mean[-1], grid)]))
    targets = targets[targets <= dense_mean[-1]]
    lam = np.interp(targets, dense_mean, dense)
    pi = gated_chain(lam, rates)
    occ = pi @ np.arange(q + 1)
    keep = np.concatenate([[True], np.diff(occ) > 1e-12])
    lam, pi, occ = lam[keep], pi[keep], occ[keep]
    block = pi[:, q]
    depart = lam * (1.0 - block)
    # TTFAB of a request admitted behind n others: the ladder at concurrency n + 1 (flat outside).
    cs = [lv.concurrency for lv in qmax.ladder]
    conc = np.arange(1, q + 1, dtype=float)
    p50 = np.interp(conc, cs, [lv.ttfab_p50_ms for lv in qmax.ladder])
    p95 = np.interp(conc, cs, [lv.ttfab_p95_ms for lv in qmax.ladder])
    p99 = np.interp(conc, cs, [lv.ttfab_p99_ms for lv in qmax.ladder])
    top = max(float(p99.max()) * 1.3, (slo_ms or qmax.slo.ttfab_p95_ms) * 1.5)
    bins_ms = np.linspace(0.0, top, bins)
    per_n = _ttfab_cdf(p50, p95, p99, bins_ms)
    seen = pi[:, :q]
    seen = seen / np.where(seen.sum(axis=1, keepdims=True) > 0, seen.sum(axis=1, keepdims=True), 1.0)
    return InstanceModel(
        q_max=q, startup_s=startup_s(ttotal) if ttotal is not None else 0.0, cloudwatch_ratio=qmax.cloudwatch_ratio, saturation_rps=sat,
        occupancy=occ, block=block, depart_rps=depart, bins_ms=bins_ms, cdf=seen @ per_n,
    )


