"""One instance of the measured model for the fleet simulator (docs/design.md §10.1).

The qmax ladder gives X(n), completions per second with n requests in the instance
(``speech.plan.survival.service_rates``, the plan's own interpolation), and TTFAB p50/p95/p99 at
each concurrency. The instance is a chain with the admission gate at Q_max (an arrival finding Q_max
in the instance is refused with 503) whose service has the measured spread: Erlang-k phases with k
from the level-1 quantiles (:func:`service_phases`; k = 1 is the plan's exponential birth-death
chain). For each mean occupancy the stationary chain gives the blocking probability, the completion
rate and what an arrival finds; a request admitted behind n others has the ladder's TTFAB at
concurrency n + 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speech.errors import SimulationInputError
from speech.plan.survival import service_rates
from speech.schema.artifacts import QmaxArtifact, TtotalArtifact
from speech.schema.units import EPS

PRESSURE_WINDOW_S = 60
"""The container's pressure-index window (PRESSURE_WINDOW_S default), one evaluation per window."""
OCCUPANCY_GRID = 320
TTFAB_BINS = 480

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


def running_s(ttotal: TtotalArtifact) -> float | None:
    """Seconds to the ``container_started`` phase when it was measured (None otherwise)."""
    return next((float(p.offset_s) for p in ttotal.phases
                 if p.name == "container_started" and p.applicable and p.offset_s is not None), None)


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


SERVICE_PHASES_MAX = 16
"""Most Erlang phases per request. M/E_k/1 waiting is (1 + 1/k) / 2 of M/M/1's: at k = 16 within
3 % of deterministic service, so more phases change little and cost states (Q_max x k)."""
FIT_PHASES_MAX = 4000


def fit_phases(p50_ms: float, p95_ms: float, p99_ms: float) -> int:
    """The gamma shape k (whole, 1..FIT_PHASES_MAX) whose p95/p50 and p99/p50 ratios are nearest (in
    log) to the measured ones: a service time with coefficient of variation 1 / sqrt(k)."""
    # scipy.stats costs about a second to import: here, so `bench simulate --help` does not pay it.
    from scipy.stats import gamma

    ks = np.arange(1, FIT_PHASES_MAX + 1, dtype=float)
    med = gamma.ppf(0.5, ks)
    want95, want99 = math.log(max(p95_ms, p50_ms * (1 + EPS)) / p50_ms), math.log(max(p99_ms, p95_ms) / p50_ms)
    err = (np.log(gamma.ppf(0.95, ks) / med) - want95) ** 2 + (np.log(gamma.ppf(0.99, ks) / med) - want99) ** 2
    return int(ks[int(np.argmin(err))])


def service_phases(qmax: QmaxArtifact) -> tuple[int, float | None, str]:
    """Erlang phases of the simulated service, from the ladder's concurrency-1 level: one request
    alone, so its TTFAB spread is the service-time spread. Returns (k used, measured coefficient of
    variation, why). Without a concurrency-1 level: k = 1 (exponential, the plan's chain)."""
    one = next((lv for lv in qmax.ladder if lv.concurrency == 1 and lv.ttfab_p50_ms > 0), None)
    if one is None:
        return 1, None, "no concurrency-1 level in the ladder: exponential service (k = 1)"
    k = fit_phases(one.ttfab_p50_ms, one.ttfab_p95_ms, one.ttfab_p99_ms)
    cv = 1.0 / math.sqrt(k)
    used = min(k, SERVICE_PHASES_MAX)
    why = (f"level 1 p50/p95/p99 {one.ttfab_p50_ms:g}/{one.ttfab_p95_ms:g}/{one.ttfab_p99_ms:g} ms fit a gamma of shape "
           f"{k} (CV {cv:.3f})" + (f", capped at {SERVICE_PHASES_MAX} phases" if used < k else ""))
    return used, cv, why


def phase_chain(arrival_rps: np.ndarray, rates: np.ndarray, k: int) -> np.ndarray:
    """Stationary distributions (rows) of the request count 0..Q (Q = len(rates)) when each request
    is k exponential phases served one after another at k X(n) per second (n requests in the
    instance: Erlang-k service of mean 1 / X(n)), Poisson arrivals refused at Q.

    The chain on the phase count p (n = ceil(p / k)) moves down one phase at a time, so the flow
    across the cut below p balances: k X(n(p)) pi(p) = lambda sum of pi(j) over admitting j in
    [p - k, p - 1] (an arrival at j jumps to j + k). k = 1 is :func:`gated_chain`."""
    lam = np.asarray(arrival_rps, dtype=float)
    if k <= 1:
        return gated_chain(lam, rates)
    q = rates.size
    top = q * k
    pi = np.zeros((lam.size, top + 1))
    pi[:, 0] = 1.0
    admit = np.arange(top + 1) <= (q - 1) * k
    for p in range(1, top + 1):
        lo = max(0, p - k)
        window = pi[:, lo:p] @ admit[lo:p].astype(float)
        pi[:, p] = lam * window / (k * rates[(p + k - 1) // k - 1])
        big = pi[:, p] > 1e200
        if big.any():
            pi[big, : p + 1] /= pi[big, p][:, None]
    pi /= pi.sum(axis=1, keepdims=True)
    n_of_p = (np.arange(top + 1) + k - 1) // k
    out = np.zeros((lam.size, q + 1))
    for n in range(q + 1):
        out[:, n] = pi[:, n_of_p == n].sum(axis=1)
    return out


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
    service_phases: int = 1
    """Erlang phases of the service time (1: exponential)."""
    service_cv: float | None = None
    """Coefficient of variation of the service time the ladder's level 1 shows."""
    service_fit: str = ""
    running_s: float | None = None
    """Seconds from "more capacity asked for" to the new instance's container running (the ttotal
    artifact's ``container_started``; None when it was not measured): before it a Kubernetes pod is
    Pending, after it Running but not yet ready (speech.sim.kube)."""

    @property
    def arrival_rps(self) -> np.ndarray:
        """Arrival rate per instance of each grid chain (admitted / (1 - P_block))."""
        return self.depart_rps / np.maximum(1.0 - self.block, 1e-12)

    def ttfab_cdf_at(self, slo_ms: float) -> np.ndarray:
        return np.array([np.interp(slo_ms, self.bins_ms, row) for row in self.cdf])


def build_instance(qmax: QmaxArtifact, ttotal: TtotalArtifact | None, *, grid: int = OCCUPANCY_GRID,
                   bins: int = TTFAB_BINS, slo_ms: float | None = None, phases: int | None = None) -> InstanceModel:
    """The instance model from the two artifacts alone (nothing assumed beyond the chain).
    Without a ttotal artifact new instances serve at once (for fixed fleets). ``phases`` overrides
    the Erlang phases fitted to the ladder (1: the exponential chain)."""
    q = qmax.q_max
    if q < 1:
        raise SimulationInputError("Q_max is 0: no concurrency met the SLO, there is nothing to simulate")
    levels = [(lv.concurrency, lv.throughput_rps) for lv in qmax.ladder]
    rates = service_rates(levels, q)
    sat = float(rates[-1])
    k, cv, fit = service_phases(qmax)
    if phases is not None:
        k, fit = max(1, int(phases)), f"{int(phases)} phases (set by the caller); " + fit
    # Dense sweep of arrival rates, then a grid even in occupancy (plus fine steps near idle).
    dense = np.concatenate([[0.0], np.geomspace(1e-5, 40.0, 4000 if k == 1 else 1200)]) * max(sat, MIN_SATURATION_RPS)
    dense_mean = phase_chain(dense, rates, k) @ np.arange(q + 1)
    targets = np.unique(np.concatenate([np.geomspace(1e-4, 1.0, 24), np.linspace(0.0, dense_mean[-1], grid)]))
    targets = targets[targets <= dense_mean[-1]]
    lam = np.interp(targets, dense_mean, dense)
    pi = phase_chain(lam, rates, k)
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
        service_phases=k, service_cv=cv, service_fit=fit, running_s=running_s(ttotal) if ttotal is not None else None,
    )


