"""benchmarks/reactive_bound.py's bookkeeping: which setting the tuner's rule would take and which
hindsight would. (The grid itself runs thousands of simulated hours: a benchmark, not a test.)"""
from __future__ import annotations

import math

from benchmarks import reactive_bound as rb

TARGET = 0.995


def _result(hours: float, share: float) -> tuple:
    # (instance-hours, SLO share, block requests, block within): 24 equal blocks at the draw's share
    return hours, share, (100.0,) * 24, (100.0 * share,) * 24


def test_each_setting_is_costed_against_each_draws_own_floor_and_judged_apart_from_its_training():
    grid = [(10, 0.0, 60), (20, 0.0, 60)]
    seeds = [1, 2, 3, 4, 5, 6, 7]
    floors = {s: 10.0 + s for s in seeds}
    results = ([_result(floors[s] * 1.5, 0.999) for s in seeds[:5]] + [_result(floors[6] * 2.0, 0.999),
                                                                       _result(floors[7] * 1.0, 0.990)]
               + [_result(floors[s] * 3.0, 0.9999) for s in seeds])
    cheap, dear = rb._settings(results, grid, seeds, [1, 2, 3, 4, 5], floors)
    assert (cheap.floor, dear.floor) == (10, 20)
    assert math.isclose(cheap.train_x, 1.5) and math.isclose(cheap.judged_x, 1.5)  # mean of 2.0 and 1.0
    assert cheap.judged_below == 1 and math.isclose(cheap.judged_low, 0.990)
    assert dear.judged_below == 0 and math.isclose(dear.judged_x, 3.0)
    # identical shares on five training draws: no spread, the bound is the lowest draw
    assert math.isclose(cheap.train_bound, 0.999, abs_tol=1e-9)


def _setting(floor: int, train_x: float, bound: float, judged_x: float, below: int) -> rb.Setting:
    return rb.Setting(floor, 0.0, 60, train_x=train_x, train_bound=bound, judged_x=judged_x,
                      judged_low=0.99 if below else 0.998, judged_below=below)


def test_the_rule_takes_the_cheapest_kept_bound_and_hindsight_the_cheapest_that_kept_every_judged_draw():
    found = [_setting(1, 1.10, 0.990, 1.10, 3),   # cheapest, its bound misses: neither takes it
             _setting(2, 1.30, 0.996, 1.25, 1),   # the rule's pick (cheapest kept bound), missed one draw
             _setting(3, 1.40, 0.997, 1.35, 0),   # hindsight's pick: cheapest that kept all judged draws
             _setting(4, 1.50, 0.999, 1.45, 0)]
    chosen, best = rb.pick(found, TARGET)
    assert chosen.floor == 2 and best.floor == 3
    assert rb.pick([found[0]], TARGET) == (None, None)
