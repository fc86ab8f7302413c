"""The instance model's service-time spread (docs/design.md §10.1): Erlang phases fitted to the
ladder's level 1, the phase chain exact against its generator, and the fluid fleet against a
discrete-event fleet whose service barely varies (as TTS at a given text length)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gamma

from speech.schema.artifacts import Fingerprint, LadderLevel, Provenance, QmaxArtifact, ServiceTime, Slo
from speech.sim.fleet import run_policy, summarize
from speech.sim.instance import SERVICE_PHASES_MAX, build_instance, fit_phases, gated_chain, phase_chain, service_phases
from speech.sim.peers import FixedPolicy


@pytest.mark.parametrize("shape", [1, 4, 9, 40])
def test_fit_recovers_the_gamma_shape(shape):
    p50, p95, p99 = (float(gamma.ppf(x, shape, scale=10.0)) for x in (0.5, 0.95, 0.99))
    assert fit_phases(p50, p95, p99) == shape


def _generator_solution(lam: float, rates: np.ndarray, k: int) -> np.ndarray:
    q = rates.size
    top = q * k
    g = np.zeros((top + 1, top + 1))
    for p in range(top + 1):
        if p > 0:
            g[p, p - 1] = k * rates[(p + k - 1) // k - 1]
        if p <= (q - 1) * k:
            g[p, p + k] = lam
    np.fill_diagonal(g, -g.sum(axis=1))
    a = np.vstack([g.T, np.ones(top + 1)])
    b = np.zeros(top + 2)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    n = (np.arange(top + 1) + k - 1) // k
    return np.array([pi[n == i].sum() for i in range(q + 1)])


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("lam", [3.0, 12.0, 60.0])
def test_phase_chain_is_the_stationary_solution(k, lam):
    rates = np.array([10.0, 12.0, 13.0, 13.5, 13.5])
    got = phase_chain(np.array([lam]), rates, k)[0]
    np.testing.assert_allclose(got, _generator_solution(lam, rates, k), atol=1e-10)
    np.testing.assert_allclose(phase_chain(np.array([lam]), rates, 1), gated_chain(np.array([lam]), rates), atol=1e-14)


def _ladder(service_ms: float, shape: int, q_max: int, top: int) -> QmaxArtifact:
    """The ladder a one-at-a-time server with gamma(shape) service shows: at concurrency n a request
    waits for n - 1 ahead plus itself, gamma(n x shape)."""
    sc = service_ms / shape
    levels = [
        LadderLevel(concurrency=n, completed=1000, ok=1000, ttfab_p50_ms=float(gamma.ppf(0.5, n * shape, scale=sc)),
                    ttfab_p95_ms=float(gamma.ppf(0.95, n * shape, scale=sc)), ttfab_p99_ms=float(gamma.ppf(0.99, n * shape, scale=sc)),
                    throughput_rps=1000.0 / service_ms, client_concurrency_mean=float(n), meets_slo=n <= q_max)
        for n in range(1, top + 1)
    ]
    return QmaxArtifact(
        model="des", transport="stream", fingerprint=Fingerprint.of("local", "sha256:" + "0" * 64),
        slo=Slo(ttfab_p95_ms=levels[q_max - 1].ttfab_p95_ms + 1), ladder=levels, q_max=q_max, bracketed=True,
        first_failing_concurrency=q_max + 1, service_time=ServiceTime(mean_ms=service_ms, p95_ms=levels[0].ttfab_p95_ms),
        instances=1, cloudwatch_ratio=1.0, cloudwatch_ratio_source="not_applicable",
        provenance=Provenance(origin="assumption", source="test"),
    )


def _des(rates_rps: np.ndarray, instances: int, service_s: float, shape: int, q_max: int, seed: int):
    import simpy

    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    servers = [simpy.Resource(env, capacity=1) for _ in range(instances)]
    held = [0] * instances
    ttfab: list[float] = []
    rejected = [0]

    def request(i: int):
        t0 = env.now
        with servers[i].request() as r:
            yield r
            yield env.timeout(rng.gamma(shape, service_s / shape))
        ttfab.append(env.now - t0)
        held[i] -= 1

    def source():
        for sec, lam in enumerate(rates_rps):
            for at in np.sort(rng.uniform(sec, sec + 1, rng.poisson(lam))):
                yield env.timeout(at - env.now)
                i = min(range(instances), key=held.__getitem__)
                if held[i] >= q_max:
                    rejected[0] += 1
                    continue
                held[i] += 1
                env.process(request(i))

    env.process(source())
    env.run()
    return np.array(ttfab), rejected[0]


def test_fitted_phases_match_a_nearly_deterministic_fleet_where_exponential_does_not():
    """Service CV 0.2 (gamma shape 25), one instance (as benchmarks/replay_container.py), Q_max 4,
    a rise to 1.1x capacity and back. The chain with the fitted phases (capped at 16) agrees with
    the discrete-event server; the exponential chain refuses far too much. (With several instances
    the discrete-event fleet joins the shortest queue and pools them, which the fluid model's even
    split does not: docs/design.md §10.6.)"""
    service_ms, shape, q_max, n = 50.0, 25, 4, 1
    q = _ladder(service_ms, shape, q_max, top=q_max + 2)
    k, cv, _ = service_phases(q)
    assert k == min(shape, SERVICE_PHASES_MAX) and cv == pytest.approx(0.2, rel=0.05)
    t = np.arange(900)
    cap = n * 1000.0 / service_ms
    rate = cap * (0.4 + 0.7 * np.clip(np.minimum(t - 150, 750 - t) / 200.0, 0.0, 1.0))
    ttfab, rejected = _des(rate, n, service_ms / 1000.0, shape, q_max, seed=7)
    des_rej = rejected / (ttfab.size + rejected)
    des_p95 = float(np.percentile(ttfab * 1000, 95))
    out = {}
    for phases in (None, 1):
        model = build_instance(q, None, phases=phases)
        s = summarize(run_policy(model, rate, FixedPolicy("fixed", n)), model, slo_ms=q.slo.ttfab_p95_ms, planning_total_s=300)
        out[model.service_phases] = s
    fitted, expo = out[k], out[1]
    print(f"DES rejected {des_rej:.4f} p95 {des_p95:.1f}; fitted {fitted.rejected_share:.4f} {fitted.ttfab_p95_ms:.1f}; "
          f"exponential {expo.rejected_share:.4f} {expo.ttfab_p95_ms:.1f}")
    assert fitted.rejected_share == pytest.approx(des_rej, abs=0.02)
    assert fitted.ttfab_p95_ms == pytest.approx(des_p95, rel=0.15)
    assert abs(expo.rejected_share - des_rej) > 2 * abs(fitted.rejected_share - des_rej) + 0.01


def test_at_a_few_requests_a_second_the_fluid_step_wants_the_rate_not_its_poisson_counts():
    """benchmarks/replay_container.py's scale: one instance, 700 ms near-deterministic service,
    Q_max 2, a step from half to twice its capacity (about 0.7 then 2.9 requests a second). Fed the
    rate, the fluid step agrees with the discrete-event server. Fed one draw's per-second counts
    (0 to 8 a second), it takes each second as a steady state and refuses clearly more than the
    server does on Poisson arrivals at that rate: which is why the benchmark simulates the rate."""
    service_ms, shape, q_max = 700.0, 64, 2
    q = _ladder(service_ms, shape, q_max, top=q_max + 2)
    cap = 1000.0 / service_ms
    rate = np.where(np.arange(1200) < 60, 0.5 * cap, 2.0 * cap)
    ttfab, rejected = _des(rate, 1, service_ms / 1000.0, shape, q_max, seed=11)
    des_rej = rejected / (ttfab.size + rejected)
    model = build_instance(q, None)
    on_rate = summarize(run_policy(model, rate, FixedPolicy("one", 1)), model, slo_ms=q.slo.ttfab_p95_ms,
                        planning_total_s=60).rejected_share
    counts = np.random.default_rng(3).poisson(rate).astype(float)
    on_counts = summarize(run_policy(model, counts, FixedPolicy("one", 1)), model, slo_ms=q.slo.ttfab_p95_ms,
                          planning_total_s=60).rejected_share
    print(f"DES rejected {des_rej:.4f}; fluid on the rate {on_rate:.4f}, on Poisson counts {on_counts:.4f}")
    assert on_rate == pytest.approx(des_rej, abs=0.015)
    assert on_counts - des_rej > 0.02
