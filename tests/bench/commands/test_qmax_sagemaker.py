"""qmax on SageMaker, with moto in-process as the control plane and CloudWatch, played over time.

The ladder's requests go to a real local server (bench.load.synthetic): moto has no response
streaming. Everything else (pinning, waiting for one instance, CloudWatch polling, restoring) runs
the real code against moto's real APIs; where moto differs from AWS the test drives its backend
the way AWS would behave (an update that takes a while, metrics that arrive late).
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime

import pytest

from bench.aws import client as aws
from bench.aws.freeze import state_path
from bench.cli.main import build_parser, main
from bench.commands import qmax as qmax_cmd
from bench.load.targets import HttpTarget
from speech.files import load_artifact, write_artifact
from speech.schema.artifacts import Fingerprint, QmaxArtifact, TtotalArtifact

from ..conftest import DIGEST, ENDPOINT, INSTANCE, REF, create_endpoint

ORIGINAL = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": False}


@pytest.fixture
def fleet(aws_env, monkeypatch):
    """A 3-instance endpoint with scaling registered (min 3, max 7). Updates take a few polls, as
    on AWS (moto applies a new count at once): the endpoint is Updating with the old count until
    :meth:`World.sleep` has run ``update_ticks`` times."""
    from moto.sagemaker.models import SageMakerModelBackend

    create_endpoint(aws_env, instances=3)
    aws_env.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=aws.NAMESPACE, ResourceId=aws.resource_id(ENDPOINT), ScalableDimension=aws.DIMENSION,
        MinCapacity=3, MaxCapacity=7, SuspendedState=ORIGINAL,
    )
    world = World(aws_env)
    real_update = SageMakerModelBackend.update_endpoint_weights_and_capacities

    def updating(self, endpoint_name, desired_weights_and_capacities):
        old = self.endpoints[endpoint_name].production_variants[0]["CurrentInstanceCount"]
        arn = real_update(self, endpoint_name, desired_weights_and_capacities)
        ep = self.endpoints[endpoint_name]
        ep.endpoint_status = "Updating"
        ep.production_variants[0]["CurrentInstanceCount"] = old
        world.updates.append(desired_weights_and_capacities[0]["DesiredInstanceCount"])
        world.pending = world.update_ticks
        return arn

    monkeypatch.setattr(SageMakerModelBackend, "update_endpoint_weights_and_capacities", updating)
    return world


class World:
    """Time passing for moto: each ``sleep`` is one poll. Finishes pending endpoint updates after a
    few polls, publishes ConcurrentRequestsPerModel ``metric_delay`` polls after a CloudWatch wait
    began (value = ``ratio`` x the level's concurrency), records what a watcher would have seen."""

    def __init__(self, sess, update_ticks: int = 2):
        from moto.backends import get_backend

        self.sm = get_backend("sagemaker")["123456789012"]["us-east-1"]
        self.cw = sess.client("cloudwatch")
        self.sess = sess
        self.update_ticks = update_ticks
        self.pending = 0
        self.updates: list[int] = []
        self.metric_delay: int | None = None
        self.ratio = 1.5
        self.level = 1
        self.waiting = 0
        self.published = 0
        self.seen: list[tuple[str, int, int]] = []
        self.interrupt_after: int | None = None
        self.ticks = 0

    def sleep(self, s: float) -> None:
        time.sleep(min(s, 0.01))
        self.ticks += 1
        ep = self.sm.endpoints[ENDPOINT]
        pv = ep.production_variants[0]
        self.seen.append((ep.endpoint_status, pv["CurrentInstanceCount"], pv["DesiredInstanceCount"]))
        if self.pending:
            self.pending -= 1
            if self.pending == 0:
                pv["CurrentInstanceCount"] = pv["DesiredInstanceCount"]
                ep.endpoint_status = "InService"
            return
        if self.interrupt_after is not None and self.ticks >= self.interrupt_after:
            raise KeyboardInterrupt  # Ctrl-C while CloudWatch is being waited for
        if self.metric_delay is not None:
            self.waiting += 1
            if self.waiting >= self.metric_delay:
                self.publish()
                self.waiting = 0

    def publish(self) -> None:
        now = time.time()
        first, last = math.floor((now - 30) / 10) * 10, math.floor(now / 10) * 10
        self.cw.put_metric_data(Namespace="AWS/SageMaker", MetricData=[
            {"MetricName": aws.METRIC, "Value": self.ratio * self.level, "StorageResolution": 1,
             "Timestamp": datetime.fromtimestamp(t, tz=UTC),
             "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": "AllTraffic"}]}
            for t in range(first, last + 1, 10)
        ])
        self.published += 1


def _scaling(sess):
    t = aws.scalable_target(sess, ENDPOINT)
    return t["MinCapacity"], t["MaxCapacity"], aws.suspended(t)


def _counts(sess):
    return aws.variant_counts(aws.describe_endpoint(sess, ENDPOINT))


def _run(sess, world, synthetic, out, *extra: str) -> int:
    args = build_parser().parse_args([
        "qmax", "--endpoint", ENDPOINT, "--slo-ms", "1000", "--settle-s", "0.1", "--measure-s", "0.4",
        "--poll-s", "0.01", "--pin-timeout-s", "5", "--out", str(out), *extra])
    return qmax_cmd.run(args, session=sess, load_target=HttpTarget(synthetic.url), sleep=world.sleep)


def test_three_instances_pinned_to_one_and_restored_late_metrics_waited_for(fleet, synthetic_40ms, tmp_path, capsys):
    fleet.metric_delay = 3
    rc = _run(fleet.sess, fleet, synthetic_40ms, tmp_path / "out", "--levels", "1", "--no-refine",
              "--cloudwatch-wait-s", "30")
    assert rc == 0, capsys.readouterr().err
    # Pinned: desired 1, then Updating with 3 running until exactly one instance was InService.
    assert fleet.updates == [1, 3]
    assert ("Updating", 3, 1) in fleet.seen and ("InService", 1, 1) in fleet.seen
    # Restored: the scalable target exactly, and the desired count back to 3 (the endpoint then scales out).
    assert _scaling(fleet.sess) == (3, 7, ORIGINAL)
    assert _counts(fleet.sess)[1] == 3
    fleet.sleep(0)
    fleet.sleep(0)
    assert _counts(fleet.sess) == (3, 3)
    assert not state_path(None, ENDPOINT).exists()

    a = load_artifact(next((tmp_path / "out").glob("qmax-*.json")), QmaxArtifact)
    assert a.instances == 1
    # CloudWatch published three polls late; the level waited for it instead of assuming 1.0.
    assert fleet.published >= 1
    lv = a.ladder[0]
    assert lv.concurrency == 1 and lv.cloudwatch_concurrency_max == 1.5
    assert a.cloudwatch_ratio_source == "measured"
    assert a.cloudwatch_ratio == round(1.5 / lv.client_concurrency_mean, 4)
    assert "CloudWatch max 1.5" in capsys.readouterr().err


def test_ctrl_c_restores_three_instances_and_scaling(fleet, synthetic_40ms, tmp_path):
    fleet.metric_delay = 1000  # never arrives: the interrupt lands while CloudWatch is awaited
    fleet.interrupt_after = 4
    args = build_parser().parse_args([
        "qmax", "--endpoint", ENDPOINT, "--levels", "1,2", "--settle-s", "0.1", "--measure-s", "0.3",
        "--poll-s", "0.01", "--cloudwatch-wait-s", "30", "--out", str(tmp_path / "out"), "--json"])
    with pytest.raises(KeyboardInterrupt):
        qmax_cmd.run(args, session=fleet.sess, load_target=HttpTarget(synthetic_40ms.url), sleep=fleet.sleep)
    assert ("InService", 1, 1) in fleet.seen  # it was measuring one instance when interrupted
    assert fleet.updates == [1, 3]
    assert _scaling(fleet.sess) == (3, 7, ORIGINAL)
    assert _counts(fleet.sess)[1] == 3
    assert not state_path(None, ENDPOINT).exists()
    assert not (tmp_path / "out").exists()


def test_metrics_that_never_arrive_are_assumed_and_plan_warns(fleet, synthetic_40ms, tmp_path, capsys):
    rc = _run(fleet.sess, fleet, synthetic_40ms, tmp_path / "out", "--levels", "1,2", "--no-refine",
              "--cloudwatch-wait-s", "0.05", "--json")
    assert rc == 0
    qf = next((tmp_path / "out").glob("qmax-*.json"))
    a = load_artifact(qf, QmaxArtifact)
    assert a.cloudwatch_ratio_source == "assumed" and a.cloudwatch_ratio == 1.0 and a.instances == 1
    assert all(lv.cloudwatch_concurrency_max is None for lv in a.ladder)
    assert a.provenance.target == f"sagemaker:{ENDPOINT}"

    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    tf = write_artifact(tmp_path / "t.json", t.model_copy(update={"fingerprint": Fingerprint.of(INSTANCE, DIGEST)}))
    capsys.readouterr()
    assert main(["plan", "--qmax", str(qf), "--ttotal", str(tf), "--peak-rps", "50", "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "[WARN] cloudwatch_ratio: CloudWatch/client ratio assumed 1.0" in out


def test_levels_starting_higher_still_measure_concurrency_one(fleet, synthetic_40ms, tmp_path):
    rc = _run(fleet.sess, fleet, synthetic_40ms, tmp_path / "out", "--levels", "3,4", "--no-refine",
              "--cloudwatch-wait-s", "0", "--json")
    assert rc == 0
    a = load_artifact(next((tmp_path / "out").glob("qmax-*.json")), QmaxArtifact)
    assert [lv.concurrency for lv in a.ladder] == [1, 3, 4]
    # The uncontended service time is concurrency 1's, not the lowest scheduled level's.
    assert a.service_time.p95_ms == a.ladder[0].ttfab_p95_ms
    assert a.service_time.p95_ms < a.ladder[1].ttfab_p95_ms


@pytest.mark.parametrize("how", ["refused", "never"])
def test_cannot_get_to_one_instance_refuses_and_restores(fleet, synthetic_40ms, tmp_path, capsys, monkeypatch, how):
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.models import SageMakerModelBackend

    def update(self, endpoint_name, desired_weights_and_capacities):
        if how == "refused":
            raise ValidationError("The account-level service limit 'ml.m5.large for endpoint usage' is 0 Instances")
        return self.endpoints[endpoint_name].arn  # accepted, but capacity never changes

    monkeypatch.setattr(SageMakerModelBackend, "update_endpoint_weights_and_capacities", update)
    rc = main(["qmax", "--endpoint", ENDPOINT, "--levels", "1", "--settle-s", "0", "--measure-s", "0.2",
               "--poll-s", "0.01", "--pin-timeout-s", "0.2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("TargetError: ") and "Traceback" not in err
    if how == "refused":
        assert "cannot set 1 instance(s)" in last and "service limit" in last
    else:
        assert "did not reach exactly 1 instance(s) within 0.2 s" in last and "quota" in last
    assert _scaling(fleet.sess) == (3, 7, ORIGINAL) and _counts(fleet.sess) == (3, 3)
    assert not state_path(None, ENDPOINT).exists() and not (tmp_path / "out").exists()


def test_url_artifacts_carry_not_applicable(synthetic_40ms, tmp_path):
    rc = main(["qmax", "--url", synthetic_40ms.url, "--levels", "1,2", "--no-refine", "--slo-ms", "1000",
               "--settle-s", "0.1", "--measure-s", "0.3", "--out", str(tmp_path), "--json"])
    assert rc == 0
    data = json.loads(next(tmp_path.glob("qmax-*.json")).read_text())
    assert data["cloudwatch_ratio_source"] == "not_applicable" and data["cloudwatch_ratio"] == 1.0
    assert data["instances"] == 1 and data["schema_version"] == 2


def test_thaw_after_a_killed_run_gives_back_the_instances(fleet, capsys):
    import signal

    from bench.aws.freeze import Freeze

    f = Freeze(fleet.sess, ENDPOINT, instances=1, poll_s=0.01, sleep=fleet.sleep, log=lambda m: None)
    f.__enter__()  # killed outright: never exited
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert _counts(fleet.sess) == (1, 1) and _scaling(fleet.sess)[:2] == (1, 1)
    saved = json.loads(state_path(None, ENDPOINT).read_text())
    assert saved["desired_instance_count"] == 3 and saved["pinned_instances"] == 1
    assert main(["thaw", "--endpoint", ENDPOINT]) == 0
    assert "desired instance count 3" in capsys.readouterr().out
    assert _scaling(fleet.sess) == (3, 7, ORIGINAL) and _counts(fleet.sess)[1] == 3
    assert not state_path(None, ENDPOINT).exists()


# --- receipts (issue 19) -----------------------------------------------------------------------


def test_a_sagemaker_run_leaves_a_receipt_that_bench_plan_records(fleet, synthetic_40ms, tmp_path, capsys):
    import json as _json

    from speech.schema.artifacts import canonical_sha256
    from speech.schema.receipts import Receipt, receipt_key

    s3 = fleet.sess.client("s3")
    s3.create_bucket(Bucket="stack-provenance")
    rc = _run(fleet.sess, fleet, synthetic_40ms, tmp_path / "out", "--levels", "1", "--no-refine",
              "--cloudwatch-wait-s", "0", "--receipt-bucket", "stack-provenance")
    assert rc == 0, capsys.readouterr().err
    a = load_artifact(next((tmp_path / "out").glob("qmax-*.json")), QmaxArtifact)
    assert a.provenance.target == f"sagemaker:{ENDPOINT}" and a.provenance.region == "us-east-1"
    assert a.provenance.tool_version and a.provenance.ended_at >= a.provenance.measured_at
    key = receipt_key(a.model, "qmax", canonical_sha256(a))
    assert f"receipt s3://stack-provenance/{key}" in capsys.readouterr().err
    receipt = Receipt.model_validate_json(s3.get_object(Bucket="stack-provenance", Key=key)["Body"].read())
    assert receipt.artifact_sha256 == canonical_sha256(a) and receipt.endpoint == ENDPOINT
    assert receipt.caller_account == fleet.sess.client("sts").get_caller_identity()["Account"]
    assert receipt.started_at == a.provenance.measured_at and receipt.ended_at == a.provenance.ended_at

    # A second receipt for the same artifact is refused, never overwritten.
    from bench.aws.receipts import write_receipt
    from bench.errors import BenchError

    with pytest.raises(BenchError, match="already exists"):
        write_receipt(fleet.sess, "stack-provenance", a)
    # The artifact as it would sit in stack config records exactly that key; edits to either are refused.
    from speech.schema.config import Measurements

    ttotal = _json.loads((REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json").read_text())
    ttotal["fingerprint"] = _json.loads(a.fingerprint.model_dump_json())
    m = Measurements.model_validate({"qmax": _json.loads(a.model_dump_json()), "ttotal": ttotal, "qmax_receipt": key})
    assert m.qmax_receipt == key
    with pytest.raises(ValueError, match="is not this artifact's receipt"):
        Measurements.model_validate({"qmax": {**_json.loads(a.model_dump_json()), "q_max": a.q_max}, "ttotal": ttotal,
                                     "qmax_receipt": key.replace(key[-12:-5], "0000000")})
    with pytest.raises(ValueError, match="a reference artifact .* cannot claim a receipt"):
        Measurements.model_validate({"qmax": _json.loads(a.model_dump_json()), "ttotal": ttotal, "ttotal_receipt": key})
    # The same run against a local server: no bucket, so no receipt to claim.
    local = _json.loads(a.model_dump_json())
    local["fingerprint"] = _json.loads(Fingerprint.of("local", DIGEST).model_dump_json())
    local["provenance"].update(target="local:http://127.0.0.1:8080", region=None)
    local["cloudwatch_ratio_source"], local["cloudwatch_ratio"] = "not_applicable", 1.0
    for lv in local["ladder"]:
        lv["cloudwatch_concurrency_max"] = None
    with pytest.raises(ValueError, match="'local:http://127.0.0.1:8080' cannot claim a receipt"):
        Measurements.model_validate({"qmax": local, "ttotal": ttotal, "qmax_receipt": key})


def test_the_receipt_bench_leaves_is_what_the_program_reads_back(fleet, synthetic_40ms, tmp_path, capsys):
    """The chain of issue 19 on moto: bench qmax --receipt-bucket writes the receipt, bench plan
    --stack records its key, and the program (under Pulumi's mocks) reads that very object back
    from the bucket and tags the endpoint with its sha256."""
    from speech.infra.preview import load_receipts, run_preview
    from speech.schema.artifacts import canonical_sha256
    from speech.schema.receipts import RECEIPT_TAGS

    from ..conftest import IMAGE, MODEL, STACK

    fleet.sess.client("s3").create_bucket(Bucket="stack-provenance")
    rc = _run(fleet.sess, fleet, synthetic_40ms, tmp_path / "out", "--levels", "1,2", "--no-refine",
              "--cloudwatch-wait-s", "0", "--receipt-bucket", "stack-provenance")
    assert rc == 0, capsys.readouterr().err
    qf = next((tmp_path / "out").glob("qmax-*.json"))
    q = load_artifact(qf, QmaxArtifact)
    # A ttotal of the same fingerprint (reference figures: they take no receipt).
    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    tf = write_artifact(tmp_path / "t.json", t.model_copy(update={"fingerprint": q.fingerprint}))
    assert main(["plan", "--qmax", str(qf), "--ttotal", str(tf), "--peak-rps", "20", "--stack", STACK,
                 "--stack-dir", str(tmp_path), "--image", IMAGE, "--out", str(tmp_path / "plan")]) in (0, 1)
    capsys.readouterr()

    result = run_preview(tmp_path / f"Pulumi.{STACK}.yaml", STACK, receipts=load_receipts("s3://stack-provenance"))
    [listed] = [a for tok, a in result.invokes if tok == "aws:s3/getObjects:getObjects"]
    assert listed["prefix"] == f"receipts/{MODEL}/qmax-{canonical_sha256(q).removeprefix('sha256:')}.json"
    tags = result.named(f"{MODEL}-endpoint").inputs["tags"]
    assert tags[RECEIPT_TAGS["qmax"]] == canonical_sha256(q)
    assert RECEIPT_TAGS["ttotal"] not in tags
    # The same stack with nothing in the bucket: the read finds no receipt.
    tags = run_preview(tmp_path / f"Pulumi.{STACK}.yaml", STACK).named(f"{MODEL}-endpoint").inputs["tags"]
    assert tags[RECEIPT_TAGS["qmax"]] == "none"
