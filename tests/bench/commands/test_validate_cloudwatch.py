"""``bench validate --live`` on SageMaker checks the deployed target in CloudWatch units: moto plays
the control plane and CloudWatch (ConcurrentRequestsPerModel published a poll late), the load goes
to a real local server (moto has no response streaming)."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime

import pytest

from bench.aws import client as aws
from bench.cli.main import build_parser
from bench.commands import validate as validate_cmd
from bench.load.synthetic import SyntheticServer
from bench.load.targets import HttpTarget
from bench.operations.validate import cloudwatch_units_issue
from speech.files import write_artifact

from ..conftest import ENDPOINT


class LateMetrics:
    """On the first poll that finds nothing, CloudWatch publishes ``value`` for the last 30 s."""

    def __init__(self, sess, value: float):
        self.cw = sess.client("cloudwatch")
        self.value = value
        self.sleeps = 0

    def sleep(self, s: float) -> None:
        self.sleeps += 1
        if self.sleeps == 1:
            now = time.time()
            self.cw.put_metric_data(Namespace="AWS/SageMaker", MetricData=[
                {"MetricName": aws.METRIC, "Value": self.value, "Timestamp": datetime.fromtimestamp(t, tz=UTC),
                 "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": "AllTraffic"}]}
                for t in range(math.floor((now - 30) / 10) * 10, math.floor(now / 10) * 10 + 1, 10)
            ])


@pytest.mark.parametrize("cloudwatch_per_request", [1.0, 2.0])
@pytest.mark.slow
def test_live_reads_the_target_in_cloudwatch_units(deployed, ref_plan, tmp_path, capsys, cloudwatch_per_request):
    plan_file = write_artifact(tmp_path / "plan.json", ref_plan)
    c_ok = round(0.8 * ref_plan.thresholds.c_scale_max)  # 13 in flight on the one instance (target 15.99)
    metrics = LateMetrics(deployed, cloudwatch_per_request * c_ok)
    args = build_parser().parse_args([
        "validate", "--plan", str(plan_file), "--endpoint", ENDPOINT, "--live", "--mix", "short", "--settle-s", "0.2",
        "--measure-s", "1", "--poll-s", "0.01", "--cloudwatch-wait-s", "10", "--json"])
    with SyntheticServer(service_ms=10, queue_max=ref_plan.queue_max_depth) as s:
        validate_cmd.run(args, session=deployed, load_target=HttpTarget(s.url), sleep=metrics.sleep)
    out = json.loads(capsys.readouterr().out)
    assert metrics.sleeps >= 1  # the first read found nothing and was retried
    row = out["live"][0]
    assert row["cloudwatch_max"] == cloudwatch_per_request * c_ok
    assert row["client_inflight_per_instance"] == pytest.approx(c_ok, rel=0.1)
    units = [i["message"] for i in out["issues"] if i["kind"] == "cloudwatch_units"]
    if cloudwatch_per_request == 1.0:
        assert units == []
    else:
        [msg] = units
        c_max = ref_plan.thresholds.c_scale_max
        assert "the plan's 1.000" in msg and f"not at C_scale_max {c_max:g}" in msg and "re-run bench qmax" in msg
        acts_at = float(msg.split("acts at ")[1].split(" ")[0])
        assert acts_at == pytest.approx(c_max / 2, rel=0.1)
    # Scaling was frozen for the load and restored.
    target = aws.scalable_target(deployed, ENDPOINT)
    assert not any(aws.suspended(target).values())


def test_units_check_is_quiet_within_tolerance_and_names_the_trigger_point(ref_plan):
    assert cloudwatch_units_issue(ref_plan, 30.0, 33.0) is None  # ratio 1.1, within 20 %
    issue = cloudwatch_units_issue(ref_plan, 30.0, 15.0)  # ratio 0.5: acts at 2 x the target
    want = f"acts at {2 * ref_plan.thresholds.c_scale_max:.1f} in flight per instance"
    assert issue is not None and want in issue.message
