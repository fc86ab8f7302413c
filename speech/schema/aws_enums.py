"""AWS enumerations the stack config accepts, snapshotted from botocore's service models (pure data).

The pure core may not import botocore (docs/design.md §2), so the values a stack setting is checked
against at preview are copied here; tests/speech/schema/test_aws_enums.py compares them with the installed
botocore's model, so a botocore upgrade that adds or drops instance types fails that test (naming
them) until this file is updated.

A value outside an enumeration is refused when the config is validated, so the preview stops with
one line naming the nearest valid values instead of deploying a typo that only CreateEndpointConfig
would refuse (minutes into ``pulumi up``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

BOTOCORE_VERSION = "1.44.8"
"""The botocore release these values were read from."""

PRODUCTION_VARIANT_INSTANCE_TYPES: tuple[str, ...] = (
    "ml.t2.medium", "ml.t2.large", "ml.t2.xlarge", "ml.t2.2xlarge", "ml.m4.xlarge", "ml.m4.2xlarge", "ml.m4.4xlarge",
    "ml.m4.10xlarge", "ml.m4.16xlarge", "ml.m5.large", "ml.m5.xlarge", "ml.m5.2xlarge", "ml.m5.4xlarge",
    "ml.m5.12xlarge", "ml.m5.24xlarge", "ml.m5d.large", "ml.m5d.xlarge", "ml.m5d.2xlarge", "ml.m5d.4xlarge",
    "ml.m5d.12xlarge", "ml.m5d.24xlarge", "ml.c4.large", "ml.c4.xlarge", "ml.c4.2xlarge", "ml.c4.4xlarge",
    "ml.c4.8xlarge", "ml.p2.xlarge", "ml.p2.8xlarge", "ml.p2.16xlarge", "ml.p3.2xlarge", "ml.p3.8xlarge",
    "ml.p3.16xlarge", "ml.c5.large", "ml.c5.xlarge", "ml.c5.2xlarge", "ml.c5.4xlarge", "ml.c5.9xlarge",
    "ml.c5.18xlarge", "ml.c5d.large", "ml.c5d.xlarge", "ml.c5d.2xlarge", "ml.c5d.4xlarge", "ml.c5d.9xlarge",
    "ml.c5d.18xlarge", "ml.g4dn.xlarge", "ml.g4dn.2xlarge", "ml.g4dn.4xlarge", "ml.g4dn.8xlarge", "ml.g4dn.12xlarge",
    "ml.g4dn.16xlarge", "ml.r5.large", "ml.r5.xlarge", "ml.r5.2xlarge", "ml.r5.4xlarge", "ml.r5.12xlarge",
    "ml.r5.24xlarge", "ml.r5d.large", "ml.r5d.xlarge", "ml.r5d.2xlarge", "ml.r5d.4xlarge", "ml.r5d.12xlarge",
    "ml.r5d.24xlarge", "ml.inf1.xlarge", "ml.inf1.2xlarge", "ml.inf1.6xlarge", "ml.inf1.24xlarge", "ml.dl1.24xlarge",
    "ml.c6i.large", "ml.c6i.xlarge", "ml.c6i.2xlarge", "ml.c6i.4xlarge", "ml.c6i.8xlarge", "ml.c6i.12xlarge",
    "ml.c6i.16xlarge", "ml.c6i.24xlarge", "ml.c6i.32xlarge", "ml.m6i.large", "ml.m6i.xlarge", "ml.m6i.2xlarge",
    "ml.m6i.4xlarge", "ml.m6i.8xlarge", "ml.m6i.12xlarge", "ml.m6i.16xlarge", "ml.m6i.24xlarge", "ml.m6i.32xlarge",
    "ml.r6i.large", "ml.r6i.xlarge", "ml.r6i.2xlarge", "ml.r6i.4xlarge", "ml.r6i.8xlarge", "ml.r6i.12xlarge",
    "ml.r6i.16xlarge", "ml.r6i.24xlarge", "ml.r6i.32xlarge", "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge",
    "ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.16xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.xlarge",
    "ml.g6.2xlarge", "ml.g6.4xlarge", "ml.g6.8xlarge", "ml.g6.12xlarge", "ml.g6.16xlarge", "ml.g6.24xlarge",
    "ml.g6.48xlarge", "ml.r8g.medium", "ml.r8g.large", "ml.r8g.xlarge", "ml.r8g.2xlarge", "ml.r8g.4xlarge",
    "ml.r8g.8xlarge", "ml.r8g.12xlarge", "ml.r8g.16xlarge", "ml.r8g.24xlarge", "ml.r8g.48xlarge", "ml.g6e.xlarge",
    "ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.8xlarge", "ml.g6e.12xlarge", "ml.g6e.16xlarge", "ml.g6e.24xlarge",
    "ml.g6e.48xlarge", "ml.g7e.2xlarge", "ml.g7e.4xlarge", "ml.g7e.8xlarge", "ml.g7e.12xlarge", "ml.g7e.24xlarge",
    "ml.g7e.48xlarge", "ml.g7.2xlarge", "ml.g7.4xlarge", "ml.g7.8xlarge", "ml.g7.12xlarge", "ml.g7.24xlarge",
    "ml.g7.48xlarge", "ml.p4d.24xlarge", "ml.c7g.large", "ml.c7g.xlarge", "ml.c7g.2xlarge", "ml.c7g.4xlarge",
    "ml.c7g.8xlarge", "ml.c7g.12xlarge", "ml.c7g.16xlarge", "ml.m6g.large", "ml.m6g.xlarge", "ml.m6g.2xlarge",
    "ml.m6g.4xlarge", "ml.m6g.8xlarge", "ml.m6g.12xlarge", "ml.m6g.16xlarge", "ml.m6gd.large", "ml.m6gd.xlarge",
    "ml.m6gd.2xlarge", "ml.m6gd.4xlarge", "ml.m6gd.8xlarge", "ml.m6gd.12xlarge", "ml.m6gd.16xlarge", "ml.c6g.large",
    "ml.c6g.xlarge", "ml.c6g.2xlarge", "ml.c6g.4xlarge", "ml.c6g.8xlarge", "ml.c6g.12xlarge", "ml.c6g.16xlarge",
    "ml.c6gd.large", "ml.c6gd.xlarge", "ml.c6gd.2xlarge", "ml.c6gd.4xlarge", "ml.c6gd.8xlarge", "ml.c6gd.12xlarge",
    "ml.c6gd.16xlarge", "ml.c6gn.large", "ml.c6gn.xlarge", "ml.c6gn.2xlarge", "ml.c6gn.4xlarge", "ml.c6gn.8xlarge",
    "ml.c6gn.12xlarge", "ml.c6gn.16xlarge", "ml.r6g.large", "ml.r6g.xlarge", "ml.r6g.2xlarge", "ml.r6g.4xlarge",
    "ml.r6g.8xlarge", "ml.r6g.12xlarge", "ml.r6g.16xlarge", "ml.r6gd.large", "ml.r6gd.xlarge", "ml.r6gd.2xlarge",
    "ml.r6gd.4xlarge", "ml.r6gd.8xlarge", "ml.r6gd.12xlarge", "ml.r6gd.16xlarge", "ml.p4de.24xlarge",
    "ml.trn1.2xlarge", "ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge", "ml.inf2.xlarge",
    "ml.inf2.8xlarge", "ml.inf2.24xlarge", "ml.inf2.48xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge",
    "ml.p5en.48xlarge", "ml.m7i.large", "ml.m7i.xlarge", "ml.m7i.2xlarge", "ml.m7i.4xlarge", "ml.m7i.8xlarge",
    "ml.m7i.12xlarge", "ml.m7i.16xlarge", "ml.m7i.24xlarge", "ml.m7i.48xlarge", "ml.c7i.large", "ml.c7i.xlarge",
    "ml.c7i.2xlarge", "ml.c7i.4xlarge", "ml.c7i.8xlarge", "ml.c7i.12xlarge", "ml.c7i.16xlarge", "ml.c7i.24xlarge",
    "ml.c7i.48xlarge", "ml.r7i.large", "ml.r7i.xlarge", "ml.r7i.2xlarge", "ml.r7i.4xlarge", "ml.r7i.8xlarge",
    "ml.r7i.12xlarge", "ml.r7i.16xlarge", "ml.r7i.24xlarge", "ml.r7i.48xlarge", "ml.c8g.medium", "ml.c8g.large",
    "ml.c8g.xlarge", "ml.c8g.2xlarge", "ml.c8g.4xlarge", "ml.c8g.8xlarge", "ml.c8g.12xlarge", "ml.c8g.16xlarge",
    "ml.c8g.24xlarge", "ml.c8g.48xlarge", "ml.r7gd.medium", "ml.r7gd.large", "ml.r7gd.xlarge", "ml.r7gd.2xlarge",
    "ml.r7gd.4xlarge", "ml.r7gd.8xlarge", "ml.r7gd.12xlarge", "ml.r7gd.16xlarge", "ml.m8g.medium", "ml.m8g.large",
    "ml.m8g.xlarge", "ml.m8g.2xlarge", "ml.m8g.4xlarge", "ml.m8g.8xlarge", "ml.m8g.12xlarge", "ml.m8g.16xlarge",
    "ml.m8g.24xlarge", "ml.m8g.48xlarge", "ml.c6in.large", "ml.c6in.xlarge", "ml.c6in.2xlarge", "ml.c6in.4xlarge",
    "ml.c6in.8xlarge", "ml.c6in.12xlarge", "ml.c6in.16xlarge", "ml.c6in.24xlarge", "ml.c6in.32xlarge",
    "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p6e-gb200.36xlarge", "ml.p5.4xlarge",
)
"""sagemaker service model, shape ``ProductionVariantInstanceType``: the instance types a production
variant (CreateEndpointConfig) accepts, in the model's order."""


def nearest(value: str, allowed: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` values of ``allowed`` closest to ``value`` (difflib's ratio), best first."""
    return difflib.get_close_matches(value, list(allowed), n=n, cutoff=0.6)


def check_instance_type(value: str, *, name_value: bool = True) -> str:
    """``value`` when SageMaker hosts it, else a ValueError naming the nearest instance types
    (``name_value=False``: the message leaves the value out, for a caller that adds it)."""
    if value in PRODUCTION_VARIANT_INSTANCE_TYPES:
        return value
    close = nearest(value, PRODUCTION_VARIANT_INSTANCE_TYPES)
    hint = (f"nearest: {', '.join(close)}" if close
            else "use one of the InstanceType values of SageMaker's ProductionVariant API (e.g. ml.g5.xlarge, ml.c7i.xlarge)")
    head = f"{value!r} is not" if name_value else "not"
    raise ValueError(f"{head} an instance type a SageMaker endpoint runs (botocore {BOTOCORE_VERSION}); {hint}")
