"""The search policy and schedules, on a known curve (no servers: measure is a pure function)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.errors import UsageError
from bench.load.ladder import estimate, geometric_levels, parse_levels, request_mix, search
from speech.schema.artifacts import LadderLevel


def level(c: int, p95: float, slo: float) -> LadderLevel:
    return LadderLevel(concurrency=c, completed=10, ok=10, ttfab_p50_ms=p95, ttfab_p95_ms=p95, ttfab_p99_ms=p95,
                       throughput_rps=1.0, client_concurrency_mean=c, meets_slo=p95 <= slo)


@given(true_q=st.integers(min_value=0, max_value=300))
def test_search_finds_the_exact_qmax_bracketed(true_q):
    slo = 1000.0
    s = slo / (true_q + 0.5)  # p95 = c x S crosses the SLO between true_q and true_q + 1
    res = search(geometric_levels(1, 2, 512), lambda c: level(c, c * s, slo))
    assert res.q_max == true_q and res.first_failing == true_q + 1 and res.bracketed
    # bracketing + bisection: far fewer levels than a linear ladder
    assert len(res.order) <= 10 + math.ceil(math.log2(max(2, true_q)))
    assert [lv.concurrency for lv in res.levels] == sorted(set(res.order))


def test_never_failing_ladder_is_a_lower_bound():
    res = search([1, 2, 4], lambda c: level(c, 1.0, 10.0))
    assert res.q_max == 4 and not res.bracketed and res.first_failing is None


def test_tolerance_stops_refinement_early():
    slo = 3000.0
    res = search(geometric_levels(1, 2, 64), lambda c: level(c, c * 61.3, slo), tolerance=0.05)
    assert res.first_failing - res.q_max <= max(1, math.floor(0.05 * res.q_max))
    assert res.q_max <= 48 < res.first_failing


@pytest.mark.parametrize("bad", ["1,2,2", "4,2", "0,1", "a,b", ""])
def test_levels_must_strictly_increase(bad):
    with pytest.raises(UsageError):
        parse_levels(bad)


def test_geometric_and_estimate():
    assert geometric_levels(1, 2, 100) == [1, 2, 4, 8, 16, 32, 64]
    assert geometric_levels(1, 1.5, 10) == [1, 2, 3, 5, 8]
    e = estimate([1, 2, 4, 8], 10.0)
    assert e.levels_max == 4 + 2 and e.seconds_max == 60.0


def test_request_mix_records_sizes():
    texts, mix = request_mix("mixed")
    assert mix.count == len(texts) and mix.chars_min < 30 < mix.chars_mean < mix.chars_max
