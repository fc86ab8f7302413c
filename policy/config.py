"""Policy config defaults, shared by the schemas (what the engine fills in) and the validators
(which apply the same defaults when a harness sends no config)."""

from __future__ import annotations

DEFAULT_HOURLY_PRICES_USD: dict[str, float] = {
    # SageMaker real-time inference, on-demand, us-east-1, USD per instance-hour (approximate list
    # prices; override hourly-prices-usd with your region's and your discounts).
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g6.xlarge": 1.167,
    "ml.g4dn.xlarge": 0.736,
    "ml.c6i.xlarge": 0.204,
    "ml.m5.xlarge": 0.23,
}
DEFAULT_ALLOWED_INSTANCE_TYPES: list[str] = sorted(DEFAULT_HOURLY_PRICES_USD)
DEFAULT_DAILY_BUDGET_USD = 10000.0
"""Sized so the reference plan fits (280 x ml.g5.xlarge x $1.408 x 24 = $9,462/day at peak):
a stack-level ceiling against runaway max capacity, not a forecast. Set your own."""
