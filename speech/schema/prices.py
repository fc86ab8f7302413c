"""Default hourly prices of the SageMaker instance types this project deploys (pure data).

On-demand SageMaker AI real-time inference (hosting), us-east-1, USD per instance-hour, taken
2026-11-30. AWS's own pricing page (aws.amazon.com/sagemaker/pricing, "Real-Time Inference") cannot
be read from the build machine, so each figure says where it comes from; ``estimate`` marks a
figure no public source seen that day confirmed. Stacks override any of them under
``speech-endpoints:budget.prices_usd_per_hour`` (your region, your discounts, Savings Plans); the
policy pack's ``hourly-prices-usd`` defaults to the same table.
"""

from __future__ import annotations

PRICES_TAKEN = "2026-11-30"
"""When the table below was taken."""
PRICE_REGION = "us-east-1"

DEFAULT_PRICES_USD_PER_HOUR: dict[str, float] = {
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g6.xlarge": 1.167,
    "ml.g4dn.xlarge": 0.736,
    "ml.c6i.xlarge": 0.204,
    "ml.m5.xlarge": 0.23,
    # Current x86-64 CPU families: the onnx backend's instances (speech.schema.instances.FAMILIES).
    "ml.c5.xlarge": 0.204,
    "ml.c6i.large": 0.102,
    "ml.c6i.2xlarge": 0.408,
    "ml.c7i.large": 0.107,
    "ml.c7i.xlarge": 0.214,
    "ml.c7i.2xlarge": 0.428,
    "ml.c7i.4xlarge": 0.857,
    "ml.m6i.xlarge": 0.23,
    "ml.m7i.xlarge": 0.242,
    "ml.m7i.2xlarge": 0.484,
    "ml.r7i.xlarge": 0.318,
}
"""USD per instance-hour, on-demand real-time hosting, us-east-1 (sources in :data:`PRICE_SOURCES`)."""

PRICE_SOURCES: dict[str, str] = {
    "ml.g5.xlarge": "AWS list price as carried by the pack since its first release; zircon.tech, 'The real cost of "
                    "running AI models on AWS SageMaker' (us-east-1, October 2025) quotes about $1.41/h",
    "ml.g5.2xlarge": "AWS list price as carried by the pack; wring.co 'SageMaker Inference: Real-Time vs Serverless' "
                     "(March 2026) quotes $1.52/h",
    "ml.g5.4xlarge": "estimate (AWS list price as carried by the pack, not confirmed by a source seen on 2026-11-30)",
    "ml.g6.xlarge": "estimate (not confirmed by a source seen on 2026-11-30)",
    "ml.g4dn.xlarge": "estimate (AWS list price as carried by the pack, not confirmed by a source seen on 2026-11-30)",
    "ml.c6i.xlarge": "estimate (not confirmed by a source seen on 2026-11-30)",
    "ml.m5.xlarge": "estimate: the pack's figure; zircon.tech (October 2025) quotes $0.269/h for ml.m5.xlarge, "
                    "so this may be low",
    **{t: "estimate: EC2's on-demand ratio between generations (c7i about 5% above c6i, m7i 5% above m6i) "
          "applied to the c6i/m5 figures above; not confirmed by a source seen on 2026-11-30"
       for t in ("ml.c7i.large", "ml.c7i.xlarge", "ml.c7i.2xlarge", "ml.c7i.4xlarge", "ml.m7i.xlarge",
                 "ml.m7i.2xlarge", "ml.r7i.xlarge")},
    **{t: "estimate: linear in vCPUs from ml.c6i.xlarge (SageMaker prices sizes of one family in "
          "proportion); not confirmed by a source seen on 2026-11-30"
       for t in ("ml.c6i.large", "ml.c6i.2xlarge")},
    "ml.c5.xlarge": "estimate: the same as ml.c6i.xlarge, as EC2 prices c5 and c6i alike; not confirmed",
    "ml.m6i.xlarge": "estimate: the same as ml.m5.xlarge, as EC2 prices m5 and m6i alike; not confirmed",
}
"""Where each default price comes from, and which are estimates."""

HOURS_PER_DAY = 24


__all__ = ["DEFAULT_PRICES_USD_PER_HOUR", "HOURS_PER_DAY", "PRICES_TAKEN", "PRICE_REGION", "PRICE_SOURCES"]
