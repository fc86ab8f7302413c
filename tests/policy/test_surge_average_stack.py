"""A plan with ``surge_average_share`` (the surge alarm on the Average of ConcurrentRequestsPerModel,
target tracking at Q_max) through the stack: the program deploys what the simulator ran, and the
pack, which compares every scaling resource with the plan's spec, passes it and refuses the
Maximum where the plan says Average."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.check import preview_resources
from tests.policy.policy_edits import messages, named
from tests.stack_files import embedded_config

ROOT = Path(__file__).resolve().parents[2]
SHARE = 0.45


@pytest.fixture(scope="module")
def _resources(tmp_path_factory):
    config = embedded_config(ROOT / "Pulumi.dev.yaml")
    config["speech-endpoints:models"]["kokoro-82m"]["plan"]["surge_average_share"] = SHARE
    path = tmp_path_factory.mktemp("avg") / "Pulumi.avg.yaml"
    path.write_text(json.dumps({"config": config}))
    resources, _ = preview_resources(path, "avg")
    return resources


def test_the_stack_deploys_the_average_surge(_resources):
    alarm = named(_resources, "kokoro-82m-surge-alarm").props
    # the reference Q_max is 50 in CloudWatch units (ratio 1): the threshold is the share of it
    assert (alarm["statistic"], alarm["threshold"]) == ("Average", SHARE * 50)
    surge = named(_resources, "kokoro-82m-surge").props["stepScalingPolicyConfiguration"]
    assert surge["metricAggregationType"] == "Average"
    tracking = named(_resources, "kokoro-82m-scale-out").props["targetTrackingScalingPolicyConfiguration"]
    assert tracking["targetValue"] == 50.0  # Q_max: the gate holds concurrency there, it never acts
    # the scale-in alarm keeps the Maximum: every instance low, not the mean
    assert named(_resources, "kokoro-82m-scale-in-alarm").props["statistic"] == "Maximum"


def test_the_pack_passes_it_and_refuses_the_maximum_in_its_place(pack, _resources):
    assert not messages(pack.check(_resources), "scaling-matches-plan", "mandatory")
    import copy

    edited = copy.deepcopy(_resources)
    named(edited, "kokoro-82m-surge-alarm").props["statistic"] = "Maximum"
    [msg] = messages(pack.check(edited), "scaling-matches-plan", "mandatory")
    assert "Average" in msg
