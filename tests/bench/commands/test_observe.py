"""``bench observe`` against moto-filled CloudWatch histories: a plan that holds, one that drifted,
and a window with no data.

moto does not implement Application Auto Scaling's DescribeScalingActivities (it raises
NotImplementedError); the fixture adds that one response to moto's own Application Auto Scaling
responder, shaped as botocore's service model describes it, so the real paginated call is made."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta

import pytest

from bench.aws import client as aws
from bench.cli.main import main
from bench.operations.observe import EMF_NAMESPACE
from container import telemetry
from speech.files import load_artifact, write_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint
from speech.schema.plan_artifacts import CalibrationArtifact

from ..conftest import DIGEST, ENDPOINT, INSTANCE, MODEL


@pytest.fixture
def activities(monkeypatch):
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse

    listed: list[dict] = []

    def describe_scaling_activities(self):
        body = json.loads(self.body)
        rid = body.get("ResourceId")
        return json.dumps({"ScalingActivities": [a for a in listed if rid in (None, a["ResourceId"])]})

    monkeypatch.setattr(ApplicationAutoScalingResponse, "describe_scaling_activities", describe_scaling_activities,
                        raising=False)
    return listed


def activity(minutes_ago: float, desired: int, policy: str) -> dict:
    at = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).timestamp()
    return {
        "ActivityId": f"a-{minutes_ago}", "ServiceNamespace": "sagemaker", "ResourceId": aws.resource_id(ENDPOINT),
        "ScalableDimension": aws.DIMENSION, "Description": f"Setting desired instance count to {desired}.",
        "Cause": f"monitor alarm {ENDPOINT}-x in state ALARM triggered policy {ENDPOINT}-{policy}",
        "StartTime": at, "EndTime": at + 5, "StatusCode": "Successful",
    }


@pytest.fixture
def setup(deployed, ref_artifacts, plan_inputs, tmp_path, activities):
    """Artifacts of the deployed endpoint under tmp/artifacts, the plan built from them."""
    fp = Fingerprint.of(INSTANCE, DIGEST)
    q, t = (a.model_copy(update={"fingerprint": fp}) for a in ref_artifacts)
    arts = tmp_path / "artifacts"
    qf = write_artifact(arts / "qmax-kokoro-82m-stream-m5large-abababab.json", q)
    write_artifact(arts / "ttotal-kokoro-82m-forced-desired-m5large-abababab.json", t)
    plan = build_plan(q, t, plan_inputs)
    pf = write_artifact(tmp_path / "plan-kokoro-82m.json", plan)
    return deployed, plan, pf, qf, arts, activities


def emf_history(sess, minutes: int, occupancy: float, ttfab_p95_ms: float, admitted: int, rejected: int) -> None:
    """What the container's EMF lines become in CloudWatch: one value per minute over the last hour."""
    cw = sess.client("cloudwatch")
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    for k in range(2, minutes + 2):
        ts = end - timedelta(minutes=k)
        cw.put_metric_data(Namespace=EMF_NAMESPACE, MetricData=[
            {"MetricName": name, "Value": value, "Timestamp": ts, "Dimensions": [
                {"Name": k, "Value": v} for k, v in telemetry.dimensions(ENDPOINT, "AllTraffic", MODEL).items()]}
            for name, value in (("ConcurrentRequests", occupancy), ("TTFABp95", ttfab_p95_ms),
                                ("Admitted", admitted), ("Rejected", rejected))
        ])


def _observe(capsys, pf, arts, out, *extra) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["observe", "--plan", str(pf), "--endpoint", ENDPOINT, "--since", "1h", "--artifacts", str(arts),
               "--out", str(out), *extra])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_plan_that_holds(setup, tmp_path, capsys):
    sess, plan, pf, qf, arts, listed = setup
    # 20 in flight per instance, p95 within a few % of the ladder's 1129 ms there, no rejections.
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=1000, rejected=0)
    listed.append(activity(30, 2, "scale-out"))
    before = aws.read_deployed(sess, ENDPOINT)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json")
    assert rc == 0, err
    c = CalibrationArtifact.model_validate_json(out)
    assert c.verdict == "holds" and c.recommendations == []
    [lvl] = [o for o in c.occupancy if o.judged]
    assert lvl.concurrency == 20 and lvl.periods == 40 and lvl.observed_ttfab_p95_ms == 1150.0
    assert lvl.ladder_ttfab_p95_ms == pytest.approx(1129.3)
    assert c.rejections.admitted == 40_000 and c.rejections.rejected == 0
    assert [e.direction for e in c.scaling.events] == ["out"] and c.scaling.ok
    assert c.provenance.target == f"sagemaker:{ENDPOINT}" and c.schema_version == 1
    [path] = (tmp_path / "out").glob("calibration-kokoro-82m-*.json")
    assert load_artifact(path, CalibrationArtifact) == c
    # Read-only: the deployed scaling is exactly what it was.
    after = aws.read_deployed(sess, ENDPOINT)
    assert (after.target, after.policies) == (before.target, before.policies)


def test_plan_that_drifted_recommends_the_exact_plan_command(setup, tmp_path, capsys):
    sess, plan, pf, qf, arts, listed = setup
    # At 15 in flight (below C_scale_max 15.99) the ladder promised 0.85 s; the endpoint took 3.4 s.
    emf_history(sess, 30, occupancy=15.0, ttfab_p95_ms=3400.0, admitted=950, rejected=50)
    listed += [activity(30, 1, "scale-in"), activity(28, 2, "scale-out")]  # given back, needed 2 min later
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json", "--stack", "dev")
    assert rc == 1, err
    c = CalibrationArtifact.model_validate_json(out)
    assert c.verdict == "drifted"
    by = {f.name: f for f in c.findings}
    assert by["latency"].level == "stop" and "exceeds the SLO 3000 ms" in by["latency"].message
    assert by["rejections"].level == "warn" and "5.00%" in by["rejections"].message
    assert by["scaling"].level == "warn" and c.scaling.flaps == 1
    derate = next(r for r in c.recommendations if r.command and "--qmax-derate" in r.command)
    argv = shlex.split(derate.command)
    assert argv[:4] == ["python", "-m", "bench", "plan"]
    assert argv[argv.index("--qmax") + 1] == str(qf)
    assert argv[argv.index("--qmax-derate") + 1] == "0.9" and argv[argv.index("--stack") + 1] == "dev"
    assert argv[argv.index("--peak-rps") + 1] == "50" and argv[argv.index("--slo-ms") + 1] == "3000"
    assert "Q_max x 0.9" in derate.message
    floor = next(r for r in c.recommendations if r.command and "--min-instances 3" in r.command)
    assert "flapped" in floor.message
    # The recommended command runs as printed and plans Q_max 45.
    capsys.readouterr()
    assert main([*argv[3:argv.index("--stack")], "--out", str(tmp_path / "replan"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["q_max"] == 45


def test_text_report_names_verdict_and_command(setup, tmp_path, capsys):
    sess, plan, pf, qf, arts, listed = setup
    emf_history(sess, 10, occupancy=15.0, ttfab_p95_ms=3400.0, admitted=1000, rejected=0)
    rc, out, _ = _observe(capsys, pf, arts, tmp_path / "out")
    assert rc == 1 and "verdict: DRIFTED" in out and "--qmax-derate 0.9" in out and "wrote " in out


def test_window_without_data_is_exit_2_and_writes_nothing(setup, tmp_path, capsys):
    sess, plan, pf, qf, arts, listed = setup
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json")
    # Under --json the failure is one JSON object on stdout, nothing on stderr.
    error = json.loads(out)["error"]
    assert rc == 2 and err == "" and error["type"] == "UsageError" and error["exit_code"] == 2
    assert error["message"].startswith("no data for") and "widen --since" in error["message"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,needle", [
    (["--since", "2y"], "--since '2y'"),
    (["--since", "30d"], "at most 15 days"),
    (["--artifacts", "/nonexistent"], "pass --qmax FILE"),
])
def test_bad_input_exit_2(setup, tmp_path, capsys, argv, needle):
    sess, plan, pf, qf, arts, listed = setup
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", *argv)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_qmax_that_is_not_the_plans_is_refused(setup, tmp_path, capsys, ref_artifacts):
    sess, plan, pf, qf, arts, listed = setup
    other = write_artifact(tmp_path / "other.json", ref_artifacts[0])  # the g5 fingerprint: another sha256
    rc, _, err = _observe(capsys, pf, arts, tmp_path / "out", "--qmax", str(other))
    assert rc == 2 and "is not the one the plan was built from" in err


def test_a_plan_with_a_promise_is_compared_with_what_happened(setup, tmp_path, capsys):
    from speech.schema.config import Promise

    sess, plan, pf, qf, arts, listed = setup
    promised = plan.model_copy(update={"promise": Promise(
        slo_share=0.999, rejected_share=0.001, instance_hours=4900.0, cost_vs_floor=1.6, trace_sha256="d" * 64,
        seed=7, simulator_version="sim-2")})
    pf = write_artifact(tmp_path / "plan-kokoro-82m.json", promised)
    # 2 % refused where 0.1 % was promised.
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=980, rejected=20)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json")
    c = CalibrationArtifact.model_validate_json(out)
    f = next(f for f in c.findings if f.name == "promise")
    assert f.level == "warn" and "refused 2.00% observed vs 0.10% promised" in f.message and "seed 7" in f.message
    assert c.verdict == "drifted"
    assert "low end" not in f.message  # a promise without draws has no interval to fall below


def test_production_below_the_promises_low_end_is_said(setup, tmp_path, capsys):
    """A promise from bench tune --draws: 0.3 % refused is within the refused-share slack, but it
    leaves at most 99.70 % within the SLO, below the lowest draw's 99.80 %."""
    from speech.schema.config import Promise

    sess, plan, pf, qf, arts, listed = setup
    promise = Promise(slo_share=0.999, rejected_share=0.002, instance_hours=4900.0, cost_vs_floor=1.1,
                      trace_sha256="d" * 64, seed=7, simulator_version="sim-3", slo_share_low=0.998,
                      slo_share_high=0.9995, instance_hours_low=4800.0, instance_hours_high=5000.0)
    pf = write_artifact(tmp_path / "plan-kokoro-82m.json", plan.model_copy(update={"promise": promise}))
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=997, rejected=3)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json")
    f = next(f for f in CalibrationArtifact.model_validate_json(out).findings if f.name == "promise")
    assert f.level == "warn" and "(lowest 99.80%, highest 99.95% over its draws)" in f.message
    assert "production answered 99.70% of its requests" in f.message and "BELOW the promise's low end 99.80%" in f.message
    # within the interval: no such warning
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=9990, rejected=10)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out2", "--json")
    f = next(f for f in CalibrationArtifact.model_validate_json(out).findings if f.name == "promise")
    assert "BELOW" not in f.message and "(lowest 99.80%, highest 99.95% over its draws)" in f.message


def test_production_is_held_to_the_promises_bound_not_its_lowest_draw(setup, tmp_path, capsys):
    """With a bound (slo_share_bound) the promise for unseen traffic is the bound: 99.70 % answered
    is below the lowest draw (99.80 %), which an unseen day does now and then, and above the bound
    (99.60 %): no warning; another window (the history adds up: 98.85 % answered over both) is
    below the bound: the warning names it."""
    from speech.schema.config import Promise

    sess, plan, pf, qf, arts, listed = setup
    promise = Promise(slo_share=0.999, rejected_share=0.002, instance_hours=4900.0, cost_vs_floor=1.1,
                      trace_sha256="d" * 64, seed=7, simulator_version="sim-3", slo_share_low=0.998,
                      slo_share_high=0.9995, slo_share_bound=0.996, instance_hours_low=4800.0, instance_hours_high=5000.0)
    pf = write_artifact(tmp_path / "plan-kokoro-82m.json", plan.model_copy(update={"promise": promise}))
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=997, rejected=3)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out", "--json")
    f = next(f for f in CalibrationArtifact.model_validate_json(out).findings if f.name == "promise")
    assert "BELOW" not in f.message
    emf_history(sess, 40, occupancy=20.0, ttfab_p95_ms=1150.0, admitted=980, rejected=20)
    rc, out, err = _observe(capsys, pf, arts, tmp_path / "out2", "--json")
    f = next(f for f in CalibrationArtifact.model_validate_json(out).findings if f.name == "promise")
    assert f.level == "warn" and "BELOW the promise's low end 99.60% (the share it promised for traffic the tuner did not see)" in f.message
