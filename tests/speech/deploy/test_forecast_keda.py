"""Forecast floors on Kubernetes: the plan's forecast schedule renders as KEDA cron triggers
(speech.deploy.kubernetes.objects.cron_triggers), one per floor above the plan's, each window
ending where the next floor starts, every trigger valid for KEDA's cron scaler."""

from __future__ import annotations

import numpy as np
import pytest

from speech.deploy.kubernetes.objects import cron_triggers
from speech.deploy.kubernetes.rules import scaled_object_problems
from speech.plan.forecast import forecast_rate, forecast_schedule


@pytest.mark.slow  # tens of seconds (simulated days, a tune, previews or a load run on moto): make test, not test-fast
def test_forecast_floors_become_contiguous_valid_cron_triggers():
    t = np.arange(1440)
    day = 20 + 780 * (1 - np.cos(2 * np.pi * t / 1440)) / 2
    rng = np.random.default_rng(2)
    hist = np.concatenate([day * (1 + 0.05 * rng.standard_normal(1440)) for _ in range(3)])
    schedule = forecast_schedule(forecast_rate(hist, step_s=60), per_instance_rps=17.0, lead_s=320, floor=2, max_instances=80,
                                 timezone="Europe/Berlin")
    assert schedule is not None
    triggers = cron_triggers(schedule, floor=2)
    above = [f for f in schedule.floors if f.min_instances > 2]
    assert [int(tr["metadata"]["desiredReplicas"]) for tr in triggers] == [f.min_instances for f in above]
    assert len({tr["name"] for tr in triggers}) == len(triggers)
    # consecutive raised floors hand over at the same minute: no gap where KEDA would fall back to the HPA floor
    starts = {tr["metadata"]["start"] for tr in triggers}
    ends = [tr["metadata"]["end"] for tr in triggers]
    assert sum(e in starts for e in ends) >= len(triggers) - 2
    obj = {"metadata": {"name": "kokoro"}, "spec": {"scaleTargetRef": {"name": "kokoro"}, "minReplicaCount": 2,
                                                    "maxReplicaCount": 80, "triggers": triggers}}
    assert scaled_object_problems(obj) == []
