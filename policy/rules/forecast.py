"""forecast-floors-fresh: scheduled floors from a forecast (bench forecast) deploy only within the
forecast's horizon (speech.plan.forecast.stale_forecast)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from policy.recompute import NoProvenance, ProvenanceCache
from policy.resources import Stack
from policy.rules.common import StackViolations, scaled_provenance, scaled_variants
from speech.plan.forecast import stale_forecast


def rule_forecast_fresh(stack: Stack, cfg: Mapping[str, Any], cache: ProvenanceCache) -> StackViolations:
    now = datetime.now(UTC)
    for s in scaled_variants(stack):
        try:
            prov = scaled_provenance(s, cache)
        except NoProvenance:
            continue  # scaling-requires-measured-provenance says why
        schedule = prov.plan.schedule if prov.plan is not None else None
        if schedule is None or schedule.forecast is None:
            continue
        problem = stale_forecast(schedule.forecast, now)
        if problem is not None:
            yield f"{s.target.label}: {problem}", s.target.urn
