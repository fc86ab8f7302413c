"""Throughput curve and surge survival as an exact birth-death chain.

An instance holding n requests completes them at the rate the ladder measured at concurrency n,
X(n) requests/s (a closed-loop level at n is exactly "n in the system"). Arrivals are Poisson at
rate lambda. Then:

* the stationary mean occupancy fixes lambda for "the instance sits at C_scale_max";
* utilization = lambda / X_sat, X_sat the throughput the curve saturates at;
* the chance of reaching Q_max before a new instance arrives is the absorption probability of the
  chain (Q_max absorbing) after one planning T_total, computed with a sparse matrix exponential,
  so the number is deterministic (no Monte Carlo).

For a one-at-a-time server X(n) = 1/S and the chain is M/M/1: utilization = L / (1 + L).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

RAMP_STEPS = 32
"""Piecewise-constant steps used for a ramping arrival rate (exact per step)."""
DENSE_MAX_STATES = 400
"""Up to this many states a dense matrix exponential is faster than the sparse Krylov one."""


def throughput_at(levels: Sequence[tuple[int, float]], concurrency: float) -> float:
    """Measured throughput (requests/s) at a concurrency, linear between ladder levels.

    ``levels`` is (concurrency, throughput_rps) in increasing concurrency. Below the first level
    the curve runs linearly from (0, 0); past the last level it stays flat (no evidence of more).
    """
    if concurrency <= 0:
        return 0.0
    xs = [0.0] + [float(c) for c, _ in levels]
    ys = [0.0] + [float(x) for _, x in levels]
    return float(np.interp(concurrency, xs, ys))


def service_rates(levels: Sequence[tuple[int, float]], n_max: int) -> np.ndarray:
    """X(1..n_max): the departure rate with n requests in the system, requests/s."""
    return np.array([throughput_at(levels, n) for n in range(1, n_max + 1)], dtype=float)


def saturation_rps(levels: Sequence[tuple[int, float]]) -> float:
    """Throughput the curve saturates at: the rate at and beyond the last measured level."""
    return float(levels[-1][1])


def _log_weights(arrival_rps: float, rates: np.ndarray) -> np.ndarray:
    """log of the unnormalized stationary weights w(n) = prod_{k<=n} lambda / X(k), n = 0..M."""
    with np.errstate(divide="ignore"):
        steps = np.log(arrival_rps) - np.log(rates)
    return np.concatenate([[0.0], np.cumsum(steps)])


def stationary(arrival_rps: float, rates: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Stationary distribution on 0..M plus the geometric tail past M (X flat at X(M)).

    Returns (pi on 0..M, tail mass, mean occupancy). Requires lambda < X(M).
    """
    m = len(rates)
    r = arrival_rps / rates[-1]
    if not 0 < r < 1:
        raise ValueError(f"arrival rate {arrival_rps} must be below the saturated throughput {rates[-1]}")
    logw = _log_weights(arrival_rps, rates)
    shift = logw.max()
    w = np.exp(logw - shift)
    tail_mass = w[-1] * r / (1 - r)
    tail_mean = w[-1] * (m * r / (1 - r) + r / (1 - r) ** 2)
    total = w.sum() + tail_mass
    mean = (np.dot(np.arange(m + 1), w) + tail_mean) / total
    return w / total, tail_mass / total, float(mean)


def arrival_for_mean_occupancy(mean_target: float, rates: np.ndarray, *, rel_tol: float = 1e-12) -> float:
    """The Poisson arrival rate (requests/s) at which the stationary mean occupancy is the target.

    The mean rises monotonically with lambda from 0 to infinity on (0, X_sat): bisection.
    """
    lo, hi = 0.0, float(rates[-1])
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid <= 0:
            break
        if stationary(mid, rates)[2] < mean_target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rel_tol * hi:
            break
    return (lo + hi) / 2


def _generator_bands(arrival_rps: float, rates: np.ndarray, absorbing: int):
    """Bands of the transposed generator on 0..absorbing, `absorbing` absorbing (column form):
    (sub-diagonal = up-moves, diagonal = minus exit rates, super-diagonal = down-moves)."""
    n = absorbing + 1
    up = np.full(n - 1, arrival_rps)  # n -> n+1 for n < absorbing
    down = np.array([rates[k - 1] for k in range(1, absorbing)], dtype=float)  # k -> k-1, k < absorbing
    diag = np.zeros(n)
    diag[:absorbing] -= arrival_rps
    diag[1:absorbing] -= down
    return up, diag, np.concatenate([down, [0.0]])


def _step(p: np.ndarray, arrival_rps: float, rates: np.ndarray, absorbing: int, dt: float) -> np.ndarray:
    """p(t + dt) = exp(Q^T dt) p(t), dense for small chains, sparse Krylov for large ones."""
    up, diag, down = _generator_bands(arrival_rps, rates, absorbing)
    if absorbing + 1 <= DENSE_MAX_STATES:
        # scipy.linalg is imported on first use, so `bench plan --help` and argument errors stay quick.
        from scipy.linalg import expm

        gen = np.diag(up, -1) + np.diag(diag) + np.diag(down, 1)
        return expm(gen * dt) @ p
    # Only large chains need scipy.sparse; importing it here keeps `bench plan` start-up short.
    from scipy.sparse import diags
    from scipy.sparse.linalg import expm_multiply

    return expm_multiply(diags([up, diag, down], [-1, 0, 1], format="csc") * dt, p)


def start_distribution(occupancy: float, size: int) -> np.ndarray:
    """Mass split between floor and ceil of a non-integer occupancy, so 37.5 means 37 or 38."""
    p = np.zeros(size)
    lo = int(math.floor(occupancy))
    frac = occupancy - lo
    p[min(lo, size - 1)] += 1 - frac
    p[min(lo + 1, size - 1)] += frac
    return p


def reach_probability(
    *,
    start_occupancy: float,
    q_max: int,
    arrival_rps: float,
    rates: np.ndarray,
    horizon_s: float,
    ramp_ratio: float = 1.0,
    steps: int = RAMP_STEPS,
) -> float:
    """P(occupancy reaches q_max within horizon_s), starting at start_occupancy.

    Arrivals ramp linearly from lambda to lambda * ramp_ratio over the horizon, applied as
    ``steps`` piecewise-constant segments at their midpoint rate (exact when ramp_ratio is 1).

    Memoized on its exact inputs: the program, the pack, drift and the tuner re-plan the same
    measurements many times per run, and each call is up to 32 matrix exponentials.
    """
    if q_max <= 0:
        return 1.0
    if start_occupancy >= q_max:
        return 1.0
    rates = np.ascontiguousarray(rates, dtype=float)
    return _reach_probability(float(start_occupancy), int(q_max), float(arrival_rps), rates.tobytes(), len(rates),
                              float(horizon_s), float(ramp_ratio), int(steps))


@functools.lru_cache(maxsize=4096)
def _reach_probability(start_occupancy: float, q_max: int, arrival_rps: float, rates_bytes: bytes, n_rates: int,
                       horizon_s: float, ramp_ratio: float, steps: int) -> float:
    rates = np.frombuffer(rates_bytes, dtype=float, count=n_rates)
    p = start_distribution(start_occupancy, q_max + 1)
    segments = 1 if ramp_ratio == 1.0 else steps
    dt = horizon_s / segments
    for i in range(segments):
        lam = arrival_rps * (1 + (ramp_ratio - 1) * (i + 0.5) / segments)
        p = _step(p, lam, rates, q_max, dt)
        p = np.clip(p, 0.0, None)
    return float(min(1.0, max(0.0, p[q_max] / p.sum())))


# --- the gated chain: refused share and the share answered within the SLO ----------------------


def gated_stationary(arrival_rps: float, rates: np.ndarray) -> np.ndarray:
    """Stationary distribution on 0..Q (Q = len(rates)) of the chain whose arrivals are refused at Q
    (the container's admission gate at Q_max): pi(n) proportional to prod_{k<=n} lambda / X(k).
    Poisson arrivals see time averages, so pi(Q) is the share refused."""
    if arrival_rps <= 0:
        p = np.zeros(len(rates) + 1)
        p[0] = 1.0
        return p
    logw = _log_weights(arrival_rps, rates)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def ttfab_over_slo(p50_ms: float, p95_ms: float, p99_ms: float, slo_ms: float) -> float:
    """Share of requests over ``slo_ms`` at one concurrency, from the ladder's p50, p95 and p99: a
    piecewise-linear CDF through (p50, 0.5), (p95, 0.95), (p99, 0.99), its ends extended at the
    slopes of the nearest segment (the simulator's instance model uses the same shape)."""
    b = max(p95_ms, p50_ms + 1e-6)
    c = max(p99_ms, b + 1e-6)
    lo = max(0.0, p50_ms - (b - p50_ms) * 0.5 / 0.45)
    hi = c + (c - b) * 0.01 / 0.04
    return float(1.0 - np.interp(slo_ms, [lo, p50_ms, b, c, hi], [0.0, 0.5, 0.95, 0.99, 1.0]))


def over_slo_by_concurrency(quantiles: Sequence[tuple[int, float, float, float]], q_max: int, slo_ms: float) -> np.ndarray:
    """Share over the SLO for a request served at concurrency 1..q_max (index n - 1): the ladder's
    (concurrency, p50, p95, p99) interpolated linearly in concurrency, flat past its ends."""
    cs = [float(c) for c, *_ in quantiles]
    out = np.empty(q_max)
    for n in range(1, q_max + 1):
        p50, p95, p99 = (float(np.interp(n, cs, [row[i] for row in quantiles])) for i in (1, 2, 3))
        out[n - 1] = ttfab_over_slo(p50, p95, p99, slo_ms)
    return out


def slo_shares(arrival_rps: float, rates: np.ndarray, over_slo: np.ndarray) -> tuple[float, float]:
    """(share within the SLO, share refused) of Poisson arrivals at ``arrival_rps`` on one gated
    instance. An arrival that finds n < Q ahead is served at concurrency n + 1 and is over the SLO
    with ``over_slo[n]``; one that finds Q is refused (counted as missing the SLO)."""
    pi = gated_stationary(arrival_rps, rates)
    refused = float(pi[-1])
    within = float(np.dot(pi[:-1], 1.0 - over_slo))
    return within, refused


def slo_rate(rates: np.ndarray, over_slo: np.ndarray, slo_share: float, *, rel_tol: float = 1e-9) -> float | None:
    """The highest Poisson arrival rate per instance (requests/s) whose share within the SLO is at
    least ``slo_share``; None when even an idle instance misses it (no fleet can keep the share).

    The share falls monotonically with the rate (more arrivals, more ahead of each), so bisection
    on (0, hi], hi doubled from X_sat until the share is below the target."""
    if 1.0 - float(over_slo[0]) < slo_share:
        return None
    hi = float(rates[-1])
    for _ in range(60):
        if slo_shares(hi, rates, over_slo)[0] < slo_share:
            break
        hi *= 2.0
    else:
        return hi
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if slo_shares(mid, rates, over_slo)[0] >= slo_share:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rel_tol * hi:
            break
    return lo


def gated_mean(arrival_rps: float, rates: np.ndarray) -> float:
    """Mean requests in the gated instance (0..Q) at a Poisson arrival rate."""
    pi = gated_stationary(arrival_rps, rates)
    return float(np.dot(np.arange(len(pi)), pi))


def arrival_for_gated_mean(mean_target: float, rates: np.ndarray, *, rel_tol: float = 1e-12) -> float:
    """The Poisson arrival rate at which the gated instance holds ``mean_target`` on average
    (bisection: the mean rises monotonically with the rate towards Q). inf for a mean of Q or more."""
    q = len(rates)
    if mean_target >= q:
        return float("inf")
    if mean_target <= 0:
        return 0.0
    lo, hi = 0.0, float(rates[-1])
    while gated_mean(hi, rates) < mean_target:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if gated_mean(mid, rates) < mean_target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rel_tol * hi:
            break
    return (lo + hi) / 2
