"""How the floor judges a schedule, as the fleet simulator would run it: the simulator's implicit
fluid step vectorized over a minute's seconds (many candidate counts at once), and a whole
schedule judged from its own minute-start queues (docs/design.md §10.4, :mod:`speech.sim.floor`)."""

from __future__ import annotations

import math

import numpy as np

from speech.sim.instance import InstanceModel


def fluid_steps(model: InstanceModel, per_second: np.ndarray, n: np.ndarray, slo_ms: float,
                start_queue: np.ndarray | None = None, *, with_end: bool = False):
    """Requests answered within the SLO by ``n`` instances (one count per row) over the seconds of
    each row of ``per_second`` (arrivals), stepped with the fleet simulator's own implicit fluid
    step (:func:`speech.sim.fleet.fluid_step`, vectorized here) from ``start_queue`` requests in
    flight across the fleet (spread evenly, as the simulator spreads them when the fleet changes),
    or without one from the stationary occupancy at the row's mean rate per instance. Shapes:
    ``per_second`` (C, S), ``n`` and ``start_queue`` (C,); out (C,), and with ``with_end`` also each
    row's occupancy per instance after its last second."""
    occ, blk = model.occupancy, model.block
    u = occ + model.depart_rps  # g(k) = u[k] + lam v[k] = m' + D(m') + lam (P_block(m') - 1), increasing in k
    v = blk - 1.0
    at_slo = model.ttfab_cdf_at(slo_ms)
    g_max = occ.size - 1
    steps = int(math.ceil(math.log2(max(2, g_max + 1))))
    lam_all = per_second / n[:, None]
    if start_queue is None:
        m = np.interp(lam_all.mean(axis=1), model.arrival_rps, occ)
    else:
        # Not clipped at Q_max: the simulator spreads what a shrinking scheduled fleet holds over the
        # instances left, and its first step refuses what does not fit; the same here.
        m = start_queue / n
    ok = np.zeros(n.size)
    for s in range(per_second.shape[1]):
        lam = lam_all[:, s]
        # The largest k with g(k) <= m (0 when none): bisection on [0, g_max] for every row at once.
        k = np.zeros(n.size, dtype=np.intp)
        for b in range(steps - 1, -1, -1):
            trial = np.minimum(k + (1 << b), g_max)
            k = np.where(u[trial] + lam * v[trial] <= m, trial, k)
        k1 = np.minimum(k + 1, g_max)
        g_lo = u[k] + lam * v[k]
        g_hi = u[k1] + lam * v[k1]
        span = g_hi - g_lo
        w = np.clip((m - g_lo) / np.where(span > 0, span, 1.0), 0.0, 1.0)
        w[(span <= 0) | (g_lo >= m) | (k == g_max)] = 0.0
        m = occ[k] + w * (occ[k1] - occ[k])
        pb = blk[k] + w * (blk[k1] - blk[k])
        ok += per_second[:, s] * (1.0 - pb) * (at_slo[k] * (1.0 - w) + at_slo[k1] * w)
    return (ok, m) if with_end else ok


def missed_tolerance(req: np.ndarray) -> float:
    """Missed requests a judged schedule may exceed its budget by: rounding, one in a billion."""
    return 1e-9 * max(1.0, float(req.sum()))


def judged(model: InstanceModel, per_second: np.ndarray, req: np.ndarray, counts: np.ndarray, slo_ms: float,
            guess: np.ndarray | None) -> tuple[float, np.ndarray, np.ndarray]:
    """``counts`` judged as the simulator runs it, from its own minute-start queues: (missed
    requests over the trace, missed per minute, the queues)."""
    queue = queues_at_minute_starts(model, per_second, counts, slo_ms, guess)
    bad = np.maximum(req - fluid_steps(model, per_second, counts.astype(float), slo_ms, queue), 0.0)
    return float(bad.sum()), bad, queue


JACOBI_ROUNDS = 30
"""Most rounds :func:`queues_at_minute_starts` repeats before it returns the starts it has."""


def queues_at_minute_starts(model: InstanceModel, per_second: np.ndarray, counts: np.ndarray, slo_ms: float,
                             guess: np.ndarray | None) -> np.ndarray:
    """Requests in flight across the fleet at the start of each minute when the fleet runs
    ``counts`` (the first minute starts empty, as the simulator's run does): each minute's fluid
    from the previous minute's end, all minutes at once, repeated until the starts stop moving (a
    queue reaches back only as far as overloaded minutes chain, so this settles in a few rounds)."""
    n = counts.astype(float)
    queue = np.zeros(counts.size) if guess is None else guess.copy()
    end: np.ndarray | None = None
    before = queue
    for _ in range(JACOBI_ROUNDS):
        if end is None:
            _, end = fluid_steps(model, per_second, n, slo_ms, queue, with_end=True)
        else:
            # a minute is a function of its own seconds, count and start alone (fluid_steps works row
            # by row): only the minutes whose start moved are stepped again, the rest keep their end
            moved = queue != before
            if moved.any():
                end = end.copy()
                _, end[moved] = fluid_steps(model, per_second[moved], n[moved], slo_ms, queue[moved], with_end=True)
        before = queue
        new = np.concatenate([[0.0], (end * n)[:-1]])
        if np.allclose(new, queue, rtol=1e-6, atol=1e-6):
            return new
        queue = new
    return queue

