"""Numeric conventions shared by the plan, the deployment and the simulator.

:data:`EPS` is the slack of every ceil or floor of a ratio of floats: a quotient that lands a few
ulps off an integer (``0.3 / 0.1 == 2.9999999999999996``, ``1.1 * 100 == 110.00000000000001``)
rounds as the integer it stands for, so exact ratios stay exact; ``math.ceil(x - EPS)`` and
``math.floor(x + EPS)``. It is far below anything measured (requests, seconds, MiB, USD), so it
never moves a real value across an integer.

:data:`UNBOUNDED` is the count that stands for "no finite answer" (no fleet is safe, no
throughput to size with): larger than any fleet a plan could deploy, still an ``int``, so it
compares and prints like the counts it stands in for, and any cap below it wins.
"""

from __future__ import annotations

EPS = 1e-9
"""Slack of a ceil/floor of a ratio of floats (see the module docstring)."""

MAX_SURGE_RATIO = 1.5
"""The surge ratio's bound, exclusive (stated once: PlanInputs' field, the flags' ranges and the
tuner read it): at h = surge - 1 >= 0.5 the scale-in threshold (1 - 2h) * Q_max would be <= 0."""

UNBOUNDED = 10**6
"""An instance or copy count no deployment reaches: "infinite" where a count has no finite value."""
