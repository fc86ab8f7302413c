"""The forecast artifact ``bench forecast`` writes: the next day's scheduled floors from a seasonal
forecast of the user's request-rate history, with the curves they came from (pure pydantic)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from speech.schema.artifacts import SCHEMA_VERSION, Frozen
from speech.schema.config import FloorSchedule


class ForecastArtifact(Frozen):
    """Result of ``bench forecast``. ``schedule`` is what ``bench plan --floors-from`` puts in the
    plan inputs (``schedule.forecast`` carries the provenance the policy pack checks)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["forecast"] = "forecast"
    history: str
    """The history as given (a trace spec, or cloudwatch:PATH)."""
    history_hours: float
    plan_sha256: str
    """The plan whose per-instance rate and planning T_total sized the floors."""
    per_instance_rps: float
    lead_s: float
    start_minute: int
    """Minute of the day (in the schedule's time zone) the forecast curves start at; of the week from
    Monday 00:00 for a weekly forecast (``--season-days 7``, curves a week long)."""
    point_rps: list[float]
    """The forecast's mean rate per minute over the horizon."""
    upper_rps: list[float]
    """Its upper quantile per minute: what the floors are sized for."""
    last_season_rps: list[float]
    """The history's last season, per minute (for the plot beside the forecast)."""
    schedule: FloorSchedule | None
    """None: no minute of the forecast needs more than the plan's floor."""
    created_at: datetime | None = None
    tool: str = Field("speech.plan.forecast")
