"""Fixtures: real servers on 127.0.0.1 (bench.load.synthetic in its own process) and moto in-process
as the AWS stand-in, shaped the way the Pulumi program deploys an endpoint (docs/design.md §5)."""

from __future__ import annotations

import json
import os
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.load.synthetic import SyntheticServer
from speech.deploy.scaling import scaling_spec
from speech.files import load_artifact
from speech.plan.realtime import build_plan
from speech.schema.artifacts import Fingerprint, QmaxArtifact, TtotalArtifact
from speech.schema.config import Measurements, ModelConfig, PlanInputs
from speech.schema.plan_artifacts import PlanArtifact

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "artifacts" / "reference"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/kokoro@{DIGEST}"
STACK = "test"
MODEL = "kokoro-82m"
ENDPOINT = f"{STACK}-{MODEL}"
INSTANCE = "ml.m5.large"  # moto rejects ml.g5.* in endpoint configs


@pytest.fixture(scope="session")
def synthetic_40ms():
    # 40 ms keeps the known capacity readable on a shared 2-core machine (a few ms of scheduling
    # noise per request must not move Q_max by more than one step).
    with SyntheticServer(service_ms=40) as s:
        yield s


@pytest.fixture
def ref_artifacts() -> tuple[QmaxArtifact, TtotalArtifact]:
    q = load_artifact(REF / "qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json", QmaxArtifact)
    t = load_artifact(REF / "ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json", TtotalArtifact)
    return q, t


@pytest.fixture
def plan_inputs() -> PlanInputs:
    return PlanInputs(slo_ms=3000, surge_ratio=1.25, peak_rps=50, trough_rps=10, min_instances=1)


@pytest.fixture
def ref_plan(ref_artifacts, plan_inputs) -> PlanArtifact:
    return build_plan(*ref_artifacts, plan_inputs)


@pytest.fixture
def model_config(ref_artifacts, plan_inputs) -> ModelConfig:
    """The stack entry of the endpoint create_endpoint deploys, with measurements of that endpoint
    (the reference figures, fingerprinted as what runs there: bench drift compares the two)."""
    fp = Fingerprint.of(INSTANCE, DIGEST)
    q, t = (a.model_copy(update={"fingerprint": fp}) for a in ref_artifacts)
    return ModelConfig(instance_type=INSTANCE, image=IMAGE, plan=plan_inputs, measurements=Measurements(qmax=q, ttotal=t))


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "SPEECH_ENDPOINTS_STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(k, v)
    from moto import mock_aws

    with mock_aws():
        import boto3

        yield boto3.session.Session(region_name="us-east-1")


def create_endpoint(sess, name: str = ENDPOINT, instances: int = 1) -> None:
    sm = sess.client("sagemaker")
    sm.create_model(
        ModelName=name, ExecutionRoleArn="arn:aws:iam::123456789012:role/sm",
        PrimaryContainer={"Image": IMAGE},
    )
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": instances,
                             "InstanceType": INSTANCE, "InitialVariantWeight": 1.0}],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def _step_config(p) -> dict:
    steps = []
    for st in p.steps:
        bounds = {k: v for k, v in (("MetricIntervalLowerBound", st.lower_bound), ("MetricIntervalUpperBound", st.upper_bound))
                  if v is not None}
        steps.append({**bounds, "ScalingAdjustment": st.scaling_adjustment})
    cfg = {"AdjustmentType": p.adjustment_type, "Cooldown": p.cooldown_s, "MetricAggregationType": p.aggregation,
           "StepAdjustments": steps}
    if p.min_adjustment_magnitude is not None:
        cfg["MinAdjustmentMagnitude"] = p.min_adjustment_magnitude
    return cfg


def deploy_scaling(sess, plan: PlanArtifact, endpoint: str = ENDPOINT) -> dict[str, str]:
    """What the Pulumi program creates for a measured, feasible plan (its scaling spec, written
    here with the AWS API's own keys); returns policy role -> ARN."""
    spec = scaling_spec(plan, endpoint)
    aas = sess.client("application-autoscaling")
    cw = sess.client("cloudwatch")
    t = spec.target
    common = dict(ServiceNamespace=t.service_namespace, ResourceId=t.resource_id, ScalableDimension=t.scalable_dimension)
    aas.register_scalable_target(**common, MinCapacity=t.min_capacity, MaxCapacity=t.max_capacity)
    out = spec.scale_out
    arns = {}
    arns["out"] = aas.put_scaling_policy(
        PolicyName=out.name, PolicyType=out.policy_type, **common,
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": out.target_value,
            "PredefinedMetricSpecification": {"PredefinedMetricType": out.metric_type},
            "ScaleOutCooldown": out.scale_out_cooldown_s, "ScaleInCooldown": out.scale_in_cooldown_s,
            "DisableScaleIn": out.disable_scale_in,
        },
    )["PolicyARN"]
    for role, policy, alarm in (("scale-in", spec.scale_in, spec.scale_in_alarm), ("surge", spec.surge, spec.surge_alarm)):
        arn = aas.put_scaling_policy(PolicyName=policy.name, PolicyType=policy.policy_type, **common,
                                     StepScalingPolicyConfiguration=_step_config(policy))["PolicyARN"]
        arns[role] = arn
        cw.put_metric_alarm(
            AlarmName=alarm.name, AlarmDescription=alarm.description, Namespace=alarm.namespace,
            MetricName=alarm.metric_name, Statistic=alarm.statistic,
            Dimensions=[{"Name": k, "Value": v} for k, v in alarm.dimensions],
            Period=alarm.period_s, EvaluationPeriods=alarm.evaluation_periods, DatapointsToAlarm=alarm.datapoints_to_alarm,
            Threshold=alarm.threshold, ComparisonOperator=alarm.comparison, TreatMissingData=alarm.treat_missing_data,
            AlarmActions=[arn],
        )
    for a in spec.scheduled:
        aas.put_scheduled_action(ScheduledActionName=a.name, Schedule=a.schedule, Timezone=a.timezone, **common,
                                 ScalableTargetAction={"MinCapacity": a.min_capacity,
                                                                       **({} if a.max_capacity is None else
                                                                          {"MaxCapacity": a.max_capacity})})
    return arns


@pytest.fixture
def deployed(aws_env, ref_plan):
    create_endpoint(aws_env)
    deploy_scaling(aws_env, ref_plan)
    return aws_env


def state_dir() -> Path:
    return Path(os.environ["SPEECH_ENDPOINTS_STATE_DIR"])


# --- AWS faults at botocore's before-send (tests/bench/aws/test_aws_faults*.py) -------------------------


class _Raw:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_):
        yield self.body


class Faults:
    """Per operation, a list of faults to serve in order ("throttle", "drop", "deny"; None passes;
    the last one repeats). ``answer[op]`` stands in for AWS where moto has no such call (it gets
    the HTTP request and returns an AWSResponse, or None to leave it to moto); anything else passes
    on to moto."""

    def __init__(self):
        self.plan: dict[str, list[str | None]] = {}
        self.calls: dict[str, int] = {}
        self.sleeps: list[float] = []
        self.answer: dict[str, Callable] = {}

    def __call__(self, request, event_name, **_):
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ClientError, ConnectionClosedError

        op = event_name.rsplit(".", 1)[-1]
        self.calls[op] = self.calls.get(op, 0) + 1
        queue = self.plan.get(op)
        fault = (queue.pop(0) if len(queue) > 1 else queue[0]) if queue else None
        if fault == "throttle":
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
            return self._answered(request, AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"},
                                                       _Raw(body)))
        if fault == "drop":
            raise ConnectionClosedError(endpoint_url=request.url)
        if fault == "deny":  # raised, so no later handler (moto) carries the call out
            raise ClientError({"Error": {"Code": "AccessDeniedException",
                                         "Message": "User is not authorized to perform this action"}}, op)
        if op in self.answer:
            return self._answered(request, self.answer[op](request))
        return None

    @staticmethod
    def _answered(request, response):
        """botocore emits before-send to every handler: hide the request's URL from moto's, so the
        call answered here (a throttled one, too) is not also carried out there. ``restore_url``,
        registered last, puts the URL back for a retry of the same request."""
        if response is not None:
            request.faults_url, request.url = request.url, "http://answered.by.faults.invalid/"
        return response

    @staticmethod
    def restore_url(request, **_):
        if getattr(request, "faults_url", None):
            request.url, request.faults_url = request.faults_url, None


def json_response(request, body: dict, status: int = 200):
    """An AWS JSON-protocol answer (SageMaker, Application Auto Scaling) to ``request``."""
    from botocore.awsrequest import AWSResponse

    return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(json.dumps(body).encode()))


@pytest.fixture
def faults(monkeypatch, aws_env):
    import botocore.endpoint
    import botocore.session

    f = Faults()
    real = botocore.session.get_session

    def get_session(*a, **kw):  # every session bench.aws.client.session() makes gets the injector first
        s = real(*a, **kw)
        s.get_component("event_emitter").register_first("before-send", f)
        s.get_component("event_emitter").register_last("before-send", f.restore_url)
        return s

    monkeypatch.setattr(botocore.session, "get_session", get_session)
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=f.sleeps.append))
    return f
