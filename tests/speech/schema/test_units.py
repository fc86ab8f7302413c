"""EPS and UNBOUNDED (speech.schema.units) as the plan uses them."""

from __future__ import annotations

import math

from speech.plan.formulas import instances_for, littles_law_instances, min_safe_instances
from speech.schema.units import EPS, UNBOUNDED


def test_a_ratio_a_few_ulps_above_an_integer_rounds_as_the_integer():
    rate = 0.1 * 3  # 0.30000000000000004
    assert rate / 0.1 > 3 and math.ceil(rate / 0.1) == 4  # a bare ceil would plan 4 instances
    assert instances_for(rate, 0.1) == 3
    assert instances_for(rate + 1e-6, 0.1) == 4  # a real excess still rounds up
    assert littles_law_instances(peak_rps=rate, service_mean_s=1.0, c_max=0.1) == 3


def test_no_finite_answer_is_unbounded_and_loses_to_any_cap():
    assert instances_for(5.0, 0.0) == UNBOUNDED
    assert min_safe_instances(c_max=10.0, c_min=10.0) == UNBOUNDED  # no scale-in is ever safe
    assert littles_law_instances(peak_rps=5.0, service_mean_s=1.0, c_max=0.0) == UNBOUNDED
    assert min(UNBOUNDED, 400) == 400 and isinstance(UNBOUNDED, int)


def test_eps_is_far_below_any_measured_quantity():
    # One request in a million-request fleet, one microsecond, one byte in a MiB: all far above EPS.
    assert EPS < 1e-6 * 1e-2
