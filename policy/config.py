"""Policy config defaults, shared by the schemas (what the engine fills in) and the validators
(which apply the same defaults when a harness sends no config)."""

from __future__ import annotations

from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR

DEFAULT_HOURLY_PRICES_USD: dict[str, float] = dict(DEFAULT_PRICES_USD_PER_HOUR)
"""SageMaker real-time inference, on-demand, us-east-1, USD per instance-hour: the program's
documented table (speech/schema/prices.py: date and source of each figure); override hourly-prices-usd
with your region's and your discounts."""
DEFAULT_ALLOWED_INSTANCE_TYPES: list[str] = sorted(DEFAULT_HOURLY_PRICES_USD)
DEFAULT_DAILY_BUDGET_USD = 10000.0
"""Sized so the reference plan fits (280 x ml.g5.xlarge x $1.408 x 24 = $9,462/day at peak):
a stack-level ceiling against runaway max capacity, not a forecast. Set your own."""
