"""ttotal: a real second local process, and a SageMaker scale-out played by moto over time."""

from __future__ import annotations

import json
import sys
import time

import pytest

from bench.aws import client as aws
from bench.aws.freeze import state_path
from bench.cli.main import build_parser, main
from bench.commands import ttotal as ttotal_cmd
from bench.load.targets import HttpTarget
from bench.operations import ttotal as ttotal_ops
from bench.report.terminal import render_ttotal
from container.markers import STAGES as MARKER_STAGES
from container.markers import format_at
from speech.files import load_artifact, write_artifact
from speech.schema.artifacts import Fingerprint, QmaxArtifact, TtotalArtifact

from ..conftest import DIGEST, ENDPOINT, INSTANCE

STAGES = list(MARKER_STAGES)


def _qmax_file(tmp_path, ref_artifacts, fp: Fingerprint, transport="stream"):
    q = QmaxArtifact.model_validate({**ref_artifacts[0].model_dump(), "fingerprint": fp.model_dump(), "transport": transport})
    return write_artifact(tmp_path / "q.json", q)


@pytest.mark.slow
def test_local_process_phases_from_real_markers(synthetic_40ms, ref_artifacts, tmp_path, capsys):
    t = HttpTarget(synthetic_40ms.url)
    t.check()
    qf = _qmax_file(tmp_path, ref_artifacts, t.fingerprint())
    serve = f"{sys.executable} -m bench.load.synthetic --service-ms 40 --startup-s 0.4"
    rc = main(["ttotal", "--qmax", str(qf), "--url", synthetic_40ms.url, "--serve-cmd", serve,
               "--out", str(tmp_path / "out"), "--json", "--plot"])
    assert rc == 0, capsys.readouterr().err
    [path] = (tmp_path / "out").glob("ttotal-kokoro-82m-local-process-*.json")
    a = load_artifact(path, TtotalArtifact)
    names = [p.name for p in a.phases if p.applicable]
    assert names == ["desired_set", *STAGES, "in_service", "traffic_recovered"]
    offsets = [p.offset_s for p in a.phases if p.applicable]
    assert offsets == sorted(offsets)
    by = {p.name: p for p in a.phases}
    assert by["instance_logging"].applicable is False
    # --startup-s 0.4 is spread over the markers: weights_ready..ready sleep ~0.27 s, so at least 0.2 s
    # apart; the upper bound only catches a unit slip (milliseconds read as seconds), never a busy machine
    assert 0.2 <= by["ready"].offset_s - by["framework_init"].offset_s <= 60.0
    assert a.measured_total_s == by["traffic_recovered"].offset_s
    assert path.with_suffix(".png").exists()


def test_qmax_of_another_fingerprint_is_refused(synthetic_40ms, ref_artifacts, tmp_path, capsys):
    qf = _qmax_file(tmp_path, ref_artifacts, ref_artifacts[0].fingerprint)  # g5xlarge, not this server
    rc = main(["ttotal", "--qmax", str(qf), "--url", synthetic_40ms.url, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "measured on g5xlarge-8b1b96bc" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_qmax_of_another_transport_is_refused(synthetic_40ms, ref_artifacts, tmp_path, capsys):
    t = HttpTarget(synthetic_40ms.url)
    t.check()
    qf = _qmax_file(tmp_path, ref_artifacts, t.fingerprint(), transport="bidirectional")
    rc = main(["ttotal", "--qmax", str(qf), "--url", synthetic_40ms.url, "--out", str(tmp_path / "out")])
    assert rc == 2 and "bidirectional" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_sagemaker_mismatch_refused_before_freezing(deployed, ref_artifacts, tmp_path, capsys):
    qf = write_artifact(tmp_path / "q.json", ref_artifacts[0])  # ml.g5.xlarge; the endpoint runs ml.m5.large
    before = aws.scalable_target(deployed, ENDPOINT)
    rc = main(["ttotal", "--qmax", str(qf), "--endpoint", ENDPOINT, "--out", str(tmp_path / "out")])
    assert rc == 2 and "g5xlarge" in capsys.readouterr().err
    assert aws.scalable_target(deployed, ENDPOINT) == before and not state_path(None, ENDPOINT).exists()
    assert not (tmp_path / "out").exists()


class World:
    """Plays a real scale-out on moto: Updating for a while, a new instance's log stream with the
    container's stage markers, then InService with one more instance."""

    def __init__(self, sess, group: str):
        from moto.backends import get_backend

        self.sm = get_backend("sagemaker")["123456789012"]["us-east-1"]
        self.logs = sess.client("logs")
        self.group = group
        self.ticks = 0

    def endpoint(self):
        return self.sm.endpoints[ENDPOINT]

    def sleep(self, s: float) -> None:
        time.sleep(s)
        self.ticks += 1
        if self.ticks == 3:
            start = time.time()
            self.logs.create_log_stream(logGroupName=self.group, logStreamName="AllTraffic/i-new")
            events = [{"timestamp": int(start * 1000), "message": "starting serve"}]
            for i, st in enumerate(STAGES):
                at = start + 0.05 * (i + 1)
                msg = json.dumps({"event": "stage", "stage": st, "at": format_at(at), "elapsed_s": round(0.05 * (i + 1) + 0.01, 3)})
                events.append({"timestamp": int(at * 1000), "message": msg})
            self.logs.put_log_events(logGroupName=self.group, logStreamName="AllTraffic/i-new", logEvents=events)
        if self.ticks == 8:
            ep = self.endpoint()
            ep.endpoint_status = "InService"
            ep.production_variants[0]["CurrentInstanceCount"] = ep.production_variants[0]["DesiredInstanceCount"]


def test_sagemaker_scale_out_phases_in_order(deployed, ref_artifacts, synthetic_40ms, tmp_path, monkeypatch):
    from moto.sagemaker.models import SageMakerModelBackend

    real_update = SageMakerModelBackend.update_endpoint_weights_and_capacities

    def updating(self, endpoint_name, desired_weights_and_capacities):
        # moto applies a new count at once; a real endpoint is Updating for minutes.
        old = self.endpoints[endpoint_name].production_variants[0].get("CurrentInstanceCount")
        arn = real_update(self, endpoint_name, desired_weights_and_capacities)
        ep = self.endpoints[endpoint_name]
        ep.endpoint_status = "Updating"
        ep.production_variants[0]["CurrentInstanceCount"] = old
        return arn

    monkeypatch.setattr(SageMakerModelBackend, "update_endpoint_weights_and_capacities", updating)
    group = ttotal_ops.log_group(ENDPOINT)
    logs = deployed.client("logs")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-old")
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/i-old",
                        logEvents=[{"timestamp": int(time.time() * 1000) - 60000, "message": "old instance"}])
    before = aws.scalable_target(deployed, ENDPOINT)
    qf = _qmax_file(tmp_path, ref_artifacts, Fingerprint.of(INSTANCE, DIGEST))
    world = World(deployed, group)
    args = build_parser().parse_args([
        "ttotal", "--qmax", str(qf), "--endpoint", ENDPOINT, "--poll-s", "0.05", "--recover-window-s", "0.3",
        "--probe-concurrency", "1", "--timeout-s", "30", "--out", str(tmp_path / "out"), "--json"])
    # The probe goes to a real local server: moto has no response streaming.
    rc = ttotal_cmd.run(args, session=deployed, sleep=world.sleep, probe_target=HttpTarget(synthetic_40ms.url))
    assert rc == 0
    a = load_artifact(next((tmp_path / "out").glob("ttotal-kokoro-82m-forced-desired-*.json")), TtotalArtifact)
    names = [p.name for p in a.phases]
    assert names[0] == "desired_set" and names[-2:] == ["in_service", "traffic_recovered"]
    assert [n for n in names if n in STAGES] == STAGES and "instance_logging" in names
    offsets = [p.offset_s for p in a.phases]
    assert offsets == sorted(offsets) and offsets[-1] > 0
    by = {p.name: p for p in a.phases}
    assert by["in_service"].offset_s >= by["ready"].offset_s
    assert "i-new" in by["instance_logging"].source
    # scaling restored exactly, the extra instance given back, no state left behind
    after = aws.scalable_target(deployed, ENDPOINT)
    assert (after["MinCapacity"], after["MaxCapacity"], aws.suspended(after)) == (
        before["MinCapacity"], before["MaxCapacity"], aws.suspended(before))
    assert aws.variant_counts(aws.describe_endpoint(deployed, ENDPOINT))[1] == 1
    assert not state_path(None, ENDPOINT).exists()


def test_recovered_at_needs_a_full_window_within_threshold():
    samples = [(t / 10, 500.0) for t in range(0, 50)] + [(5 + t / 10, 50.0) for t in range(0, 50)]
    # p95 tolerates one slow sample in a window of 21, so the first qualifying window starts at 4.9
    assert ttotal_ops.recovered_at(samples, 100.0, 2.0, 0.0, 10.0) == pytest.approx(4.9)
    assert ttotal_ops.recovered_at(samples, 100.0, 2.0, 6.0, 10.0) == pytest.approx(6.0)
    assert ttotal_ops.recovered_at(samples, 10.0, 2.0, 0.0, 10.0) is None


def test_report_shows_the_plans_t_total_and_the_dominant_phase(ref_artifacts, plan_inputs, tmp_path, capsys):
    """One source: the ttotal report prints the planning T_total bench plan computes, and names the
    phase that dominates (the reference: provisioning + image pull, 180.8 of 260.2 s)."""
    from speech.plan.realtime import build_plan

    q, t = ref_artifacts
    text = render_ttotal(t)
    plan = build_plan(q, t, plan_inputs)
    assert f"reaction bound {plan.t_total.reaction_bound_s:g} s" in text
    assert f"planning {plan.t_total.planning_s:.3f} s" in text
    from bench.report.text import dominant_phase

    d = dominant_phase(t)
    assert d is not None and d.name == "instance_logging" and d.seconds == pytest.approx(180.835)
    assert d.share == pytest.approx(180.835 / 260.248)
    assert "dominant phase: instance_logging" in text and "smaller image" in text
    # The flags that once computed a second, different T_total are gone.
    # main(argv) -> int: a usage error is exit 2, not a SystemExit.
    assert main(["ttotal", "--qmax", "q.json", "--url", "http://x", "--metric-period-s", "60"]) == 2
    assert "unrecognized arguments: --metric-period-s" in capsys.readouterr().err
